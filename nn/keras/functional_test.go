package keras

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

type rowWant struct {
	name, class string
	out         tensor.Shape
	calls       int
	params      int
	trainable   int
}

// TestFunctionalTestdata reads the hand-written functional configs, one per
// format, against counts worked out by hand.
func TestFunctionalTestdata(t *testing.T) {
	tests := []struct {
		file              string
		inputs            []nn.Input
		outputs           []string
		params, trainable int
		rows              []rowWant
	}{
		{
			// Keras 2.2.4: Add and Concatenate on 8x8 digits
			file:   "digits_residual_k2.json",
			inputs: []nn.Input{{Name: "input_1", Shape: tensor.Shape{8, 8, 1}, DType: tensor.Float32}}, outputs: []string{"dense_1"},
			params: 20602, trainable: 20602,
			rows: []rowWant{
				{"input_1", "InputLayer", tensor.Shape{8, 8, 1}, 1, 0, 0},
				{"conv2d", "Conv2D", tensor.Shape{8, 8, 16}, 1, 3*3*1*16 + 16, 160},
				{"conv2d_1", "Conv2D", tensor.Shape{8, 8, 16}, 1, 3*3*16*16 + 16, 2320},
				{"add", "Add", tensor.Shape{8, 8, 16}, 1, 0, 0},
				{"activation", "Activation", tensor.Shape{8, 8, 16}, 1, 0, 0},
				{"concatenate", "Concatenate", tensor.Shape{8, 8, 17}, 1, 0, 0}, // 16 channels and the input's 1
				{"max_pooling2d", "MaxPooling2D", tensor.Shape{4, 4, 17}, 1, 0, 0},
				{"flatten", "Flatten", tensor.Shape{272}, 1, 0, 0},
				{"dense", "Dense", tensor.Shape{64}, 1, 272*64 + 64, 17472},
				{"dense_1", "Dense", tensor.Shape{10}, 1, 64*10 + 10, 650},
			},
		},
		{
			// Keras 2, stored as a JSON string: a nested Sequential built with
			// its own Input, called twice (nodes 1 and 2), weights shared
			file: "k2_siamese_nested_string.json",
			inputs: []nn.Input{{Name: "left", Shape: tensor.Shape{4}, DType: tensor.Float32},
				{Name: "right", Shape: tensor.Shape{4}, DType: tensor.Float32}},
			outputs: []string{"head"}, params: 40 + 17, trainable: 57,
			rows: []rowWant{
				{"left", "InputLayer", tensor.Shape{4}, 1, 0, 0},
				{"right", "InputLayer", tensor.Shape{4}, 1, 0, 0},
				{"encoder", "Sequential", tensor.Shape{8}, 2, 4*8 + 8, 40},
				{"subtract", "Subtract", tensor.Shape{8}, 1, 0, 0},
				{"multiply", "Multiply", tensor.Shape{8}, 1, 0, 0},
				{"concatenate", "Concatenate", tensor.Shape{16}, 1, 0, 0},
				{"head", "Dense", tensor.Shape{1}, 1, 16 + 1, 17},
			},
		},
		{
			// Keras 3: a frozen nested Functional (node 1; its BatchNormalization
			// and convolution not trainable), a Dense shared by two calls, Dot,
			// two outputs
			file: "k3_two_towers.json",
			inputs: []nn.Input{{Name: "image", Shape: tensor.Shape{6, 6, 2}, DType: tensor.Float32},
				{Name: "meta", Shape: tensor.Shape{4}, DType: tensor.Float32}},
			outputs: []string{"classes", "dot"}, params: 76 + 16 + 20 + 15, trainable: 20 + 15,
			rows: []rowWant{
				{"image", "InputLayer", tensor.Shape{6, 6, 2}, 1, 0, 0},
				{"meta", "InputLayer", tensor.Shape{4}, 1, 0, 0},
				{"encoder", "Functional", tensor.Shape{4}, 1, 3*3*2*4 + 4 + 4*4, 0},
				{"shared", "Dense", tensor.Shape{4}, 2, 4*4 + 4, 20},
				{"dot", "Dot", tensor.Shape{1}, 1, 0, 0},
				{"avg", "Average", tensor.Shape{4}, 1, 0, 0},
				{"classes", "Dense", tensor.Shape{3}, 1, 4*3 + 3, 15},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			m, err := Load(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if m.Functional == nil || m.Sequential != nil {
				t.Fatalf("got Functional %v, Sequential %v: want a functional model", m.Functional != nil, m.Sequential != nil)
			}
			if got := m.Inputs(); len(got) != len(tc.inputs) {
				t.Errorf("inputs: got %v, want %v", got, tc.inputs)
			} else {
				for i, w := range tc.inputs {
					if got[i].Name != w.Name || !got[i].Shape.Equal(w.Shape) || got[i].Type() != w.DType {
						t.Errorf("input %d: got %v, want %v", i, got[i], w)
					}
				}
			}
			if strings.Join(m.OutputNames, ",") != strings.Join(tc.outputs, ",") {
				t.Errorf("outputs: got %v, want %v", m.OutputNames, tc.outputs)
			}
			if m.Params != tc.params || m.TrainableParams != tc.trainable {
				t.Errorf("params: got %d (%d trainable), want %d (%d)", m.Params, m.TrainableParams, tc.params, tc.trainable)
			}
			if len(m.Layers) != len(tc.rows) {
				t.Fatalf("layers: got %d, want %d", len(m.Layers), len(tc.rows))
			}
			for i, w := range tc.rows {
				g := m.Layers[i]
				if g.Name != w.name || g.Class != w.class || !g.Output.Equal(w.out) || g.Calls != w.calls || g.Params != w.params || g.TrainableParams != w.trainable {
					t.Errorf("layer %d: got %s %s %v x%d %d (%d), want %s %s %v x%d %d (%d)", i, g.Name, g.Class, g.Output, g.Calls, g.Params, g.TrainableParams,
						w.name, w.class, w.out, w.calls, w.params, w.trainable)
				}
			}
			// nn's own count, trainable weights included
			total, trainable, err := nn.Params(m.NN())
			if err != nil || total != tc.params || trainable != tc.trainable {
				t.Errorf("nn.Params: got %d (%d trainable, %v), want %d (%d)", total, trainable, err, tc.params, tc.trainable)
			}
		})
	}
}

// TestSharedWeightsAndNesting builds the Keras 2 siamese model: the nested
// Sequential's two calls share one set of weights, named after the model
// and the layer ("encoder/enc_dense/kernel").
func TestSharedWeightsAndNesting(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "k2_siamese_nested_string.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := buildOnce(m.NN())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range c.Weights {
		names = append(names, w.Attr().Name)
	}
	want := "encoder/enc_dense/kernel encoder/enc_dense/bias head/kernel head/bias"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("weights: got %s, want %s", got, want)
	}
}

