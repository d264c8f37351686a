package keras

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/nn"
)

// The layers and options keras.applications and saved models use (issue
// 26): each maps onto the nn layer with Keras' settings, shapes and counts.
func TestApplicationLayers(t *testing.T) {
	ptr := func(f nn.Factor) *nn.Factor { return &f }
	tests := []struct {
		js     string
		want   any
		out    []int
		params int
	}{
		{one([]int{7, 7, 4}, "Dropout", `, "rate": 0.2, "noise_shape": [null, 1, 1, 1]`),
			&nn.Dropout{LayerName: "l", Rate: 0.2, NoiseShape: []int{0, 1, 1, 1}}, []int{7, 7, 4}, 0},
		{one([]int{5, 4}, "Dropout", `, "rate": 0.5, "noise_shape": [1, 1, null]`),
			&nn.Dropout{LayerName: "l", Rate: 0.5, NoiseShape: []int{1, 1, 0}}, []int{5, 4}, 0},
		{one([]int{7, 7, 4}, "GlobalAveragePooling2D", `, "keepdims": true`),
			&nn.GlobalAveragePooling2D{LayerName: "l", KeepDims: true}, []int{1, 1, 4}, 0},
		{one([]int{9, 4}, "GlobalMaxPooling1D", `, "keepdims": true`),
			&nn.GlobalPooling1D{LayerName: "l", Max: true, KeepDims: true}, []int{1, 4}, 0},
		{one([]int{8, 8, 3}, "Rescaling", `, "scale": [2.0, 2.1, 2.2], "offset": 0.0`),
			&nn.Rescaling{LayerName: "l", Scales: []float64{2, 2.1, 2.2}}, []int{8, 8, 3}, 0},
		{one([]int{8, 8, 3}, "Rescaling", `, "scale": 0.0078125, "offset": -1`),
			&nn.Rescaling{LayerName: "l", Scale: 0.0078125, Offset: -1}, []int{8, 8, 3}, 0},
		{`{"class_name": "Sequential", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 6, 6, 8]}},
			{"module": "keras.src.applications.convnext", "class_name": "LayerScale", "registered_name": "LayerScale",
			"config": {"name": "l", "init_values": 1e-6, "projection_dim": 8}}]}}`,
			&nn.LayerScale{LayerName: "l", InitValues: 1e-6}, []int{6, 6, 8}, 8},
		{`{"class_name": "Sequential", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 6, 6, 8]}},
			{"module": "keras.src.applications.convnext", "class_name": "StochasticDepth", "registered_name": "StochasticDepth",
			"config": {"name": "l", "drop_path_rate": 0.1}}]}}`,
			&nn.Dropout{LayerName: "l", Rate: 0.1, NoiseShape: []int{0, 1, 1, 1}}, []int{6, 6, 8}, 0},
		{one([]int{256, 256, 3}, "Resizing", `, "height": 128, "width": 96, "interpolation": "nearest", "crop_to_aspect_ratio": true`),
			&nn.Resizing{LayerName: "l", Height: 128, Width: 96, Interpolation: "nearest", CropToAspectRatio: true}, []int{128, 96, 3}, 0},
		{one([]int{8, 8, 3}, "RandomFlip", `, "mode": "horizontal", "seed": 3`),
			&nn.RandomFlip{LayerName: "l", Mode: "horizontal"}, []int{8, 8, 3}, 0},
		// tf.keras 2 flips each axis on a draw of its own
		{`{"class_name": "Sequential", "keras_version": "2.11.0", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"name": "in", "batch_input_shape": [null, 8, 8, 3]}},
			{"class_name": "RandomFlip", "config": {"name": "l", "mode": "horizontal_and_vertical", "seed": null}}]}}`,
			&nn.RandomFlip{LayerName: "l", Mode: "horizontal_and_vertical", Independent: true}, []int{8, 8, 3}, 0},
		{one([]int{8, 8, 3}, "RandomRotation", `, "factor": [-0.2, 0.2], "fill_mode": "reflect", "interpolation": "bilinear", "fill_value": 0.0`),
			&nn.RandomRotation{LayerName: "l", Factor: nn.Factor{Lower: -0.2, Upper: 0.2}, Resampling: nn.Resampling{Interpolation: "bilinear", FillMode: "reflect"}}, []int{8, 8, 3}, 0},
		{one([]int{8, 8, 3}, "RandomRotation", `, "factor": 0.1`),
			&nn.RandomRotation{LayerName: "l", Factor: nn.Factor{Lower: -0.1, Upper: 0.1}, Resampling: nn.Resampling{Interpolation: "bilinear", FillMode: "reflect"}}, []int{8, 8, 3}, 0},
		{one([]int{8, 8, 3}, "RandomZoom", `, "height_factor": [0.3, -0.2], "width_factor": null, "fill_mode": "constant", "fill_value": 1`),
			&nn.RandomZoom{LayerName: "l", HeightFactor: nn.Factor{Lower: -0.2, Upper: 0.3}, Resampling: nn.Resampling{Interpolation: "bilinear", FillMode: "constant", FillValue: 1}}, []int{8, 8, 3}, 0},
		{one([]int{8, 8, 3}, "RandomZoom", `, "height_factor": 0.2, "width_factor": 0.1, "interpolation": "nearest"`),
			&nn.RandomZoom{LayerName: "l", HeightFactor: nn.Factor{Lower: -0.2, Upper: 0.2}, WidthFactor: ptr(nn.Factor{Lower: -0.1, Upper: 0.1}),
				Resampling: nn.Resampling{Interpolation: "nearest", FillMode: "reflect"}}, []int{8, 8, 3}, 0},
		{one([]int{8, 8, 3}, "RandomTranslation", `, "height_factor": 0.1, "width_factor": [-0.3, 0.2], "fill_mode": "wrap"`),
			&nn.RandomTranslation{LayerName: "l", HeightFactor: nn.Factor{Lower: -0.1, Upper: 0.1}, WidthFactor: nn.Factor{Lower: -0.3, Upper: 0.2},
				Resampling: nn.Resampling{Interpolation: "bilinear", FillMode: "wrap"}}, []int{8, 8, 3}, 0},
		// Keras 3 reads a number f as (0, f), tf.keras 2 as (f, f)
		{one([]int{8, 8, 3}, "RandomContrast", `, "factor": 0.2`),
			&nn.RandomContrast{LayerName: "l", Factor: nn.Factor{Lower: 0, Upper: 0.2}, ValueRange: [2]float64{0, 255}}, []int{8, 8, 3}, 0},
		{one([]int{8, 8, 3}, "RandomContrast", `, "factor": [0.1, 0.3], "value_range": [0, 1]`),
			&nn.RandomContrast{LayerName: "l", Factor: nn.Factor{Lower: 0.1, Upper: 0.3}, ValueRange: [2]float64{0, 1}}, []int{8, 8, 3}, 0},
		{`{"class_name": "Sequential", "keras_version": "2.9.0", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"name": "in", "batch_input_shape": [null, 8, 8, 3]}},
			{"class_name": "RandomContrast", "config": {"name": "l", "factor": 0.2}}]}}`,
			&nn.RandomContrast{LayerName: "l", Factor: nn.Factor{Lower: 0.2, Upper: 0.2}, ValueRange: [2]float64{0, 255}}, []int{8, 8, 3}, 0},
		// a 16-bit policy plans as float32
		{one([]int{4}, "Dense", `, "units": 3, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "mixed_float16"}}`),
			&nn.Dense{LayerName: "l", Units: 3, Activation: "linear"}, []int{3}, 15},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			m, err := Parse([]byte(tc.js), "a.json")
			if err != nil {
				t.Fatal(err)
			}
			got := m.Sequential.Layers[len(m.Sequential.Layers)-1]
			if !reflect.DeepEqual(any(got), tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
			if l := m.Layers[len(m.Layers)-1]; !l.Output.Equal(tc.out) || l.Params != tc.params {
				t.Errorf("got %v with %d params, want %v with %d", l.Output, l.Params, tc.out, tc.params)
			}
		})
	}
}

