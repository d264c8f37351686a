package keras

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

type layerWant struct {
	name, class string
	out         tensor.Shape
	params      int
}

// TestTestdata reads the hand-written configs in testdata/, one per format,
// against counts worked out by hand from the layer arguments.
func TestTestdata(t *testing.T) {
	tests := []struct {
		file              string
		name, loss        string
		input             tensor.Shape
		inputDType        tensor.DType
		params, trainable int
		layers            []layerWant
	}{
		{
			// Keras' "Simple MNIST convnet" example; Keras reports 34,826.
			file: "mnist_convnet_k2.json", name: "sequential", input: tensor.Shape{28, 28, 1}, inputDType: tensor.Float32,
			params: 34826, trainable: 34826,
			layers: []layerWant{
				{"input_1", "InputLayer", tensor.Shape{28, 28, 1}, 0},
				{"conv2d", "Conv2D", tensor.Shape{26, 26, 32}, 3*3*1*32 + 32},
				{"max_pooling2d", "MaxPooling2D", tensor.Shape{13, 13, 32}, 0},
				{"conv2d_1", "Conv2D", tensor.Shape{11, 11, 64}, 3*3*32*64 + 64},
				{"max_pooling2d_1", "MaxPooling2D", tensor.Shape{5, 5, 64}, 0},
				{"flatten", "Flatten", tensor.Shape{1600}, 0},
				{"dropout", "Dropout", tensor.Shape{1600}, 0},
				{"dense", "Dense", tensor.Shape{10}, 1600*10 + 10},
			},
		},
		{
			// Keras 2.0: the config is a bare list; no model name.
			file: "mlp_k20_list.json", name: "sequential", input: tensor.Shape{784}, inputDType: tensor.Float32,
			params: 407050, trainable: 407050,
			layers: []layerWant{
				{"dense_1", "Dense", tensor.Shape{512}, 784*512 + 512},
				{"dropout_1", "Dropout", tensor.Shape{512}, 0},
				{"dense_2", "Dense", tensor.Shape{10}, 512*10 + 10},
			},
		},
		{
			// tfjs-layers: modelTopology is the config; camelCase loss.
			file: "tfjs_layers_embedding.json", name: "sequential_1", loss: "binary_crossentropy",
			input: tensor.Shape{20}, inputDType: tensor.Int32, params: 18609, trainable: 18609,
			layers: []layerWant{
				{"embedding_Embedding1", "Embedding", tensor.Shape{20, 16}, 1000 * 16},
				{"layer_normalization_LayerNormalization1", "LayerNormalization", tensor.Shape{20, 16}, 2 * 16},
				{"flatten_Flatten1", "Flatten", tensor.Shape{320}, 0},
				{"dense_Dense1", "Dense", tensor.Shape{8}, 320*8 + 8},
				{"dense_Dense2", "Dense", tensor.Shape{1}, 8 + 1},
			},
		},
		{
			// Keras 3: DTypePolicy, build_config, a frozen last layer
			// (trainable=false: its 330 params are not trainable).
			file: "k3_policy_pooling.json", name: "sequential_2", loss: "sparse_categorical_crossentropy",
			input: tensor.Shape{32, 32, 3}, inputDType: tensor.Float32,
			params: 432 + 64 + 4640 + 330, trainable: 432 + 32 + 4640,
			layers: []layerWant{
				{"input_layer_2", "InputLayer", tensor.Shape{32, 32, 3}, 0},
				{"conv2d_6", "Conv2D", tensor.Shape{32, 32, 16}, 3 * 3 * 3 * 16}, // no bias
				{"batch_normalization_4", "BatchNormalization", tensor.Shape{32, 32, 16}, 4 * 16},
				{"re_lu", "ReLU", tensor.Shape{32, 32, 16}, 0},
				{"average_pooling2d", "AveragePooling2D", tensor.Shape{16, 16, 16}, 0},      // strides null: the pool size
				{"conv2d_7", "Conv2D", tensor.Shape{8, 8, 32}, 3*3*16*32 + 32},              // same, stride 2: ceil(16/2)
				{"max_pooling2d_3", "MaxPooling2D", tensor.Shape{4, 4, 32}, 0},              // same, stride 2: ceil(8/2)
				{"global_average_pooling2d", "GlobalAveragePooling2D", tensor.Shape{32}, 0}, // -> channels
				{"dropout_5", "Dropout", tensor.Shape{32}, 0},
				{"dense_8", "Dense", tensor.Shape{10}, 32*10 + 10},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			m, err := Load(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if m.Name != tc.name || m.Sequential.Name != tc.name {
				t.Errorf("name: got %q (nn %q), want %q", m.Name, m.Sequential.Name, tc.name)
			}
			if m.Loss != tc.loss {
				t.Errorf("loss: got %q, want %q", m.Loss, tc.loss)
			}
			if !m.Sequential.InputShape.Equal(tc.input) {
				t.Errorf("input shape: got %v, want %v", m.Sequential.InputShape, tc.input)
			}
			if got := m.Sequential.InputType(); got != tc.inputDType {
				t.Errorf("input dtype: got %v, want %v", got, tc.inputDType)
			}
			if m.Params != tc.params || m.TrainableParams != tc.trainable {
				t.Errorf("params: got %d (%d trainable), want %d (%d trainable)", m.Params, m.TrainableParams, tc.params, tc.trainable)
			}
			if len(m.Layers) != len(tc.layers) {
				t.Fatalf("layers: got %d, want %d", len(m.Layers), len(tc.layers))
			}
			for i, w := range tc.layers {
				g := m.Layers[i]
				if g.Name != w.name || g.Class != w.class || !g.Output.Equal(w.out) || g.Params != w.params {
					t.Errorf("layer %d: got %s %s %v %d, want %s %s %v %d", i, g.Name, g.Class, g.Output, g.Params,
						w.name, w.class, w.out, w.params)
				}
			}
			// The nn model has one layer per Keras layer but the InputLayer,
			// with the same names; its own summary agrees.
			infos, total, err := m.Sequential.Summary()
			if err != nil {
				t.Fatal(err)
			}
			if total != tc.params {
				t.Errorf("nn total: got %d, want %d", total, tc.params)
			}
			k := 0
			for _, l := range m.Layers {
				if l.Class == "InputLayer" {
					continue
				}
				if k >= len(infos) || infos[k].Name != l.Name || !infos[k].Output.Equal(l.Output) || infos[k].Params != l.Params {
					t.Errorf("nn layer %d does not line up with Keras layer %s", k, l.Name)
				}
				k++
			}
			if k != len(infos) {
				t.Errorf("nn layers: got %d, want %d", len(infos), k)
			}
		})
	}
}

// TestMapping checks the arguments carried over onto the nn layers.
func TestMapping(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "k3_policy_pooling.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []nn.Layer{
		&nn.Conv2D{LayerName: "conv2d_6", Filters: 16, Kernel: [2]int{3, 3}, Strides: [2]int{1, 1}, Same: true,
			Activation: "linear", NoBias: true, KernelInit: nn.HeNormal{}},
		&nn.BatchNormalization{LayerName: "batch_normalization_4", Momentum: 0.9, Epsilon: 1e-5},
		&nn.Activation{LayerName: "re_lu", Fn: "relu"},
		&nn.Pool2D{LayerName: "average_pooling2d", Max: false, Pool: [2]int{2, 2}, Strides: [2]int{2, 2}},
		&nn.Conv2D{LayerName: "conv2d_7", Filters: 32, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true, Activation: "gelu"},
		&nn.Pool2D{LayerName: "max_pooling2d_3", Max: true, Pool: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true},
		&nn.GlobalAveragePooling2D{LayerName: "global_average_pooling2d"},
		&nn.Dropout{LayerName: "dropout_5", Rate: 0.3},
		// trainable=false: frozen (its weights are not trained)
		&frozen{inner: &nn.Dense{LayerName: "dense_8", Units: 10, Activation: "softmax"}},
	}
	if len(m.Sequential.Layers) != len(want) {
		t.Fatalf("nn layers: got %d, want %d", len(m.Sequential.Layers), len(want))
	}
	for i, w := range want {
		if g := m.Sequential.Layers[i]; !reflect.DeepEqual(g, w) {
			t.Errorf("nn layer %d: got %#v, want %#v", i, g, w)
		}
	}

	k20, err := Load(filepath.Join("testdata", "mlp_k20_list.json"))
	if err != nil {
		t.Fatal(err)
	}
	// VarianceScaling(1, fan_avg, uniform) is what Keras 2.0 wrote for glorot_uniform.
	if d, ok := k20.Sequential.Layers[0].(*nn.Dense); !ok || d.KernelInit != (nn.GlorotUniform{}) || d.Activation != "relu" {
		t.Errorf("Keras 2.0 dense: got %#v, want relu with glorot_uniform", k20.Sequential.Layers[0])
	}
}