// TestFrozen: a layer marked trainable=false keeps its weights out of the
// trainable ones, and a frozen BatchNormalization runs in inference mode
// in training (no moving-statistics updates), as in TensorFlow 2 and
// Keras 3.
func TestFrozen(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "k3_two_towers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c *nn.Context
	err = graph.Catch(func() {
		g := graph.New()
		c = nn.NewContext(g, true, 1)
		var ins []*graph.Node
		for _, in := range m.Inputs() {
			ins = append(ins, g.Input(in.Name, in.Type(), append(tensor.Shape{2}, in.Shape...)))
		}
		m.NN().Build(c, ins)
	})
	if err != nil {
		t.Fatal(err)
	}
	var trainable []string
	for _, w := range c.Trainable {
		trainable = append(trainable, w.Attr().Name)
	}
	if got, want := strings.Join(trainable, " "), "shared/kernel shared/bias classes/kernel classes/bias"; got != want {
		t.Errorf("trainable weights: got %s, want %s", got, want)
	}
	if len(c.Updates) != 0 {
		t.Errorf("a frozen BatchNormalization made %d updates in training, want 0", len(c.Updates))
	}
	if len(c.Weights) != 10 {
		t.Errorf("got %d weights, want 10 (4 of the BatchNormalization among them)", len(c.Weights))
	}
}

