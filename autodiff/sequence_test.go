package autodiff_test

import (
	"math/rand/v2"

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
		{name: "slices/unslice_add", shapes: []tensor.Shape{{4, 6}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			// overlapping slices of one value: their gradients are summed in place
			a := graph.Slice(x[0], []int{0, 0}, []int{3, 4})
			b := graph.Slice(x[0], []int{1, 2}, []int{4, 6})
			c := graph.Slice(x[0], []int{2, 1}, []int{3, 5})
			return graph.Concat(0, graph.Tanh(a), graph.Mul(b, b), graph.Exp(c))
		}},
	}
}
