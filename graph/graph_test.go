package graph_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

func TestShapeErrorsNameOpAndShapes(t *testing.T) {
	f32 := tensor.Float32
	cases := []struct {
		name  string
		build func(g *graph.Graph)
		want  []string
	}{
		{"matmul inner", func(g *graph.Graph) {
			graph.MatMul(g.Input("x", f32, tensor.Shape{2, 3}), g.Input("w", f32, tensor.Shape{4, 5}))
		}, []string{"matmul", "[2, 3]", "[4, 5]"}},
		{"add broadcast", func(g *graph.Graph) {
			graph.Add(g.Input("a", f32, tensor.Shape{2, 3}), g.Input("b", f32, tensor.Shape{4}))
		}, []string{"add", "[2, 3]", "[4]"}},
		{"dtype mismatch", func(g *graph.Graph) {
			graph.Mul(g.Input("a", f32, tensor.Shape{2}), g.Input("b", tensor.Float64, tensor.Shape{2}))
		}, []string{"mul", "float32", "float64"}},
		{"reshape size", func(g *graph.Graph) { graph.Reshape(g.Input("a", f32, tensor.Shape{2, 3}), 4, 2) }, []string{"reshape", "[2, 3]", "[4, 2]"}},
		{"transpose perm", func(g *graph.Graph) { graph.Transpose(g.Input("a", f32, tensor.Shape{2, 3}), 0, 0) }, []string{"transpose", "[0 0]", "[2, 3]"}},
		{"reduce axis", func(g *graph.Graph) { graph.ReduceSum(g.Input("a", f32, tensor.Shape{2, 3}), 2) }, []string{"reduce_sum", "axis 2", "[2, 3]"}},
		{"concat", func(g *graph.Graph) {
			graph.Concat(1, g.Input("a", f32, tensor.Shape{2, 3}), g.Input("b", f32, tensor.Shape{3, 3}))
		}, []string{"concat", "[2, 3]", "[3, 3]"}},
		{"slice", func(g *graph.Graph) { graph.Slice(g.Input("a", f32, tensor.Shape{2, 3}), []int{0, 1}, []int{2, 4}) }, []string{"slice", "[1:4]", "[2, 3]"}},
		{"labels", func(g *graph.Graph) {
			graph.SoftmaxCrossEntropy(g.Input("l", f32, tensor.Shape{4, 10}), g.Input("y", tensor.Int32, tensor.Shape{5}))
		}, []string{"softmax_cross_entropy", "[5]", "[4, 10]"}},
		{"labels dtype", func(g *graph.Graph) {
			graph.SoftmaxCrossEntropy(g.Input("l", f32, tensor.Shape{4, 10}), g.Input("y", f32, tensor.Shape{4}))
		}, []string{"softmax_cross_entropy", "int32", "float32[4]"}},
		{"gather indices", func(g *graph.Graph) {
			graph.Gather(g.Input("p", f32, tensor.Shape{4, 2}), g.Input("i", f32, tensor.Shape{3}))
		}, []string{"gather", "int32"}},
		{"broadcast_to", func(g *graph.Graph) { graph.BroadcastTo(g.Input("a", f32, tensor.Shape{3}), 2, 4) }, []string{"broadcast_to", "[3]", "[2, 4]"}},
		{"assign shape", func(g *graph.Graph) {
			graph.Assign(g.Param("w", f32, tensor.Shape{2}), g.Input("a", f32, tensor.Shape{3}))
		}, []string{"assign", "[3]", "[2]"}},
		{"duplicate variable", func(g *graph.Graph) { g.Param("w", f32, tensor.Shape{2}); g.Param("w", f32, tensor.Shape{2}) }, []string{"variable", `"w"`, "twice"}},
		{"where cond", func(g *graph.Graph) {
			a := g.Input("a", f32, tensor.Shape{2})
			graph.Where(a, a, a)
		}, []string{"where", "bool"}},
		{"one_hot depth", func(g *graph.Graph) { graph.OneHot(g.Input("i", tensor.Int32, tensor.Shape{2}), 0, f32) }, []string{"one_hot", "depth 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := graph.New()
			g.PushScope("layer7")
			err := graph.Catch(func() { c.build(g) })
			var ge *graph.Error
			if !errors.As(err, &ge) {
				t.Fatalf("got %v, want a *graph.Error", err)
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if !strings.Contains(msg, "graph_test.go:") {
				t.Errorf("message %q does not name the user's call site", msg)
			}
		})
	}
}

func TestCatchLetsOtherPanicsThrough(t *testing.T) {
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the original panic", r)
		}
	}()
	graph.Catch(func() { panic("boom") })
	t.Fatal("Catch swallowed a panic that is not a *graph.Error")
}