// k2 builders for configs written in tests.
func k2layer(class, name string, conf map[string]any, calls ...[]any) map[string]any {
	c := map[string]any{"name": name}
	for k, v := range conf {
		c[k] = v
	}
	nodes := []any{}
	for _, call := range calls {
		nodes = append(nodes, call)
	}
	return map[string]any{"name": name, "class_name": class, "config": c, "inbound_nodes": nodes}
}

// call is one Keras 2 node over the given [layer, node, tensor] triples.
func call(refs ...[]any) []any {
	out := []any{}
	for _, r := range refs {
		out = append(out, append(append([]any{}, r...), map[string]any{}))
	}
	return out
}

func at(layer string, node, tensor int) []any { return []any{layer, node, tensor} }

func k2input(name string, shape ...any) map[string]any {
	return k2layer("InputLayer", name, map[string]any{"batch_input_shape": append([]any{nil}, shape...)})
}

func k2model(layers []map[string]any, ins, outs [][]any) string {
	b, err := json.Marshal(map[string]any{"class_name": "Model", "config": map[string]any{
		"name": "m", "layers": layers, "input_layers": ins, "output_layers": outs}})
	if err != nil {
		panic(err)
	}
	return string(b)
}

var denseConf = map[string]any{"units": 3}

// TestFunctionalErrors checks malformed and unsupported functional
// configs: errors name the file, the layer and what is wrong.
func TestFunctionalErrors(t *testing.T) {
	in4 := k2input("in", 4)
	d := func(name string, src []any) map[string]any { return k2layer("Dense", name, denseConf, call(src)) }
	ins, outs := [][]any{at("in", 0, 0)}, [][]any{at("d", 0, 0)}
	tests := []struct {
		name        string
		json        string
		layer       string // the layer the error names, "" for none
		unsupported bool
		contains    string
	}{
		{"unknown layer", k2model([]map[string]any{in4, d("d", at("nope", 0, 0))}, ins, outs), "d", false, `refers to layer "nope"`},
		{"node out of range", k2model([]map[string]any{in4, d("e", at("in", 0, 0)), d("d", at("e", 1, 0))}, ins, outs), "d", false,
			"refers to call 1 of e, which has calls 0 to 0"},
		{"tensor out of range", k2model([]map[string]any{in4, d("e", at("in", 0, 0)), d("d", at("e", 0, 1))}, ins, outs), "d", false,
			"refers to output 1 of e, which has 1"},
		{"cycle", k2model([]map[string]any{in4, d("e", at("d", 0, 0)), d("d", at("e", 0, 0))}, ins, outs), "e", false, "form a cycle"},
		{"input not an InputLayer", k2model([]map[string]any{in4, d("d", at("in", 0, 0))}, [][]any{at("d", 0, 0)}, outs), "", false,
			"input d[0][0] is not an InputLayer"},
		{"never called", k2model([]map[string]any{in4, k2layer("Dense", "lone", denseConf), d("d", at("in", 0, 0))}, ins, outs), "lone", false,
			"never called"},
		{"subtract of three", k2model([]map[string]any{in4, k2layer("Subtract", "d", nil, call(at("in", 0, 0), at("in", 0, 0), at("in", 0, 0)))}, ins, outs),
			"d", false, "Subtract takes exactly 2 inputs, got 3"},
		{"add of one", k2model([]map[string]any{in4, k2layer("Add", "d", nil, call(at("in", 0, 0)))}, ins, outs), "d", false, "Add takes at least 2 inputs"},
		{"add of two ranks", k2model([]map[string]any{in4, k2input("in2", 2, 4), k2layer("Add", "d", nil, call(at("in", 0, 0), at("in2", 0, 0)))},
			[][]any{at("in", 0, 0), at("in2", 0, 0)}, outs), "d", true, "different ranks"},
		{"concatenate mismatch", k2model([]map[string]any{k2input("in", 4, 2), k2input("in2", 3, 3),
			k2layer("Concatenate", "d", map[string]any{"axis": -1}, call(at("in", 0, 0), at("in2", 0, 0)))},
			[][]any{at("in", 0, 0), at("in2", 0, 0)}, outs), "d", false, "the other sizes differ"},
		{"concatenate on the batch", k2model([]map[string]any{in4, k2layer("Concatenate", "d", map[string]any{"axis": 0}, call(at("in", 0, 0), at("in", 0, 0)))}, ins, outs),
			"d", true, "axis 0 joins along the batch"},
		{"dot axes", k2model([]map[string]any{in4, k2layer("Dot", "d", map[string]any{"axes": 0}, call(at("in", 0, 0), at("in", 0, 0)))}, ins, outs),
			"d", false, "axes [0 0]: out of range"},
		{"integer input into Dense", k2model([]map[string]any{k2layer("InputLayer", "in", map[string]any{"batch_input_shape": []any{nil, 4}, "dtype": "int32"}), d("d", at("in", 0, 0))}, ins, outs),
			"d", true, "only an Embedding takes integer input"},
		{"shared layer, two shapes", k2model([]map[string]any{in4, k2input("in2", 5), k2layer("Dense", "d", denseConf, call(at("in", 0, 0)), call(at("in2", 0, 0)))},
			[][]any{at("in", 0, 0), at("in2", 0, 0)}, outs), "d", false, "a shared layer's inputs must give its weights one shape"},
		{"input named y", k2model([]map[string]any{k2input("y", 4), d("d", at("y", 0, 0))}, [][]any{at("y", 0, 0)}, outs), "", false, `an input layer named "y"`},
		{"slash in a name", k2model([]map[string]any{in4, d("a/b", at("in", 0, 0))}, ins, [][]any{at("a/b", 0, 0)}), "a/b", false, `a layer name with "/"`},
		{"lambda", k2model([]map[string]any{in4, k2layer("Lambda", "d", map[string]any{"function": "x"}, call(at("in", 0, 0)))}, ins, outs), "d", true,
			"class Lambda is not supported: it runs a Python function"},
		{"tf op lambda", k2model([]map[string]any{in4, k2layer("TFOpLambda", "d", map[string]any{"function": "math.cumsum"}, call(at("in", 0, 0)))}, ins, outs), "d", true,
			"class TFOpLambda of tf.math.cumsum is not supported"},
		{"tf op lambda without y", k2model([]map[string]any{in4, k2layer("TFOpLambda", "d", map[string]any{"function": "math.add"}, call(at("in", 0, 0)))}, ins, outs), "d", false,
			"operation Add takes 2 operands, got 1"},
		{"string lookup", k2model([]map[string]any{in4, k2layer("StringLookup", "d", nil, call(at("in", 0, 0)))}, ins, outs), "d", true,
			"class StringLookup is not supported"},
		{"not yet", k2model([]map[string]any{in4, k2layer("GaussianNoise", "d", nil, call(at("in", 0, 0)))}, ins, outs), "d", true,
			"class GaussianNoise is not supported yet"},
		{"constant input", k2model([]map[string]any{in4, k2layer("Add", "d", nil, []any{[]any{"_CONSTANT_VALUE", -1, 3, map[string]any{}}})}, ins, outs), "d", true,
			"_CONSTANT_VALUE"},
		{"keyword tensor", k2model([]map[string]any{in4, k2layer("Dense", "d", denseConf, []any{[]any{"in", 0, 0, map[string]any{"mask": []any{"in", 0, 0}}}})}, ins, outs),
			"d", true, "keyword tensor arguments (mask)"},
		{"nested model, wrong shape", k2model([]map[string]any{k2input("in", 5),
			{"name": "sub", "class_name": "Model", "config": map[string]any{"name": "sub", "layers": []any{in4, d("d", at("in", 0, 0))},
				"input_layers": []any{at("in", 0, 0)}, "output_layers": []any{at("d", 0, 0)}}, "inbound_nodes": []any{call(at("in", 0, 0))}}},
			ins, [][]any{at("sub", 1, 0)}), "sub", false, "input 0: the model takes [4], the call gives [5]"},
		{"nested model, node 0", k2model([]map[string]any{in4,
			{"name": "sub", "class_name": "Model", "config": map[string]any{"name": "sub", "layers": []any{in4, d("d", at("in", 0, 0))},
				"input_layers": []any{at("in", 0, 0)}, "output_layers": []any{at("d", 0, 0)}}, "inbound_nodes": []any{call(at("in", 0, 0))}}},
			ins, [][]any{at("sub", 0, 0)}), "", false, "refers to call 0 of sub, which has calls 1 to 1"},
		{"nested layer error", k2model([]map[string]any{in4,
			{"name": "sub", "class_name": "Model", "config": map[string]any{"name": "sub", "layers": []any{in4, k2layer("Dense", "d", map[string]any{"units": 0}, call(at("in", 0, 0)))},
				"input_layers": []any{at("in", 0, 0)}, "output_layers": []any{at("d", 0, 0)}}, "inbound_nodes": []any{call(at("in", 0, 0))}}},
			ins, [][]any{at("sub", 1, 0)}), "sub/d", false, "units: 0 is not in [1,"},
		{"keras 3 recorded shape", `{"class_name": "Functional", "config": {"name": "m", "layers": [
			{"class_name": "InputLayer", "name": "in", "config": {"batch_shape": [null, 4], "name": "in"}, "inbound_nodes": []},
			{"class_name": "Dense", "name": "d", "config": {"name": "d", "units": 3}, "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
				"config": {"shape": [null, 5], "dtype": "float32", "keras_history": ["in", 0, 0]}}], "kwargs": {}}]}],
			"input_layers": [["in", 0, 0]], "output_layers": [["d", 0, 0]]}}`, "d", false, "records in[0][0] with shape [null,5], the layers before it give [4]"},
		{"keras 3 constant argument", `{"class_name": "Functional", "config": {"name": "m", "layers": [
			{"class_name": "InputLayer", "name": "in", "config": {"batch_shape": [null, 4], "name": "in"}, "inbound_nodes": []},
			{"class_name": "Add", "name": "d", "config": {"name": "d"}, "inbound_nodes": [{"args": [[{"class_name": "__keras_tensor__",
				"config": {"keras_history": ["in", 0, 0]}}, 2.5]], "kwargs": {}}]}],
			"input_layers": [["in", 0, 0]], "output_layers": [["d", 0, 0]]}}`, "d", true, "a constant positional argument"},
		{"build_config of a merge", `{"class_name": "Functional", "config": {"name": "m", "layers": [
			{"class_name": "InputLayer", "name": "in", "config": {"batch_shape": [null, 4], "name": "in"}, "inbound_nodes": []},
			{"class_name": "Add", "name": "d", "config": {"name": "d"}, "build_config": {"input_shape": [[null, 4], [null, 3]]},
				"inbound_nodes": [{"args": [[{"class_name": "__keras_tensor__", "config": {"keras_history": ["in", 0, 0]}},
				{"class_name": "__keras_tensor__", "config": {"keras_history": ["in", 0, 0]}}]], "kwargs": {}}]}],
			"input_layers": [["in", 0, 0]], "output_layers": [["d", 0, 0]]}}`, "d", false, "build_config.input_shape"},
		{"mixed node formats", `{"class_name": "Functional", "config": {"name": "m", "layers": [
			{"class_name": "InputLayer", "name": "in", "config": {"batch_shape": [null, 4], "name": "in"}, "inbound_nodes": []},
			{"class_name": "Dense", "name": "d", "config": {"name": "d", "units": 2}, "inbound_nodes": [[["in", 0, 0, {}]],
				{"args": [{"class_name": "__keras_tensor__", "config": {"keras_history": ["in", 0, 0]}}]}]}],
			"input_layers": [["in", 0, 0]], "output_layers": [["d", 0, 0]]}}`, "d", false, "node formats mixed"},
		{"no outputs", k2model([]map[string]any{in4, d("d", at("in", 0, 0))}, ins, [][]any{}), "", false, "at least one input and one output"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.json), "f.json")
			if err == nil {
				t.Fatalf("got a model with %d params, want an error containing %q", m.Params, tc.contains)
			}
			var ke *Error
			if !errors.As(err, &ke) || ke.File != "f.json" {
				t.Fatalf("got %T (%v), want a *keras.Error naming f.json", err, err)
			}
			if ke.Layer != tc.layer {
				t.Errorf("layer: got %q, want %q (%v)", ke.Layer, tc.layer, err)
			}
			if got := errors.Is(err, ErrUnsupported); got != tc.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupported): got %v, want %v (%v)", got, tc.unsupported, err)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("got %q, want it to contain %q", err, tc.contains)
			}
		})
	}
}