// seq wraps layer JSON into a Keras 2 Sequential config.
func seq(layers ...string) string {
	return `{"class_name": "Sequential", "config": {"name": "s", "layers": [` + strings.Join(layers, ",") + `]}}`
}

func layer(class, config string) string {
	return `{"class_name": "` + class + `", "config": {` + config + `}}`
}

var (
	input28   = layer("InputLayer", `"name": "in", "batch_input_shape": [null, 28, 28, 1]`)
	flat28    = layer("Flatten", `"name": "flatten"`)
	dense10   = layer("Dense", `"name": "dense", "units": 10`)
	convValid = func(extra string) string {
		return layer("Conv2D", `"name": "conv", "filters": 4, "kernel_size": [3, 3]`+extra)
	}
)

// TestErrors checks that malformed and unsupported configs are errors that
// name the file and, where it applies, the layer.
func TestErrors(t *testing.T) {
	tests := []struct {
		name        string
		json        string
		index       int    // layer index the error names, -1 for none
		unsupported bool   // errors.Is(err, ErrUnsupported)
		contains    string // part of the message
	}{
		{"not json", `{"class_name": `, -1, false, "not valid JSON: it ends early, at byte 15"},
		{"bad json", `{"class_name": x}`, -1, false, "not valid JSON at byte 16"},
		{"trailing data", seq(input28, flat28) + `]`, -1, false, "after the top-level value"},
		{"array at top", `[1, 2]`, -1, false, "want a JSON object"},
		{"no model", `{"a": 1}`, -1, false, "no Keras model config"},
		{"subclassed", `{"class_name": "MyModel", "config": {"layers": []}}`, -1, true, "model class MyModel is not supported"},
		{"functional without layers", `{"class_name": "Functional", "config": {"layers": []}}`, -1, false, "config.layers: want a list of layers"},
		{"graph model", `{"format": "graph-model", "modelTopology": {}}`, -1, true, "graph model"},
		{"hdf5", "\x89HDF\r\n\x1a\n\x00\x00", -1, true, "HDF5"},
		{"zip without config", "PK\x03\x04garbage", -1, false, "zip archive"},
		{"model trainable not a bool", `{"class_name": "Sequential", "config": {"trainable": "yes", "layers": [` + input28 + `,` + flat28 + `]}}`, -1, false, "config.trainable: want true or false"},
		{"layer trainable not a bool", seq(input28, layer("Flatten", `"name": "f", "trainable": 1`)), 1, false, "trainable: want true or false"},
		{"layers not a list", `{"class_name": "Sequential", "config": {"layers": 3}}`, -1, false, "config.layers"},
		{"no layers", seq(), -1, false, "no layers"},
		{"input only", seq(input28), -1, false, "no layers besides its input"},
		{"layer not an object", seq(input28, `7`), 1, false, "want an object"},
		{"no class name", seq(input28, `{"config": {}}`), 1, false, "class_name"},
		{"not yet", seq(input28, flat28, layer("ConvLSTM2D", `"name": "conv_lstm", "filters": 4`)), 2, true,
			"layer 2 (conv_lstm): class ConvLSTM2D is not supported yet; supported: InputLayer, Dense, Conv2D"},
		{"lambda", seq(input28, layer("Lambda", `"name": "scale", "function": "abc"`)), 1, true,
			"layer 1 (scale): class Lambda is not supported: it runs a Python function, which cannot run outside Python"},
		{"custom keras 3", seq(input28, `{"module": "my_layers", "class_name": "Gate", "config": {"name": "gate"}, "registered_name": "Custom>Gate"}`), 1, true,
			"layer 1 (gate): custom class Gate (registered as \"Custom>Gate\") is not supported"},
		{"duplicate name", seq(input28, flat28, layer("Dense", `"name": "flatten", "units": 3`)), 2, false, "already used by layer 1"},
		{"input layer later", seq(layer("Dense", `"name": "d", "units": 3, "batch_input_shape": [null, 4]`), input28), 1, false, "only come first"},
		{"no input shape", seq(flat28, dense10), -1, false, "no input shape"},
		{"unknown dimension", seq(layer("InputLayer", `"name": "in", "batch_shape": [null, null, 28, 1]`), flat28), 0, false, "input in: dimension 1 of InputLayer batch_shape (None, None, 28, 1) is unknown (null)"},
		{"negative dimension", seq(layer("InputLayer", `"name": "in", "batch_shape": [null, -3]`), flat28), 0, false, "dimension 1"},
		{"shapes disagree", seq(input28, layer("Flatten", `"name": "f", "batch_input_shape": [null, 32, 32, 1]`)), 1, false, "input shapes disagree"},
		{"build_input_shape disagrees", `{"class_name": "Sequential", "config": {"name": "s", "build_input_shape": [null, 5], "layers": [` + input28 + `,` + flat28 + `]}}`,
			-1, false, "build_input_shape gives [5]"},
		{"build_config disagrees", seq(input28, `{"class_name": "Flatten", "config": {"name": "f"}, "build_config": {"input_shape": [null, 28, 27, 1]}}`),
			1, false, "does not match the output of the layers before"},
		{"float64 dtype", seq(input28, layer("Flatten", `"name": "f", "dtype": "float64"`)), 1, true, "dtype float64"},
		{"int policy", seq(input28, layer("Flatten", `"name": "f", "dtype": {"class_name": "DTypePolicy", "config": {"name": "int32"}}`)), 1, true, "dtype int32"},
		{"int8 policy", seq(input28, layer("Flatten", `"name": "f", "dtype": {"class_name": "DTypePolicy", "config": {"name": "int8_from_float32"}}`)), 1, true, "int8_from_float32"},
		{"bad dtype", seq(input28, layer("Flatten", `"name": "f", "dtype": 3`)), 1, false, "dtype: want a string"},
		{"int input into conv", seq(layer("InputLayer", `"name": "in", "batch_shape": [null, 8, 8, 1], "dtype": "int32"`), convValid("")), 0, true, "only an Embedding"},
		{"channels first", seq(input28, convValid(`, "data_format": "channels_first"`)), 1, true, "channels_last"},
		{"dilation and strides", seq(input28, convValid(`, "dilation_rate": [2, 2], "strides": 2`)), 1, false, "dilation_rate [2 2] with strides [2 2]"},
		{"groups", seq(input28, convValid(`, "groups": 2`)), 1, false, "groups=2 must divide the input channels 1"},
		{"causal padding", seq(input28, convValid(`, "padding": "causal"`)), 1, true, "padding \"causal\""},
		{"kernel too big", seq(layer("InputLayer", `"name": "in", "batch_shape": [null, 2, 2, 1]`), convValid("")), 1, false, "does not fit input [2 2 1]"},
		{"conv on flat input", seq(input28, flat28, convValid("")), 2, false, "rank 3"},
		{"kernel size missing", seq(input28, layer("Conv2D", `"name": "c", "filters": 3`)), 1, false, "kernel_size is missing"},
		{"kernel size triple", seq(input28, convValid(`, "strides": [1, 1, 1]`)), 1, false, "want 2 values"},
		{"units string", seq(input28, flat28, layer("Dense", `"name": "d", "units": "ten"`)), 2, false, "units"},
		{"units zero", seq(input28, flat28, layer("Dense", `"name": "d", "units": 0`)), 2, false, "not in [1,"},
		{"units fraction", seq(input28, flat28, layer("Dense", `"name": "d", "units": 2.5`)), 2, false, "want an integer"},
		{"too large a layer", seq(input28, flat28, layer("Dense", `"name": "d", "units": 2147483647`)), 2, false, "784 x 2147483647 values exceed 2^40"},
		{"too many params", seq(layer("InputLayer", `"name": "in", "batch_shape": [null, 1048576]`), layer("Dense", `"name": "d", "units": 524288`),
			layer("Dense", `"name": "e", "units": 1048576`)), 2, false, "the model's parameters exceed 2^40"},
		{"unknown activation", seq(input28, flat28, layer("Dense", `"name": "d", "units": 3, "activation": "squash"`)), 2, true, "activation \"squash\" is not supported"},
		{"activation number", seq(input28, layer("Activation", `"name": "a", "activation": 3`)), 1, false, "activation: want a name"},
		{"activation missing", seq(input28, layer("Activation", `"name": "a"`)), 1, false, "activation is missing"},
		{"relu max below 0", seq(input28, layer("ReLU", `"name": "r", "max_value": -6`)), 1, false, "max_value -6 is negative"},
		{"dropout rate", seq(input28, layer("Dropout", `"name": "d", "rate": 1.5`)), 1, false, "rate 1.5"},
		{"noise shape rank", seq(input28, layer("Dropout", `"name": "d", "rate": 0.5, "noise_shape": [null, 1, 1]`)), 1, false, "noise_shape [null,1,1]"},
		{"noise shape size", seq(input28, layer("Dropout", `"name": "d", "rate": 0.5, "noise_shape": [null, 3, 1, 1]`)), 1, false, "size 3 of axis 1"},
		{"bn two axes", seq(input28, layer("BatchNormalization", `"name": "bn", "axis": [1, 3]`)), 1, true, "axis [1 3]"},
		{"bn axis out of range", seq(input28, layer("BatchNormalization", `"name": "bn", "axis": [4]`)), 1, false, "out of range"},
		{"ln no center", seq(input28, layer("LayerNormalization", `"name": "ln", "center": false`)), 1, true, "center=false or scale=false is not supported: nn.LayerNormalization"},
		{"bn zero momentum", seq(input28, layer("BatchNormalization", `"name": "bn", "momentum": 0`)), 1, true, "momentum 0"},
		{"ln rms", seq(input28, layer("LayerNormalization", `"name": "ln", "rms_scaling": true`)), 1, true, "rms_scaling"},
		{"embedding dims", seq(layer("Embedding", `"name": "e", "input_dim": 10, "output_dim": 4, "batch_input_shape": [null, 5], "input_length": 6`)),
			0, false, "input shapes disagree"},
		{"manifest total", `{"modelTopology": {"model_config": ` + seq(input28, flat28, dense10) + `}, "weightsManifest": [{"weights": [{"name": "dense/kernel", "shape": [784, 10]}]}]}`,
			-1, false, "lists 7840 weight values, the layer configs give 7850"},
		{"manifest shape", `{"modelTopology": ` + seq(input28, flat28, dense10) + `, "weightsManifest": [{"weights": [{"name": "dense/kernel", "shape": [10, 785]}, {"name": "dense/bias", "shape": [0]}]}]}`,
			-1, false, "dense/kernel has shape [10, 785], the layer configs give [784, 10]"},
		{"manifest not a list", `{"modelTopology": ` + seq(input28, flat28, dense10) + `, "weightsManifest": {}}`, -1, false, "weightsManifest: want a list"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.json), "t.json")
			if err == nil {
				t.Fatalf("got a model with %d params, want an error containing %q", m.Params, tc.contains)
			}
			var ke *Error
			if !errors.As(err, &ke) {
				t.Fatalf("got %T (%v), want *keras.Error", err, err)
			}
			msg := err.Error()
			if ke.File != "t.json" || !strings.HasPrefix(msg, "keras: t.json: ") {
				t.Errorf("got %q, want it to name the file t.json", msg)
			}
			if ke.Index != tc.index {
				t.Errorf("layer index: got %d, want %d (%s)", ke.Index, tc.index, msg)
			}
			if got := errors.Is(err, ErrUnsupported); got != tc.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupported): got %v, want %v (%s)", got, tc.unsupported, msg)
			}
			if !strings.Contains(msg, tc.contains) {
				t.Errorf("got %q, want it to contain %q", msg, tc.contains)
			}
		})
	}
}