// What the new layers refuse, by name: preprocessing layers headroom has
// no layer for, options it does not compute.
func TestApplicationLayerErrors(t *testing.T) {
	for _, tc := range []struct {
		js          string
		unsupported bool
		contains    string
	}{
		{one([]int{8, 8, 3}, "RandomCrop", `, "height": 4, "width": 4`), true, "class RandomCrop is not supported yet"},
		{one([]int{8, 8, 3}, "RandomBrightness", `, "factor": 0.2`), true, "class RandomBrightness is not supported yet"},
		{one([]int{8, 8, 3}, "Resizing", `, "height": 4, "width": 4, "interpolation": "bicubic"`), true, "interpolation \"bicubic\""},
		{one([]int{8, 8, 3}, "Resizing", `, "height": 4, "width": 4, "antialias": true`), true, "antialias"},
		{one([]int{8, 8, 3}, "RandomRotation", `, "factor": 0.2, "fill_mode": "mirror"`), true, "fill_mode \"mirror\""},
		{one([]int{8, 8, 3}, "RandomRotation", `, "factor": 1.5`), false, "factor 1.5"},
		{one([]int{8, 8, 3}, "RandomZoom", `, "height_factor": [-1, 0.2]`), false, "above -1"},
		{one([]int{8, 8, 3}, "RandomTranslation", `, "height_factor": 0.2`), false, "width_factor is missing"},
		{`{"class_name": "Sequential", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 6, 6, 8]}},
			{"module": "keras.src.applications.convnext", "class_name": "LayerScale", "config": {"name": "l", "init_values": 1e-6, "projection_dim": 4}}]}}`,
			false, "projection_dim 4 does not match"},
		{`{"class_name": "Sequential", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 6]}},
			{"module": "my_project.layers", "class_name": "LayerScale", "config": {"name": "l", "init_values": 1e-6, "projection_dim": 6}}]}}`,
			true, "custom class LayerScale from module \"my_project.layers\""},
		{one([]int{4}, "Add", ``), false, "at least 2 inputs"},
		{`{"class_name": "Sequential", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 6]}},
			{"module": "keras.src.ops.numpy", "class_name": "Add", "config": {"name": "add"}}]}}`,
			true, "an operation node (keras.src.ops) in a Sequential model"},
	} {
		t.Run(tc.contains, func(t *testing.T) {
			_, err := Parse([]byte(tc.js), "e.json")
			if err == nil {
				t.Fatalf("got a model, want an error containing %q", tc.contains)
			}
			if got := errors.Is(err, ErrUnsupported); got != tc.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v, want %v (%v)", got, tc.unsupported, err)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("got %q, want it to contain %q", err, tc.contains)
			}
		})
	}
}

