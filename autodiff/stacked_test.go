package autodiff_test

import (
	"testing"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

func init() { registerGradCases(recurrenceGradCases) }

// recurrence builds an unrolled recurrence the way nn's recurrent layers
// do: the inputs' projection xw = x·w [B, T, n] for every step, then per
// step z = xw[:, t] + h·u and h = tanh(z). back reads the steps from the
// end; h0, when not nil, is the initial state (else the first step has no
// product); mask, when not nil, multiplies the state before the product
// (recurrent dropout); leak adds xw itself to the output, so that its
// gradient is more than the steps' slots.
func recurrence(x, w, u, h0, mask *graph.Node, back, leak bool) *graph.Node {
	xw := graph.MatMul(x, w)
	B, T, n := xw.Shape()[0], xw.Shape()[1], xw.Shape()[2]
	h := h0
	rows := make([]*graph.Node, T)
	for s := range T {
		t := s
		if back {
			t = T - 1 - s
		}
		z := graph.Reshape(graph.Slice(xw, []int{0, t, 0}, []int{B, t + 1, n}), B, n)
		if h != nil {
			hr := h
			if mask != nil {
				hr = graph.Mul(hr, mask)
			}
			z = graph.Add(z, graph.MatMul(hr, u))
		}
		h = graph.Tanh(z)
		rows[t] = graph.Reshape(h, B, 1, n)
	}
	out := graph.Concat(1, rows...)
	if leak {
		out = graph.Add(out, graph.Mul(xw, xw))
	}
	return out
}

// recurrenceGradCases check the recurrent kernel's gradient stacked over
// the steps (stacked.go) and the sums it must leave alone.
func recurrenceGradCases() []gradCase {
	// x [B=2, T=6, 3], w [3, 4], u [4, 4]
	shapes := []tensor.Shape{{2, 6, 3}, {3, 4}, {4, 4}}
	withState := append(append([]tensor.Shape{}, shapes...), tensor.Shape{2, 4}, tensor.Shape{2, 4})
	return []gradCase{
		{name: "recurrence/stacked", shapes: shapes, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return recurrence(x[0], x[1], x[2], nil, nil, false, false)
		}},
		{name: "recurrence/stacked_backwards_state_mask", shapes: withState, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return recurrence(x[0], x[1], x[2], x[3], x[4], true, false)
		}},
		{name: "recurrence/input_read_elsewhere", shapes: shapes, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return recurrence(x[0], x[1], x[2], nil, nil, false, true)
		}},
	}
}

// TestStackedRecurrentGradient checks which recurrent kernels' gradients
// become one product over the steps (k = B·T) and which stay a sum of
// per-step products: the gradient checks above hold either way.
func TestStackedRecurrentGradient(t *testing.T) {
	for _, c := range []struct {
		name        string
		state, back bool
		leak        bool
		steps       int // T
		stacked     bool
	}{
		{"forward", false, false, false, 6, true},
		{"backwards_with_state", true, true, false, 6, true},
		{"input_read_elsewhere", false, false, true, 6, false},
		{"too_few_steps", false, false, false, 4, false}, // 3 products
		{"least_steps", false, false, false, 5, true},    // 4 products
	} {
		t.Run(c.name, func(t *testing.T) {
			g := graph.New()
			B, in, n := 2, 3, 4
			x := g.Param("x", tensor.Float32, tensor.Shape{B, c.steps, in})
			w := g.Param("w", tensor.Float32, tensor.Shape{in, n})
			u := g.Param("u", tensor.Float32, tensor.Shape{n, n})
			var h0 *graph.Node
			if c.state {
				h0 = g.Param("h0", tensor.Float32, tensor.Shape{B, n})
			}
			loss := graph.ReduceSum(recurrence(x, w, u, h0, nil, c.back, c.leak))
			var grads []*graph.Node
			if err := graph.Catch(func() { grads = autodiff.Grad(loss, w, u) }); err != nil {
				t.Fatal(err)
			}
			gu := grads[1]
			one := gu.Op() == graph.OpMatMul && gu.Attr().TransA && gu.Inputs()[0].Shape().Equal(tensor.Shape{B * c.steps, n})
			if one != c.stacked {
				t.Fatalf("stacked %v, want %v: u's gradient is %s%v", one, c.stacked, gu.Op(), gu.Shape())
			}
			if one && gu.Inputs()[1].Shape()[0] != B*c.steps {
				t.Fatalf("the stacked product's second operand is %v, want %d rows", gu.Inputs()[1].Shape(), B*c.steps)
			}
		})
	}
}