// TestVariants checks spellings Keras writes for the same model: every
// one must read as the same 7,850-parameter softmax regression.
func TestVariants(t *testing.T) {
	tests := []struct{ name, json string }{
		{"keras2 batch_input_shape on first layer", seq(layer("Flatten", `"name": "f", "batch_input_shape": [null, 28, 28, 1]`), dense10)},
		{"keras3 batch_shape on InputLayer", seq(layer("InputLayer", `"name": "in", "batch_shape": [null, 28, 28, 1]`), flat28, dense10)},
		{"input_shape without batch", seq(layer("Flatten", `"name": "f", "input_shape": [28, 28, 1]`), dense10)},
		{"shape on InputLayer and first layer", seq(input28, layer("Flatten", `"name": "f", "batch_input_shape": [null, 28, 28, 1]`), dense10)},
		{"fixed batch size", seq(layer("InputLayer", `"name": "in", "batch_input_shape": [32, 28, 28, 1]`), flat28, dense10)},
		{"sequential build_input_shape", `{"class_name": "Sequential", "config": {"name": "s", "build_input_shape": [null, 28, 28, 1], "layers": [` + flat28 + `,` + dense10 + `]}}`},
		{"keras 2.0 bare list", `{"class_name": "Sequential", "config": [` + layer("Flatten", `"name": "f", "batch_input_shape": [null, 28, 28, 1]`) + `,` + dense10 + `]}`},
		{"tfjs model_config", `{"format": "layers-model", "modelTopology": {"keras_version": "2.4", "model_config": ` + seq(input28, flat28, dense10) + `}, "weightsManifest": [{"weights": [{"name": "dense/bias", "shape": [10]}, {"name": "dense/kernel", "shape": [784, 10]}]}]}`},
		{"tfjs modelTopology itself", `{"modelTopology": ` + seq(input28, flat28, dense10) + `}`},
		{"byte order mark", "\xef\xbb\xbf" + seq(input28, flat28, dense10)},
		{"ints as floats", seq(layer("InputLayer", `"name": "in", "batch_input_shape": [null, 28.0, 28, 1]`), flat28, layer("Dense", `"name": "dense", "units": 10.0`))},
		{"dense input_dim", seq(layer("Dense", `"name": "dense", "units": 10, "input_dim": 784`))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.json), "v.json")
			if err != nil {
				t.Fatal(err)
			}
			if m.Params != 784*10+10 {
				t.Errorf("params: got %d, want %d", m.Params, 784*10+10)
			}
			if last := m.Layers[len(m.Layers)-1]; !last.Output.Equal(tensor.Shape{10}) {
				t.Errorf("output: got %v, want [10]", last.Output)
			}
		})
	}
}