// opModel is a Keras 3 functional model of one input of per-example shape
// in and the given layers (JSON, each with its inbound nodes), whose
// output is the last.
func opModel(in string, layers ...string) string {
	last := layers[len(layers)-1]
	name := last[strings.Index(last, `"name": "`)+9:]
	name = name[:strings.IndexByte(name, '"')]
	return `{"class_name": "Functional", "config": {"name": "m", "layers": [
		{"class_name": "InputLayer", "name": "in", "config": {"batch_shape": [null, ` + in + `], "name": "in"}, "inbound_nodes": []},` +
		strings.Join(layers, ",") + `], "input_layers": [["in", 0, 0]], "output_layers": [["` + name + `", 0, 0]]}}`
}

// op is an operation node of class (module keras.src.ops.<mod>) named
// name, called with args (JSON) and with config keys conf.
func op(mod, class, name, conf, args string) string {
	return `{"module": "keras.src.ops.` + mod + `", "class_name": "` + class + `", "registered_name": "` + class + `", "name": "` + name +
		`", "config": {"name": "` + name + `"` + conf + `}, "inbound_nodes": [{"args": [` + args + `], "kwargs": {}}]}`
}

func tensorRef(layer string) string {
	return `{"class_name": "__keras_tensor__", "config": {"keras_history": ["` + layer + `", 0, 0]}}`
}