// TestNodeIndices: the node index of a nested model's first call is 1 for
// a Functional (Keras 2 and 3) and for a Keras 2 Sequential built with an
// input shape; 0 for a Keras 2 Sequential without one and for any Keras 3
// Sequential. An InputLayer is node 0 whatever the file says.
func TestNodeIndices(t *testing.T) {
	in4 := k2input("in", 4)
	dense := map[string]any{"class_name": "Dense", "config": map[string]any{"name": "inner", "units": 2}}
	seq := func(node int, withInput bool, keras3 bool) string {
		layers := []any{dense}
		if withInput {
			layers = []any{map[string]any{"class_name": "InputLayer", "config": map[string]any{"name": "s_in", "batch_input_shape": []any{nil, 4}}}, dense}
		}
		var nodes []any
		if keras3 {
			nodes = []any{map[string]any{"args": []any{map[string]any{"class_name": "__keras_tensor__", "config": map[string]any{"keras_history": at("in", 0, 0)}}}}}
		} else {
			nodes = []any{call(at("in", 0, 0))}
		}
		s := map[string]any{"name": "s", "class_name": "Sequential", "config": map[string]any{"name": "s", "layers": layers}, "inbound_nodes": nodes}
		return k2model([]map[string]any{in4, s}, [][]any{at("in", 0, 0)}, [][]any{at("s", node, 0)})
	}
	tests := []struct {
		name string
		json string
		ok   bool
	}{
		{"keras 2 sequential with input, node 1", seq(1, true, false), true},
		{"keras 2 sequential with input, node 0", seq(0, true, false), false},
		{"keras 2 sequential without input, node 0", seq(0, false, false), true},
		{"keras 2 sequential without input, node 1", seq(1, false, false), false},
		{"keras 3 sequential with input, node 0", seq(0, true, true), true},
		{"keras 3 sequential with input, node 1", seq(1, true, true), false},
		{"input layer referred to as node 3", k2model([]map[string]any{in4, k2layer("Dense", "d", denseConf, call(at("in", 3, 0)))},
			[][]any{at("in", 0, 0)}, [][]any{at("d", 0, 0)}), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.json), "n.json")
			if tc.ok && err != nil {
				t.Fatal(err)
			}
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "refers to call") {
					t.Fatalf("got %v, want an error about the node index", err)
				}
				return
			}
			if m.Params != 4*2+2 && m.Params != 4*3+3 {
				t.Errorf("params: got %d, want 10 or 15", m.Params)
			}
		})
	}
}