// TestBatchNormAxes checks the axis forms that all name the last axis.
func TestBatchNormAxes(t *testing.T) {
	for _, axis := range []string{`-1`, `3`, `[3]`, `[-1]`, `null`} {
		t.Run(axis, func(t *testing.T) {
			m, err := Parse([]byte(seq(input28, convValid(""), layer("BatchNormalization", `"name": "bn", "axis": `+axis))), "bn.json")
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Layers[2]; got.Params != 4*4 || got.TrainableParams != 2*4 {
				t.Errorf("got %d params (%d trainable), want 16 (8)", got.Params, got.TrainableParams)
			}
		})
	}
	// After a Dense the input has rank 2 counting the batch: axis 1 is last.
	m, err := Parse([]byte(seq(input28, flat28, dense10, layer("BatchNormalization", `"name": "bn", "axis": [1]`))), "bn.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.Params != 7850+40 {
		t.Errorf("got %d params, want %d", m.Params, 7850+40)
	}
	// axis 1 of NHWC input normalizes the rows (as k231's CarND model
	// does): one gamma, beta and moving statistic per row
	m, err = Parse([]byte(seq(input28, convValid(""), layer("BatchNormalization", `"name": "bn", "axis": 1`))), "bn.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Layers[2]; got.Params != 4*26 || got.TrainableParams != 2*26 {
		t.Errorf("axis 1: got %d params (%d trainable), want 104 (52)", got.Params, got.TrainableParams)
	}
	if bn := m.Sequential.Layers[1].(*nn.BatchNormalization); bn.Axis != 1 {
		t.Errorf("axis 1: nn's layer has Axis %d", bn.Axis)
	}
}

// TestKerasArchive reads config.json from a Keras 3 .keras zip.
func TestKerasArchive(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join("testdata", "k3_policy_pooling.json"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range map[string][]byte{"metadata.json": []byte(`{"keras_version": "3.8.0"}`), "config.json": cfg} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.keras")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if m.Params != 5466 {
		t.Errorf("params: got %d, want 5466", m.Params)
	}
}

func TestLoadMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.json")
	_, err := Load(path)
	var ke *Error
	if !errors.As(err, &ke) || ke.File != path || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want a *keras.Error naming %s that wraps os.ErrNotExist", err, path)
	}
}
