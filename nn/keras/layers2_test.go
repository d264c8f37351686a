package keras

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// one returns a Keras 3 Sequential of an InputLayer of per-example shape
// in and one layer of class with the given config keys.
func one(in []int, class, conf string) string {
	shape, _ := json.Marshal(append([]any{nil}, anyInts(in)...))
	return `{"class_name": "Sequential", "config": {"name": "s", "layers": [` +
		`{"class_name": "InputLayer", "config": {"name": "in", "batch_shape": ` + string(shape) + `}},` +
		`{"module": "keras.layers", "class_name": "` + class + `", "config": {"name": "l"` + conf + `}}]}}`
}

func anyInts(s []int) []any {
	out := make([]any, len(s))
	for i, d := range s {
		out[i] = d
	}
	return out
}

// TestVisionAndSequenceLayers checks each layer's output shape and
// parameter counts against Keras' arithmetic, worked out by hand; nn's
// build of the same layer must agree (Parse cross-checks it).
func TestVisionAndSequenceLayers(t *testing.T) {
	tests := []struct {
		class, conf       string
		in, out           []int
		params, trainable int
	}{
		{"DepthwiseConv2D", `, "kernel_size": 3, "padding": "same", "depth_multiplier": 2`, []int{8, 8, 3}, []int{8, 8, 6}, 3*3*3*2 + 6, 60},
		{"DepthwiseConv2D", `, "kernel_size": [3, 3], "strides": 2, "use_bias": false`, []int{9, 9, 4}, []int{4, 4, 4}, 36, 36},
		{"DepthwiseConv2D", `, "kernel_size": 3, "dilation_rate": 2`, []int{9, 9, 1}, []int{5, 5, 1}, 10, 10},
		{"SeparableConv2D", `, "filters": 8, "kernel_size": 3, "padding": "same"`, []int{8, 8, 3}, []int{8, 8, 8}, 27 + 3*8 + 8, 59},
		{"Conv2DTranspose", `, "filters": 4, "kernel_size": 3, "strides": 2, "padding": "same"`, []int{5, 5, 2}, []int{10, 10, 4}, 3*3*4*2 + 4, 76},
		{"Conv2DTranspose", `, "filters": 4, "kernel_size": 3, "strides": 2, "padding": "valid"`, []int{5, 5, 2}, []int{11, 11, 4}, 76, 76},
		{"Conv2DTranspose", `, "filters": 4, "kernel_size": 3, "strides": 2, "padding": "same", "output_padding": [1, 1]`, []int{5, 5, 2}, []int{10, 10, 4}, 76, 76},
		{"Conv2DTranspose", `, "filters": 1, "kernel_size": 2, "strides": 2, "output_padding": null`, []int{3, 3, 2}, []int{6, 6, 1}, 9, 9},
		{"Conv2D", `, "filters": 2, "kernel_size": 3, "dilation_rate": 2`, []int{9, 9, 1}, []int{5, 5, 2}, 9*2 + 2, 20},
		{"Conv2D", `, "filters": 6, "kernel_size": 1, "groups": 2`, []int{4, 4, 4}, []int{4, 4, 6}, 2*6 + 6, 18},
		{"UpSampling2D", `, "size": [2, 3], "interpolation": "bilinear"`, []int{4, 4, 1}, []int{8, 12, 1}, 0, 0},
		{"ZeroPadding2D", `, "padding": [[1, 2], [3, 4]]`, []int{4, 4, 1}, []int{7, 11, 1}, 0, 0},
		{"ZeroPadding2D", `, "padding": 1`, []int{4, 4, 1}, []int{6, 6, 1}, 0, 0},
		{"ZeroPadding2D", `, "padding": [2, 0]`, []int{4, 4, 1}, []int{8, 4, 1}, 0, 0},
		{"Cropping2D", `, "cropping": [[1, 1], [0, 2]]`, []int{6, 6, 2}, []int{4, 4, 2}, 0, 0},
		{"GlobalMaxPooling2D", ``, []int{4, 4, 3}, []int{3}, 0, 0},
		{"GlobalMaxPooling2D", `, "keepdims": true`, []int{4, 4, 3}, []int{1, 1, 3}, 0, 0},
		{"Reshape", `, "target_shape": [-1, 4]`, []int{4, 4, 2}, []int{8, 4}, 0, 0},
		{"Permute", `, "dims": [2, 1]`, []int{3, 5}, []int{5, 3}, 0, 0},
		{"RepeatVector", `, "n": 3`, []int{4}, []int{3, 4}, 0, 0},
		{"Rescaling", `, "scale": 0.00392156862745098, "offset": -1`, []int{4, 4, 3}, []int{4, 4, 3}, 0, 0},
		{"Normalization", `, "axis": -1`, []int{5, 3}, []int{5, 3}, 2*3 + 1, 0},
		{"Normalization", `, "axis": -1, "mean": [1, 2, 3], "variance": [1, 4, 9]`, []int{5, 3}, []int{5, 3}, 0, 0},
		{"SpatialDropout2D", `, "rate": 0.2`, []int{4, 4, 3}, []int{4, 4, 3}, 0, 0},
		{"ReLU", `, "max_value": 6.0`, []int{4}, []int{4}, 0, 0},
		{"LeakyReLU", `, "alpha": 0.1`, []int{4}, []int{4}, 0, 0},
		{"ELU", `, "alpha": 0.5`, []int{4}, []int{4}, 0, 0},
		{"PReLU", `, "shared_axes": [1, 2]`, []int{4, 4, 3}, []int{4, 4, 3}, 3, 3},
		{"PReLU", ``, []int{4, 4, 3}, []int{4, 4, 3}, 48, 48},
		{"Softmax", `, "axis": 1`, []int{3, 5}, []int{3, 5}, 0, 0},
		{"BatchNormalization", `, "scale": false`, []int{4, 4, 3}, []int{4, 4, 3}, 3 + 6, 3},
		{"BatchNormalization", `, "scale": false, "center": false`, []int{3}, []int{3}, 6, 0},
		{"Activation", `, "activation": "relu6"`, []int{4}, []int{4}, 0, 0},
		{"Conv1D", `, "filters": 4, "kernel_size": 3, "padding": "causal"`, []int{10, 2}, []int{10, 4}, 3*2*4 + 4, 28},
		{"Conv1D", `, "filters": 4, "kernel_size": [3], "strides": [2], "padding": "same"`, []int{10, 2}, []int{5, 4}, 28, 28},
		{"Conv1D", `, "filters": 4, "kernel_size": 3`, []int{10, 2}, []int{8, 4}, 28, 28},
		{"MaxPooling1D", `, "pool_size": 2`, []int{10, 3}, []int{5, 3}, 0, 0},
		{"AveragePooling1D", `, "pool_size": 3, "strides": 2, "padding": "same"`, []int{10, 3}, []int{5, 3}, 0, 0},
		{"GlobalAveragePooling1D", ``, []int{10, 3}, []int{3}, 0, 0},
		{"GlobalMaxPooling1D", ``, []int{10, 3}, []int{3}, 0, 0},
		{"TimeDistributed", `, "layer": {"class_name": "Dense", "config": {"name": "dense", "units": 5}}`, []int{6, 4}, []int{6, 5}, 25, 25},
		{"LSTM", `, "units": 8`, []int{6, 4}, []int{8}, 4*8*(4+8) + 32, 416},
		{"LSTM", `, "units": 8, "return_sequences": true, "recurrent_activation": "hard_sigmoid"`, []int{6, 4}, []int{6, 8}, 416, 416},
		{"GRU", `, "units": 8`, []int{6, 4}, []int{8}, 3*8*12 + 48, 336},
		{"GRU", `, "units": 8, "reset_after": false`, []int{6, 4}, []int{8}, 3*8*12 + 24, 312},
		{"SimpleRNN", `, "units": 8, "return_sequences": true`, []int{6, 4}, []int{6, 8}, 8*12 + 8, 104},
		{"Bidirectional", `, "layer": {"class_name": "LSTM", "config": {"name": "lstm", "units": 8}}`, []int{6, 4}, []int{16}, 832, 832},
		{"Bidirectional", `, "merge_mode": "sum", "layer": {"class_name": "GRU", "config": {"name": "gru", "units": 8, "return_sequences": true}}`, []int{6, 4}, []int{6, 8}, 672, 672},
	}
	for _, tc := range tests {
		t.Run(tc.class+tc.conf, func(t *testing.T) {
			m, err := Parse([]byte(one(tc.in, tc.class, tc.conf)), "l.json")
			if err != nil {
				t.Fatal(err)
			}
			l := m.Layers[1]
			if !l.Output.Equal(tc.out) || l.Params != tc.params || l.TrainableParams != tc.trainable {
				t.Errorf("got %v, %d params (%d trainable), want %v, %d (%d)", l.Output, l.Params, l.TrainableParams, tc.out, tc.params, tc.trainable)
			}
			total, trainable, err := nn.Params(m.NN())
			if err != nil || total != tc.params || trainable != tc.trainable {
				t.Errorf("nn.Params: got %d (%d trainable, %v), want %d (%d)", total, trainable, err, tc.params, tc.trainable)
			}
		})
	}
}