// TestDictInputs: Keras 3 writes a model's dict inputs as an object; they
// are flattened in sorted key order, as Keras flattens them.
func TestDictInputs(t *testing.T) {
	js := `{"class_name": "Functional", "config": {"name": "m", "layers": [
		{"class_name": "InputLayer", "name": "zeta", "config": {"batch_shape": [null, 2], "name": "zeta"}, "inbound_nodes": []},
		{"class_name": "InputLayer", "name": "alpha", "config": {"batch_shape": [null, 3], "name": "alpha"}, "inbound_nodes": []},
		{"class_name": "Concatenate", "name": "c", "config": {"name": "c", "axis": -1}, "inbound_nodes": [{"args": [[
			{"class_name": "__keras_tensor__", "config": {"keras_history": ["zeta", 0, 0]}},
			{"class_name": "__keras_tensor__", "config": {"keras_history": ["alpha", 0, 0]}}]], "kwargs": {}}]}],
		"input_layers": {"z": ["zeta", 0, 0], "a": ["alpha", 0, 0]}, "output_layers": ["c", 0, 0]}}`
	m, err := Parse([]byte(js), "d.json")
	if err != nil {
		t.Fatal(err)
	}
	ins := m.Inputs()
	if len(ins) != 2 || ins[0].Name != "alpha" || ins[1].Name != "zeta" {
		t.Errorf("inputs: got %v, want alpha then zeta (keys a, z)", ins)
	}
	if got := m.Layers[2].Output; !got.Equal(tensor.Shape{5}) {
		t.Errorf("concatenation: got %v, want [5]", got)
	}
}