func TestNodesAreTopologicalAndOwned(t *testing.T) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{2, 3})
	g.PushScope("dense1")
	w := g.Param("dense1/w", tensor.Float32, tensor.Shape{3, 4})
	y := graph.Relu(graph.MatMul(x, w))
	g.PopScope()
	for _, n := range g.Nodes() {
		for _, in := range n.Inputs() {
			if in.ID() >= n.ID() {
				t.Errorf("%v has input %v with a larger id", n, in)
			}
		}
	}
	if got, want := y.Owner(), "dense1/relu"; got != want {
		t.Errorf("owner %q, want %q", got, want)
	}
	if got, want := w.Owner(), "dense1/w"; got != want {
		t.Errorf("variable owner %q, want %q", got, want)
	}
	if got, want := y.Shape(), (tensor.Shape{2, 4}); !got.Equal(want) {
		t.Errorf("shape %v, want %v", got, want)
	}
	if !strings.HasPrefix(y.Site(), "graph/graph_test.go:") {
		t.Errorf("site %q, want graph/graph_test.go:N", y.Site())
	}
}

func TestShapeInference(t *testing.T) {
	g := graph.New()
	f32 := tensor.Float32
	a := g.Input("a", f32, tensor.Shape{2, 3, 4})
	cases := []struct {
		name string
		n    *graph.Node
		want tensor.Shape
	}{
		{"reduce keep", graph.ReduceSumKeep(a, 1), tensor.Shape{2, 1, 4}},
		{"reduce negative axis", graph.ReduceMax(a, -1), tensor.Shape{2, 3}},
		{"reduce all", graph.ReduceMean(a), tensor.Shape{}},
		{"transpose", graph.Transpose(a, 2, 0, 1), tensor.Shape{4, 2, 3}},
		{"reshape infer", graph.Reshape(a, -1, 4), tensor.Shape{6, 4}},
		{"batched matmul", graph.MatMul(a, g.Input("b", f32, tensor.Shape{4, 5})), tensor.Shape{2, 3, 5}},
		{"matmul ta", graph.MatMulT(g.Input("c", f32, tensor.Shape{4, 3}), g.Input("d", f32, tensor.Shape{4, 5}), true, false), tensor.Shape{3, 5}},
		{"broadcast add", graph.Add(a, g.Input("e", f32, tensor.Shape{3, 1})), tensor.Shape{2, 3, 4}},
		{"concat", graph.Concat(-1, a, a), tensor.Shape{2, 3, 8}},
		{"slice", graph.Slice(a, []int{1}, []int{2}), tensor.Shape{1, 3, 4}},
		{"gather", graph.Gather(g.Input("p", f32, tensor.Shape{10, 4}), g.Input("i", tensor.Int32, tensor.Shape{2, 3})), tensor.Shape{2, 3, 4}},
		{"one_hot", graph.OneHot(g.Input("j", tensor.Int32, tensor.Shape{5}), 7, f32), tensor.Shape{5, 7}},
		{"compare", graph.Less(a, graph.ScalarLike(a, 0)), tensor.Shape{2, 3, 4}},
	}
	for _, c := range cases {
		if !c.n.Shape().Equal(c.want) {
			t.Errorf("%s: shape %v, want %v", c.name, c.n.Shape(), c.want)
		}
	}
}
