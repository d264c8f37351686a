package nn_test

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// graphText builds m at batch b in inference mode and prints every node:
// two models print the same text when they build the same graph (ops,
// shapes, weight names, owners).
func graphText(t *testing.T, m nn.Model, b int) string {
	t.Helper()
	var s strings.Builder
	err := graph.Catch(func() {
		g := graph.New()
		c := nn.NewContext(g, false, 1)
		var ins []*graph.Node
		for _, in := range m.Inputs() {
			ins = append(ins, g.Input(in.Name, in.Type(), append(tensor.Shape{b}, in.Shape...)))
		}
		outs := m.Build(c, ins)
		for _, n := range g.Nodes() {
			fmt.Fprintf(&s, "%v %v %v %s %q\n", n.Op(), n.DType(), n.Shape(), n.Owner(), n.Attr().Name)
		}
		var inits []string
		for name, init := range c.Init {
			inits = append(inits, fmt.Sprintf("init %s %v\n", name, init))
		}
		sort.Strings(inits)
		s.WriteString(strings.Join(inits, ""))
		for _, o := range outs {
			fmt.Fprintf(&s, "output %d\n", o.ID())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return s.String()
}

// residual is a two-input, two-output functional model with a shared
// layer, a nested model and merge layers.
func residual(t *testing.T) nn.Model {
	t.Helper()
	x := nn.NewInput("x", tensor.Shape{4})
	inner, err := nn.NewFunctional("block", []*nn.Tensor{x}, []*nn.Tensor{nn.Apply(&nn.Dense{LayerName: "d", Units: 4, Activation: "relu", KernelInit: nn.HeNormal{}}, x)})
	if err != nil {
		t.Fatal(err)
	}
	img := nn.NewInput("image", tensor.Shape{6, 6, 2})
	meta := nn.NewInput("meta", tensor.Shape{4})
	h := nn.Apply(&nn.Conv2D{LayerName: "conv", Filters: 4, Kernel: [2]int{3, 3}, Same: true, Activation: "relu"}, img)
	h = nn.Apply(&nn.BatchNormalization{LayerName: "bn", Momentum: 0.9}, h)
	h = nn.Apply(&nn.Pool2D{LayerName: "pool", Max: true, Pool: [2]int{2, 2}}, h)
	f := nn.Apply(&nn.Flatten{LayerName: "flatten"}, h)
	m := nn.Apply(&nn.Add{LayerName: "res"}, meta, nn.Apply(inner, meta))
	j := nn.Apply(&nn.Concatenate{LayerName: "join"}, f, m)
	shared := &nn.Dense{LayerName: "shared", Units: 4}
	a := nn.Apply(shared, j)
	b := nn.Apply(shared, nn.Apply(&nn.Dense{LayerName: "proj", Units: 40}, a))
	out := nn.Apply(&nn.Activation{LayerName: "probs", Fn: "softmax"}, nn.Apply(&nn.Multiply{LayerName: "mul"}, a, b))
	model, err := nn.NewFunctional("net", []*nn.Tensor{img, meta}, []*nn.Tensor{out, a})
	if err != nil {
		t.Fatal(err)
	}
	return model
}

func TestModelRoundTrip(t *testing.T) {
	cnn, err := nn.ModelByName("cnn", tensor.Shape{28, 28, 1}, 10)
	if err != nil {
		t.Fatal(err)
	}
	tokens := &nn.Sequential{Name: "tokens", InputShape: tensor.Shape{8}, InputDType: tensor.Int32, Layers: []nn.Layer{
		&nn.Embedding{LayerName: "emb", InputDim: 50, OutputDim: 6},
		&nn.LayerNormalization{LayerName: "ln", Epsilon: 1e-5},
		&nn.Dropout{LayerName: "drop", Rate: 0.25},
		&nn.GlobalAveragePooling2D{LayerName: "unused_but_fine"},
	}}
	tokens.Layers = tokens.Layers[:3]
	tokens.Layers = append(tokens.Layers, &nn.Flatten{LayerName: "flat"}, &nn.Dense{LayerName: "out", Units: 3, Activation: "sigmoid", NoBias: true, KernelInit: nn.Uniform{Lo: -1, Hi: 1}})
	for _, tc := range []struct {
		name  string
		model nn.Model
	}{
		{"cnn", cnn},
		{"tokens", tokens},
		{"functional", residual(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := nn.MarshalModel(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			back, err := nn.LoadModel(b)
			if err != nil {
				t.Fatalf("LoadModel(%s): %v", b, err)
			}
			if got, want := graphText(t, back, 3), graphText(t, tc.model, 3); got != want {
				t.Errorf("the loaded model builds another graph:\n got %s\nwant %s", got, want)
			}
			again, err := nn.MarshalModel(back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, b) {
				t.Errorf("written again, the JSON differs:\n got %s\nwant %s", again, b)
			}
		})
	}
}

func TestLoadModelErrors(t *testing.T) {
	good, err := nn.MarshalModel(residual(t))
	if err != nil {
		t.Fatal(err)
	}
	seq := `{"format":"headroom.model","version":1,"model":{"type":"Sequential","config":{"Name":"m","InputShape":[4],"InputDType":"","Layers":[%s]}}}`
	for _, tc := range []struct {
		name, json string
		want       []string
	}{
		{"not_json", `{"format":`, []string{"model JSON"}},
		{"format", `{"format":"keras","version":1}`, []string{"keras", "headroom.model"}},
		{"version", `{"format":"headroom.model","version":9}`, []string{"version 9"}},
		{"unknown_type", fmt.Sprintf(seq, `{"type":"Frobnicate","config":{}}`), []string{"Frobnicate", "Dense"}},
		{"unknown_field", fmt.Sprintf(seq, `{"type":"Dense","config":{"LayerName":"d","Unitz":3}}`), []string{"Unitz", "Layers[0]"}},
		{"bad_field", fmt.Sprintf(seq, `{"type":"Dense","config":{"LayerName":"d","Units":"three"}}`), []string{"Units"}},
		{"not_a_layer", fmt.Sprintf(seq, `{"type":"GlorotUniform","config":{}}`), []string{"GlorotUniform"}},
		{"bad_activation", fmt.Sprintf(seq, `{"type":"Dense","config":{"LayerName":"d","Units":3,"Activation":"swoosh"}}`), []string{"swoosh"}},
		{"bad_dtype", strings.Replace(string(good), `"float32"`, `"float33"`, 1), []string{"float33"}},
		{"bad_call", strings.Replace(string(good), `"layer":0`, `"layer":99`, 1), []string{"layer 99"}},
		{"not_a_model", `{"format":"headroom.model","version":1,"model":{"type":"Dense","config":{}}}`, []string{"Dense", "Model"}},
		{"no_model", `{"format":"headroom.model","version":1}`, []string{"no model"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := nn.LoadModel([]byte(tc.json))
			if err == nil {
				t.Fatalf("LoadModel(%s) = %v, nil error", tc.json, m)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestMarshalModelFunc(t *testing.T) {
	m := &nn.ModelFunc{In: []nn.Input{{Name: "x", Shape: tensor.Shape{2}}}, Fn: func(c *nn.Context, xs []*graph.Node) []*graph.Node { return xs }}
	if _, err := nn.MarshalModel(m); err == nil || !strings.Contains(err.Error(), "ModelFunc") {
		t.Errorf("MarshalModel(ModelFunc): %v, want an error naming ModelFunc", err)
	}
}

// FuzzLoadModel: LoadModel returns a model or an error for any input,
// never panics.
func FuzzLoadModel(f *testing.F) {
	cnn, _ := nn.ModelByName("cnn", tensor.Shape{28, 28, 1}, 10)
	for _, m := range []nn.Model{cnn} {
		b, err := nn.MarshalModel(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format":"headroom.model","version":1,"model":{"type":"Functional","config":{"ModelName":"m","inputs":[{"name":"x","shape":[3],"dtype":"float32"}],"layers":[{"type":"Dense","config":{"LayerName":"d","Units":2}},{"type":"Add","config":{"LayerName":"a"}}],"calls":[{"layer":0,"inputs":[{"input":0}],"outputs":1},{"layer":1,"inputs":[{"call":0},{"call":0}],"outputs":1}],"outputs":[{"call":1}]}}}`))
	f.Add([]byte(`{"format":"headroom.model","version":1,"model":{"type":"Sequential","config":{"InputShape":[0,-1],"Layers":[{"type":"Conv2D","config":{"Kernel":[0,0],"Strides":[-1,0]}}]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := nn.LoadModel(b)
		if err == nil && m == nil {
			t.Fatal("nil model and nil error")
		}
	})
}