// TestLayerArguments checks arguments carried onto nn's layers that
// shapes do not show.
func TestLayerArguments(t *testing.T) {
	six := 6.0
	tests := []struct {
		js   string
		want any
	}{
		{one([]int{4}, "ReLU", `, "max_value": 6, "negative_slope": 0.1, "threshold": 0.5`),
			&nn.ReLU{LayerName: "l", MaxValue: &six, NegativeSlope: 0.1, Threshold: 0.5}},
		{one([]int{4}, "ReLU", ``), &nn.Activation{LayerName: "l", Fn: "relu"}},
		{one([]int{4}, "LeakyReLU", `, "negative_slope": 0.2`), &nn.LeakyReLU{LayerName: "l", NegativeSlope: 0.2}},
		{one([]int{4}, "LeakyReLU", ``), &nn.LeakyReLU{LayerName: "l", NegativeSlope: 0.3}},
		{one([]int{3, 5}, "Softmax", ``), &nn.Activation{LayerName: "l", Fn: "softmax"}},
		{one([]int{6, 4}, "GRU", `, "units": 2, "go_backwards": true, "dropout": 0.5`), func() any {
			g := &nn.GRU{}
			g.LayerName, g.Units, g.Activation, g.RecurrentActivation, g.GoBackwards, g.Dropout = "l", 2, "tanh", "sigmoid", true, 0.5
			return g
		}()},
		{one([]int{8, 8, 1}, "UpSampling2D", ``), &nn.UpSampling2D{LayerName: "l", Size: [2]int{2, 2}, Interpolation: "nearest"}},
		// Keras 2's hard_sigmoid is not Keras 3's
		{`{"class_name": "Sequential", "keras_version": "2.2.4", "config": {"name": "s", "layers": [{"class_name": "Activation", "config": {"name": "l", "activation": "hard_sigmoid", "batch_input_shape": [null, 4]}}]}}`,
			&nn.Activation{LayerName: "l", Fn: "hard_sigmoid_keras2"}},
		{one([]int{4}, "Activation", `, "activation": "hard_sigmoid"`), &nn.Activation{LayerName: "l", Fn: "hard_sigmoid"}},
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
		})
	}
}

