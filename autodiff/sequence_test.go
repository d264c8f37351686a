package autodiff_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

func init() { registerGradCases(sequenceGradCases) }

// sequenceGradCases check attention (the memory-efficient op, in float64
// its reference loop) in each causal mode, with a mask that hides whole
// rows, and with dropout; and the in-place sum of overlapping slices'
// gradients (unslice_add).
func sequenceGradCases() []gradCase {
	attn := func(opt graph.AttentionOptions, mask []uint8, maskShape tensor.Shape) func(g *graph.Graph, x []*graph.Node) *graph.Node {
		return func(g *graph.Graph, x []*graph.Node) *graph.Node {
			if mask != nil {
				opt.Mask = g.Constant(tensor.FromSlice(maskShape, mask))
			}
			if opt.DropoutRate > 0 {
				opt.Step = g.Input("step", tensor.Int64, nil)
			}
			return graph.Attention(x[0], x[1], x[2], opt)
		}
	}
	// q [B=2, Tq=3, H=2, D=4], k and v [2, Tk=5, 2, 4]
	qkv := []tensor.Shape{{2, 3, 2, 4}, {2, 5, 2, 4}, {2, 5, 2, 4}}
	square := []tensor.Shape{{2, 4, 2, 3}, {2, 4, 2, 3}, {2, 4, 2, 3}}
	mask := make([]uint8, 2*3*5)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range mask {
		mask[i] = uint8(rng.IntN(2))
	}
	clear(mask[5:10]) // example 0, query 1 sees nothing
	return []gradCase{
		{name: "attention", shapes: qkv, build: attn(graph.AttentionOptions{}, nil, nil)},
		{name: "attention/scale", shapes: qkv, build: attn(graph.AttentionOptions{Scale: -0.7}, nil, nil)},
		{name: "attention/causal_top_left", shapes: square, build: attn(graph.AttentionOptions{Causal: graph.CausalTopLeft}, nil, nil)},
		{name: "attention/causal_bottom_right", shapes: qkv, build: attn(graph.AttentionOptions{Causal: graph.CausalBottomRight}, nil, nil)},
		{name: "attention/causal_top_left_rect", shapes: qkv, build: attn(graph.AttentionOptions{Causal: graph.CausalTopLeft}, nil, nil)},
		{name: "attention/mask", shapes: qkv, build: attn(graph.AttentionOptions{}, mask, tensor.Shape{2, 3, 5})},
		{name: "attention/dropout", shapes: qkv, build: attn(graph.AttentionOptions{DropoutRate: 0.3, DropoutSeed: 9}, nil, nil)},
		{name: "attention/shared_qkv", shapes: []tensor.Shape{{1, 4, 2, 3}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.Attention(x[0], x[0], x[0], graph.AttentionOptions{Causal: graph.CausalTopLeft})
		}},
		unary("gelu", graph.Gelu, nil),
		{name: "layer_norm", shapes: []tensor.Shape{{3, 2, 5}, {5}, {5}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.LayerNorm(x[0], x[1], x[2], 1e-3)
		}},
		{name: "layer_norm/rows_of_one", shapes: []tensor.Shape{{4, 1}, {1}, {1}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.LayerNorm(x[0], x[1], x[2], 0.5) // x̂ = 0: the output is beta, the gradient of x 0
		}},
		// an LSTM step (B=3, 2 units): z alone, with a previous state, two
		// steps chained through the state (part 1's gradient goes to the
		// op's rule), and only the state read (no gradient of h at all)
		{name: "lstm_cell", shapes: []tensor.Shape{{3, 8}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.LSTMCell(x[0], nil)
		}},
		{name: "lstm_cell/prev", shapes: []tensor.Shape{{3, 8}, {3, 2}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.LSTMCell(x[0], x[1])
		}},
		{name: "lstm_cell/two_steps", shapes: []tensor.Shape{{3, 8}, {3, 8}, {3, 2}, {2, 8}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			h1 := graph.LSTMCell(x[0], x[2])
			h2 := graph.LSTMCell(graph.Add(x[1], graph.MatMul(h1, x[3])), graph.PartOf(h1, 1))
			return graph.Concat(1, h2, graph.PartOf(h2, 1), h1)
		}},
		{name: "lstm_cell/state_only", shapes: []tensor.Shape{{3, 8}, {3, 2}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.PartOf(graph.LSTMCell(x[0], x[1]), 1)
		}},
		// a GRU step (B=3, 2 units): x alone, with the recurrent
		// projection, with a previous state, and two steps chained
		{name: "gru_cell", shapes: []tensor.Shape{{3, 6}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.GRUCell(x[0], nil, nil)
		}},
		{name: "gru_cell/u", shapes: []tensor.Shape{{3, 6}, {3, 6}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.GRUCell(x[0], x[1], nil)
		}},
		{name: "gru_cell/prev", shapes: []tensor.Shape{{3, 6}, {3, 6}, {3, 2}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.GRUCell(x[0], x[1], x[2])
		}},
		{name: "gru_cell/two_steps", shapes: []tensor.Shape{{3, 6}, {3, 6}, {2, 6}, {6}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			h1 := graph.GRUCell(x[0], graph.BroadcastTo(x[3], 3, 6), nil)
			h2 := graph.GRUCell(x[1], graph.Add(graph.MatMul(h1, x[2]), x[3]), h1)
			return graph.Concat(1, h2, h1)
		}},
		{name: "slices/unslice_add", shapes: []tensor.Shape{{4, 6}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			// overlapping slices of one value: their gradients are summed in place
			a := graph.Slice(x[0], []int{0, 0}, []int{3, 4})
			b := graph.Slice(x[0], []int{1, 2}, []int{4, 6})
			c := graph.Slice(x[0], []int{2, 1}, []int{3, 5})
			return graph.Concat(0, graph.Tanh(a), graph.Mul(b, b), graph.Exp(c))
		}},
	}
}

// TestPartGradientRefused differentiates through a part of an op whose
// rule does not take its parts' gradients (a layer norm's row means), and
// through the part of an LSTM step that carries none (its activations):
// the error names the op and the part.
func TestPartGradientRefused(t *testing.T) {
	g := graph.New()
	x := g.Variable("x", graph.RoleParam, tensor.Float64, tensor.Shape{3, 4})
	gamma := g.Variable("gamma", graph.RoleParam, tensor.Float64, tensor.Shape{4})
	beta := g.Variable("beta", graph.RoleParam, tensor.Float64, tensor.Shape{4})
	y := graph.LayerNorm(x, gamma, beta, 1e-3)
	loss := graph.Add(graph.ReduceSum(y), graph.ReduceSum(graph.PartOf(y, 1)))
	err := graph.Catch(func() { autodiff.Grad(loss, x) })
	if err == nil || !strings.Contains(err.Error(), "layer_norm") || !strings.Contains(err.Error(), "part 1") {
		t.Fatalf("got %v, want an error naming layer_norm and its part 1", err)
	}
	// an LSTM step takes its state's gradient, not its activations'
	z := g.Variable("z", graph.RoleParam, tensor.Float64, tensor.Shape{3, 8})
	h := graph.LSTMCell(z, nil)
	loss = graph.Add(graph.ReduceSum(h), graph.ReduceSum(graph.PartOf(h, 2)))
	err = graph.Catch(func() { autodiff.Grad(loss, z) })
	if err == nil || !strings.Contains(err.Error(), "lstm_cell") || !strings.Contains(err.Error(), "part 2") {
		t.Fatalf("got %v, want an error naming lstm_cell and its part 2", err)
	}
}