// TestSequentialNesting: a Sequential whose layer is a functional model
// (transfer learning: a base model and a head).
func TestSequentialNesting(t *testing.T) {
	base := map[string]any{"class_name": "Functional", "config": map[string]any{"name": "base",
		"layers":       []any{k2input("base_in", 4), k2layer("Dense", "feat", map[string]any{"units": 6, "trainable": false}, call(at("base_in", 0, 0)))},
		"input_layers": []any{at("base_in", 0, 0)}, "output_layers": []any{at("feat", 0, 0)}}}
	js, _ := json.Marshal(map[string]any{"class_name": "Sequential", "config": map[string]any{"name": "s", "layers": []any{
		map[string]any{"class_name": "InputLayer", "config": map[string]any{"name": "x", "batch_input_shape": []any{nil, 4}}},
		base, map[string]any{"class_name": "Dense", "config": map[string]any{"name": "head", "units": 2}}}}})
	m, err := Parse(js, "s.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.Sequential == nil || m.Params != 30+14 || m.TrainableParams != 14 {
		t.Fatalf("got %d params (%d trainable), want 44 (14): the base's Dense is frozen", m.Params, m.TrainableParams)
	}
	total, trainable, err := nn.Params(m.NN())
	if err != nil || total != 44 || trainable != 14 {
		t.Errorf("nn.Params: got %d (%d, %v), want 44 (14)", total, trainable, err)
	}
}

func TestSummary(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "k3_two_towers.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := m.Summary()
	for _, want := range []string{
		`Model: "two_towers"`,
		"image (InputLayer)                 (None, 6, 6, 2)        0",
		"encoder (Functional)               (None, 4)              92         image[0][0]",
		"shared (Dense)                     multiple               20         encoder[1][0]",
		"                                                                     meta[0][0]",
		"dot (Dot)                          (None, 1)              0          shared[0][0], shared[1][0]",
		"Total params: 127\n", "Trainable params: 35\n", "Non-trainable params: 92\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if got := commas(25636712); got != "25,636,712" {
		t.Errorf("commas: got %s, want 25,636,712", got)
	}
}