// A functional model of the sequence layers' several inputs and outputs:
// an LSTM's states (return_state, outputs 1 and 2) as another LSTM's
// initial states, and a MultiHeadAttention over a query and a value with
// an attention mask, returning its scores (Keras 3 call keywords).
func TestSequenceCalls(t *testing.T) {
	kt := func(layer string, idx int, shape ...any) string {
		s, _ := json.Marshal(append([]any{nil}, shape...))
		return fmt.Sprintf(`{"class_name": "__keras_tensor__", "config": {"shape": %s, "keras_history": [%q, 0, %d]}}`, s, layer, idx)
	}
	lyr := func(class, name, conf, node string) string {
		return fmt.Sprintf(`{"module": "keras.layers", "class_name": %q, "name": %q, "config": {"name": %q%s}, "inbound_nodes": [%s]}`, class, name, name, conf, node)
	}
	input := func(name, shape, dtype string) string {
		return fmt.Sprintf(`{"class_name": "InputLayer", "name": %q, "config": {"name": %q, "batch_shape": %s, "dtype": %q}, "inbound_nodes": []}`, name, name, shape, dtype)
	}
	layers := []string{
		input("x", "[null, 6, 4]", "float32"),
		input("mask", "[null, 6, 6]", "bool"),
		lyr("LSTM", "enc", `, "units": 8, "return_state": true`, `{"args": [`+kt("x", 0, 6, 4)+`], "kwargs": {}}`),
		lyr("LSTM", "dec", `, "units": 8, "return_sequences": true`,
			`{"args": [`+kt("x", 0, 6, 4)+`], "kwargs": {"initial_state": [`+kt("enc", 1, 8)+`, `+kt("enc", 2, 8)+`]}}`),
		lyr("MultiHeadAttention", "mha", `, "num_heads": 2, "key_dim": 4, "value_dim": 3, "output_shape": 5`,
			`{"args": [`+kt("dec", 0, 6, 8)+`, `+kt("x", 0, 6, 4)+`], "kwargs": {"attention_mask": `+kt("mask", 0, 6, 6)+
				`, "return_attention_scores": true, "use_causal_mask": true, "query_mask": null}}`),
	}
	js := `{"class_name": "Functional", "config": {"name": "m", "layers": [` + strings.Join(layers, ",") +
		`], "input_layers": [["x", 0, 0], ["mask", 0, 0]], "output_layers": [["mha", 0, 0], ["mha", 0, 1], ["enc", 0, 0]]}}`
	m, err := Parse([]byte(js), "s.json")
	if err != nil {
		t.Fatal(err)
	}
	lstm := 4 * 8 * (4 + 8 + 1)
	mha := (8*8 + 8) + (4*8 + 8) + (4*6 + 6) + (6*5 + 5) // query, key (the value), value, output
	if m.Params != 2*lstm+mha {
		t.Errorf("params: got %d, want %d", m.Params, 2*lstm+mha)
	}
	if got := m.Layers[4].Outputs; len(got) != 2 || !got[0].Equal(tensor.Shape{6, 5}) || !got[1].Equal(tensor.Shape{2, 6, 6}) {
		t.Errorf("attention outputs: got %v, want [6 5] and the scores [2 6 6]", got)
	}
	if got := m.Layers[2].Outputs; len(got) != 3 {
		t.Errorf("LSTM with return_state: got %d outputs, want 3", len(got))
	}
	if in := m.Inputs(); in[1].Type() != tensor.Int32 {
		t.Errorf("a bool mask input: got %v, want int32", in[1].Type())
	}
	if _, _, err := nn.Params(m.NN()); err != nil {
		t.Fatal(err)
	}
}
