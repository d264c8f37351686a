package nn_test

import (
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// buildAt builds m at batch b and returns its outputs' shapes and the
// context.
func buildAt(t *testing.T, m nn.Model, b int) ([]tensor.Shape, *nn.Context) {
	t.Helper()
	var shapes []tensor.Shape
	var c *nn.Context
	err := graph.Catch(func() {
		g := graph.New()
		c = nn.NewContext(g, true, 1)
		var ins []*graph.Node
		for _, in := range m.Inputs() {
			ins = append(ins, g.Input(in.Name, in.Type(), append(tensor.Shape{b}, in.Shape...)))
		}
		for _, o := range m.Build(c, ins) {
			shapes = append(shapes, o.Shape())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return shapes, c
}

func TestFunctionalResidualTwoInputsTwoOutputs(t *testing.T) {
	img := nn.NewInput("image", tensor.Shape{6, 6, 2})
	meta := nn.NewInput("meta", tensor.Shape{3})
	h := nn.Apply(&nn.Conv2D{LayerName: "conv", Filters: 4, Kernel: [2]int{3, 3}, Same: true, Activation: "relu"}, img)
	h2 := nn.Apply(&nn.Conv2D{LayerName: "conv_1", Filters: 4, Kernel: [2]int{3, 3}, Same: true}, h)
	r := nn.Apply(&nn.Add{LayerName: "skip"}, h, h2)
	f := nn.Apply(&nn.Flatten{LayerName: "flatten"}, r)
	j := nn.Apply(&nn.Concatenate{LayerName: "join"}, f, meta)
	shared := &nn.Dense{LayerName: "shared", Units: 5}
	a := nn.Apply(shared, j)
	b := nn.Apply(shared, nn.Apply(&nn.Dense{LayerName: "proj", Units: 147}, a)) // the same layer again
	m, err := nn.NewFunctional("net", []*nn.Tensor{img, meta}, []*nn.Tensor{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Shape; !got.Equal(tensor.Shape{147}) {
		t.Errorf("concatenation shape %v, want [147]", got)
	}
	shapes, c := buildAt(t, m, 7)
	if len(shapes) != 2 || !shapes[0].Equal(tensor.Shape{7, 5}) || !shapes[1].Equal(tensor.Shape{7, 5}) {
		t.Errorf("output shapes %v, want two [7 5]", shapes)
	}
	// the shared layer's weights are declared once
	total, trainable, err := nn.Params(m)
	if err != nil {
		t.Fatal(err)
	}
	want := (3*3*2*4 + 4) + (3*3*4*4 + 4) + (147*5 + 5) + (5*147 + 147)
	if total != want || trainable != want {
		t.Errorf("params %d (trainable %d), want %d: a shared layer counts once", total, trainable, want)
	}
	names := map[string]int{}
	for _, w := range c.Weights {
		names[w.Attr().Name]++
	}
	if names["shared/kernel"] != 1 {
		t.Errorf("shared/kernel declared %d times", names["shared/kernel"])
	}
	// every call's outputs are boundaries (two for the shared layer)
	if got := len(c.Boundaries); got != 8 {
		t.Errorf("%d layer boundaries, want 8", got)
	}
}

// Under a 16-bit storage policy every boundary but a model output is kept
// in 16 bits.
func TestFunctionalStorage(t *testing.T) {
	x := nn.NewInput("x", tensor.Shape{4})
	h := nn.Apply(&nn.Dense{LayerName: "a", Units: 3}, x)
	y := nn.Apply(&nn.Dense{LayerName: "b", Units: 2}, h)
	m, err := nn.NewFunctional("m", []*nn.Tensor{x}, []*nn.Tensor{y, h})
	if err != nil {
		t.Fatal(err)
	}
	err = graph.Catch(func() {
		g := graph.New()
		c := nn.NewContext(g, true, 1)
		c.Storage = tensor.BFloat16
		outs := m.Build(c, []*graph.Node{g.Input("x", tensor.Float32, tensor.Shape{2, 4})})
		for _, o := range outs {
			if o.Op() == graph.OpCast {
				t.Errorf("model output %s is an up-cast: outputs stay float32", o)
			}
		}
		if len(c.Low) != 0 {
			t.Errorf("%d values stored in 16 bits, want 0: both are model outputs", len(c.Low))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFunctionalNested(t *testing.T) {
	x := nn.NewInput("x", tensor.Shape{4})
	inner, err := nn.NewFunctional("block", []*nn.Tensor{x}, []*nn.Tensor{nn.Apply(&nn.Dense{LayerName: "d", Units: 4, Activation: "relu"}, x)})
	if err != nil {
		t.Fatal(err)
	}
	z := nn.NewInput("z", tensor.Shape{4})
	out := nn.Apply(&nn.Add{LayerName: "res"}, z, nn.Apply(inner, z))
	m, err := nn.NewFunctional("outer", []*nn.Tensor{z}, []*nn.Tensor{out})
	if err != nil {
		t.Fatal(err)
	}
	shapes, _ := buildAt(t, m, 3)
	if !shapes[0].Equal(tensor.Shape{3, 4}) {
		t.Errorf("nested model output %v, want [3 4]", shapes[0])
	}
}

func TestFunctionalErrors(t *testing.T) {
	x := nn.NewInput("x", tensor.Shape{4})
	other := nn.NewInput("other", tensor.Shape{4})
	y := nn.Apply(&nn.Add{LayerName: "add"}, x, other)
	if _, err := nn.NewFunctional("m", []*nn.Tensor{x}, []*nn.Tensor{y}); err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("an input not listed: %v, want an error naming it", err)
	}
	bad := nn.Apply(&nn.Concatenate{LayerName: "cat", Axis: 1}, x, nn.NewInput("w", tensor.Shape{5, 2}))
	if _, err := nn.NewFunctional("m", []*nn.Tensor{x}, []*nn.Tensor{bad}); err == nil {
		t.Error("a concatenation of ranks 2 and 3: nil error")
	}
	d := nn.Apply(&nn.Dense{LayerName: "d", Units: 3}, x)
	if _, err := nn.NewFunctional("m", []*nn.Tensor{d}, []*nn.Tensor{d}); err == nil {
		t.Error("a layer output as an input: nil error")
	}
}

func TestMergeLayers(t *testing.T) {
	a, b := nn.NewInput("a", tensor.Shape{3, 4}), nn.NewInput("b", tensor.Shape{3, 4})
	for _, c := range []struct {
		l    any
		want tensor.Shape
	}{
		{&nn.Add{LayerName: "l"}, tensor.Shape{3, 4}},
		{&nn.Subtract{LayerName: "l"}, tensor.Shape{3, 4}},
		{&nn.Multiply{LayerName: "l"}, tensor.Shape{3, 4}},
		{&nn.Average{LayerName: "l"}, tensor.Shape{3, 4}},
		{&nn.Maximum{LayerName: "l"}, tensor.Shape{3, 4}},
		{&nn.Minimum{LayerName: "l"}, tensor.Shape{3, 4}},
		{&nn.Concatenate{LayerName: "l"}, tensor.Shape{3, 8}},
		{&nn.Concatenate{LayerName: "l", Axis: 1}, tensor.Shape{6, 4}},
		{&nn.Dot{LayerName: "l", Axes: [2]int{2, 2}}, tensor.Shape{3, 3}},
		{&nn.Dot{LayerName: "l", Axes: [2]int{1, 1}, Normalize: true}, tensor.Shape{4, 4}},
	} {
		y := nn.Apply(c.l, a, b)
		if _, err := nn.NewFunctional("m", []*nn.Tensor{a, b}, []*nn.Tensor{y}); err != nil {
			t.Errorf("%T: %v", c.l, err)
			continue
		}
		if !y.Shape.Equal(c.want) {
			t.Errorf("%T %+v: shape %v, want %v", c.l, c.l, y.Shape, c.want)
		}
	}
	v, w := nn.NewInput("v", tensor.Shape{5}), nn.NewInput("w", tensor.Shape{5})
	y := nn.Apply(&nn.Dot{LayerName: "cos", Normalize: true}, v, w)
	if _, err := nn.NewFunctional("m", []*nn.Tensor{v, w}, []*nn.Tensor{y}); err != nil || !y.Shape.Equal(tensor.Shape{1}) {
		t.Errorf("Dot of vectors: %v, shape %v; want [1]", err, y.Shape)
	}
}