// The operation nodes Keras 3 writes for Python arithmetic and keras.ops
// calls map onto nn layers with the operation's shape arithmetic.
func TestOperationNodes(t *testing.T) {
	x := tensorRef("in")
	three := 3.0
	tests := []struct {
		name  string
		js    string
		want  any
		out   []int
		wantE string // an error instead
	}{
		{"x + 3", opModel("4, 5", op("numpy", "Add", "add", "", x+`, 3.0`)),
			&nn.Math{LayerName: "add", Fn: "add", Operands: []*float64{nil, &three}}, []int{4, 5}, ""},
		{"3 * x", opModel("4, 5", op("numpy", "Multiply", "multiply", "", `3, `+x)),
			&nn.Math{LayerName: "multiply", Fn: "multiply", Operands: []*float64{&three, nil}}, []int{4, 5}, ""},
		{"x + x", opModel("4, 5", op("numpy", "Add", "add", "", x+`, `+x)),
			&nn.Math{LayerName: "add", Fn: "add"}, []int{4, 5}, ""},
		{"x / 3", opModel("4", op("numpy", "TrueDivide", "true_divide", "", x+`, 3`)),
			&nn.Math{LayerName: "true_divide", Fn: "divide", Operands: []*float64{nil, &three}}, []int{4}, ""},
		{"mean", opModel("4, 5, 6", op("numpy", "Mean", "mean", `, "axis": [1, 2], "keepdims": true`, x)),
			&nn.Reduce{LayerName: "mean", Fn: "mean", Axes: []int{1, 2}, KeepDims: true}, []int{1, 1, 6}, ""},
		{"sum", opModel("4, 5", op("numpy", "Sum", "sum", `, "axis": -1, "keepdims": false`, x)),
			&nn.Reduce{LayerName: "sum", Fn: "sum", Axes: []int{-1}}, []int{4}, ""},
		{"reshape", opModel("4, 6", op("numpy", "Reshape", "reshape", `, "newshape": [-1, 2, 12]`, x)),
			&nn.Reshape{LayerName: "reshape", TargetShape: []int{2, 12}}, []int{2, 12}, ""},
		{"transpose", opModel("4, 6", op("numpy", "Transpose", "transpose", `, "axes": [0, 2, 1]`, x)),
			&nn.Permute{LayerName: "transpose", Dims: []int{2, 1}}, []int{6, 4}, ""},
		{"expand_dims", opModel("4", op("numpy", "ExpandDims", "expand_dims", `, "axis": -1`, x)),
			&nn.Reshape{LayerName: "expand_dims", TargetShape: []int{4, 1}}, []int{4, 1}, ""},
		{"squeeze", opModel("4, 1", op("numpy", "Squeeze", "squeeze", `, "axis": null`, x)),
			&nn.Reshape{LayerName: "squeeze", TargetShape: []int{4}}, []int{4}, ""},
		{"concatenate", opModel("4, 5", op("numpy", "Concatenate", "concatenate", `, "axis": 1`, `[`+x+`, `+x+`]`)),
			&nn.Concatenate{LayerName: "concatenate", Axis: 1}, []int{8, 5}, ""},
		{"relu", opModel("4", op("nn", "Relu", "relu", "", x)), &nn.Activation{LayerName: "relu", Fn: "relu"}, []int{4}, ""},
		{"gelu", opModel("4", op("nn", "Gelu", "gelu", `, "approximate": true`, x)), &nn.Math{LayerName: "gelu", Fn: "gelu_approximate"}, []int{4}, ""},
		{"softmax", opModel("4, 5", op("nn", "Softmax", "softmax", `, "axis": 1`, x)), &nn.Softmax{LayerName: "softmax", Axis: 1}, []int{4, 5}, ""},
		{"cast", opModel("4", op("core", "Cast", "cast", `, "dtype": "float16"`, x)), &nn.Activation{LayerName: "cast", Fn: "linear"}, []int{4}, ""},
		{"matmul", opModel("4, 4", op("numpy", "Matmul", "matmul", "", x+`, `+x)), nil, nil, "operation Matmul (keras.src.ops.numpy) is not supported yet"},
		{"mean of all", opModel("4", op("numpy", "Mean", "mean", `, "axis": null`, x)), nil, nil, "reduces the batch too"},
		{"ranks differ", opModel("4, 5", op("numpy", "Mean", "m", `, "axis": 2`, x), op("numpy", "Add", "add", "", x+`, `+tensorRef("m"))),
			nil, nil, "ranks 3 and 2"},
		{"constant string", opModel("4", op("numpy", "Add", "add", "", x+`, "a"`)), nil, nil, "constant \"a\" is not a number"},
		{"reshape of the batch", opModel("4, 6", op("numpy", "Reshape", "reshape", `, "newshape": [2, -1]`, x)), nil, nil, "keeps the batch first"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.js), "ops.json")
			if tc.wantE != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantE) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantE)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := m.Layers[len(m.Layers)-1]
			if !l.Output.Equal(tc.out) || l.Params != 0 {
				t.Errorf("got %v with %d params, want %v with none", l.Output, l.Params, tc.out)
			}
			var got any
			for _, fl := range m.Functional.Layers() {
				if fl.Name() == l.Name {
					got = fl
					// a one-input layer in a functional model is wrapped
					if v := reflect.ValueOf(fl); v.Kind() == reflect.Struct && v.NumField() == 1 {
						got = v.Field(0).Interface()
					}
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// A nested model whose input leaves sizes unknown (a backbone built with
// include_top=False and no input_shape, (None, None, 3)) takes them from
// its first call: here from the enclosing model's fixed input, a nested
// Functional in a Sequential and a nested Sequential in a Functional.
func TestNestedUnknownSizes(t *testing.T) {
	backbone := `{"module": "keras.src.models.functional", "class_name": "Functional", "name": "backbone", "config": {"name": "backbone", "layers": [
		{"class_name": "InputLayer", "name": "image", "config": {"batch_shape": [null, null, null, 3], "name": "image"}, "inbound_nodes": []},
		{"class_name": "Conv2D", "name": "conv", "config": {"name": "conv", "filters": 4, "kernel_size": 3}, "inbound_nodes": [{"args": [` + tensorRef("image") + `], "kwargs": {}}]},
		{"class_name": "GlobalAveragePooling2D", "name": "gap", "config": {"name": "gap"}, "inbound_nodes": [{"args": [` + tensorRef("conv") + `], "kwargs": {}}]}],
		"input_layers": [["image", 0, 0]], "output_layers": [["gap", 0, 0]]}}`
	seqModel := `{"class_name": "Sequential", "config": {"name": "s", "layers": [
		{"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 9, 9, 3]}}, ` + backbone + `,
		{"class_name": "Dense", "config": {"name": "d", "units": 2}}]}}`
	m, err := Parse([]byte(seqModel), "nested.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := 3*3*3*4 + 4 + 4*2 + 2; m.Params != want {
		t.Errorf("nested Functional: got %d params, want %d", m.Params, want)
	}
	inner := `{"class_name": "Sequential", "name": "tower", "config": {"name": "tower", "layers": [
		{"class_name": "InputLayer", "config": {"name": "steps", "batch_shape": [null, null, 4]}},
		{"class_name": "LSTM", "config": {"name": "lstm", "units": 3}}]},
		"inbound_nodes": [{"args": [` + tensorRef("in") + `], "kwargs": {}}]}`
	fn := opModel("5, 4", inner)
	m, err = Parse([]byte(fn), "nested.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := 4 * 3 * (4 + 3 + 1); m.Params != want {
		t.Errorf("nested Sequential: got %d params, want %d", m.Params, want)
	}
	// a call that does not fit the sizes the nested model states
	bad := strings.Replace(fn, `[null, null, 4]`, `[null, null, 6]`, 1)
	if _, err := Parse([]byte(bad), "nested.json"); err == nil || !strings.Contains(err.Error(), "the model takes (None, None, 6), its first call gives [5 4]") {
		t.Errorf("got %v, want an error that the call does not fit", err)
	}
}

// tf.keras 2's TFOpLambda layers of TensorFlow functions map as the Keras
// 3 operations of the same meaning: MobileNetV3's hard sigmoid
// (ReLU(6)(x + 3) * (1/6)), ConvNeXt's residual x + y, a reduce_mean with
// its axis and keepdims; other functions are refused by name.
func TestTFOpLambda(t *testing.T) {
	tfop := func(name, fn string, node []any) map[string]any {
		return k2layer("TFOpLambda", name, map[string]any{"function": fn, "dtype": "float32", "trainable": true}, node)
	}
	node := func(ref []any, kw map[string]any) []any { return []any{append(append([]any{}, ref...), kw)} }
	layers := []map[string]any{
		k2input("in", 4, 4, 3),
		tfop("tf.__operators__.add", "__operators__.add", node(at("in", 0, 0), map[string]any{"y": 3.0, "name": nil})),
		k2layer("ReLU", "re_lu", map[string]any{"max_value": 6.0}, call(at("tf.__operators__.add", 0, 0))),
		tfop("tf.math.multiply", "math.multiply", node(at("re_lu", 0, 0), map[string]any{"y": 1.0 / 6, "name": nil})),
		tfop("tf.__operators__.add_1", "__operators__.add", node(at("tf.math.multiply", 0, 0), map[string]any{"y": at("in", 0, 0), "name": nil})),
		tfop("tf.math.reduce_mean", "math.reduce_mean", node(at("tf.__operators__.add_1", 0, 0), map[string]any{"axis": []any{1, 2}, "keepdims": true, "name": nil})),
	}
	js := k2model(layers, [][]any{at("in", 0, 0)}, [][]any{at("tf.math.reduce_mean", 0, 0)})
	m, err := Parse([]byte(js), "tfop.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Layers[len(m.Layers)-1].Output; !got.Equal([]int{1, 1, 3}) || m.Params != 0 {
		t.Errorf("got output %v and %d params, want [1 1 3] and 0", got, m.Params)
	}
	layers[5] = tfop("tf.linalg.matmul", "linalg.matmul", node(at("tf.__operators__.add_1", 0, 0), map[string]any{"b": at("in", 0, 0)}))
	js = strings.ReplaceAll(k2model(layers, [][]any{at("in", 0, 0)}, [][]any{at("tf.linalg.matmul", 0, 0)}), "tf.math.reduce_mean", "tf.linalg.matmul")
	if _, err := Parse([]byte(js), "tfop.json"); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "class TFOpLambda of tf.linalg.matmul is not supported") {
		t.Errorf("got %v, want TFOpLambda of tf.linalg.matmul refused by name", err)
	}
}
