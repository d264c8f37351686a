package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The lowering of the sequence ops (graph/sequence.go).
func init() {
	registerNoInstr("a further output, written by its op's instruction (Instr.Parts)", graph.OpPart)
	// q, k, v [, mask] [, step] -> o; part 1: lse
	register(graph.OpAttention, lowering{lower: func(n *graph.Node, it *Instr) { lowerAttention(n, it, 3) }})
	// q, k, v, o, lse, do [, mask] [, step] -> dq; parts 1, 2: dk, dv
	register(graph.OpAttentionGrad, lowering{lower: func(n *graph.Node, it *Instr) { lowerAttention(n, it, 6) }})
	// acc, x -> acc with x added at Starts
	register(graph.OpUnsliceAdd, lowering{lower: lowerRegion})
	// cache, x, pos -> cache with x written at pos
	register(graph.OpCacheWrite, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Move = &MoveGeom{XShape: n.Inputs()[1].Shape()}
	}})
	// x -> gelu(x); x, dy -> dx
	register(graph.OpGelu, lowering{})
	register(graph.OpGeluGrad, lowering{})
	// x, gamma, beta -> y; parts 1, 2: mean, rstd. The gradient: x, gamma,
	// mean, rstd, dy -> dx; parts 1, 2: dgamma, dbeta. x [rows, C] first.
	layerNorm := func(n *graph.Node, it *Instr) {
		lowerRows(n, it)
		it.Matrix.Eps = n.Attr().Eps
	}
	register(graph.OpLayerNorm, lowering{lower: layerNorm})
	register(graph.OpLayerNormGrad, lowering{lower: layerNorm})
	// an LSTM step: z [, cPrev] -> h; parts 1, 2: c, the activations. Its
	// gradient: acts, dh, dc [, cPrev] -> dz; part 1: dcPrev. Matrix: B
	// rows of n units (Rows, Cols); the inputs' count says whether there
	// is a previous state.
	lstm := func(n *graph.Node, it *Instr) {
		s := n.Shape()
		units := s[1]
		switch n.Op() {
		case graph.OpLSTMCellGrad:
			units /= 4
		case graph.OpGRUCellGrad:
			units /= 3
		}
		it.Matrix = &MatrixGeom{Rows: s[0], Cols: units}
	}
	register(graph.OpLSTMCell, lowering{lower: lstm})
	register(graph.OpLSTMCellGrad, lowering{lower: lstm})
	// a GRU step: x [, u [, hPrev]] -> h; part 1: the activations. Its
	// gradient: acts, dh [, hPrev] -> dx; parts 1, 2: du, dhPrev. Matrix
	// as the LSTM's; the inputs' count says which are there.
	register(graph.OpGRUCell, lowering{lower: lstm})
	register(graph.OpGRUCellGrad, lowering{lower: lstm})
}

// lowerAttention sets the geometry of an attention (q, k, v first) or its
// gradient; its mask and step inputs, if any, come from input extra on.
func lowerAttention(n *graph.Node, it *Instr, extra int) {
	in := n.Inputs()
	q, k := in[0].Shape(), in[1].Shape()
	at := n.Attr()
	g := &AttnGeom{B: q[0], Tq: q[1], Tk: k[1], H: q[2], D: q[3], Scale: at.Scale, Causal: at.Causal,
		Rate: at.Rate, Seed: at.Seed, MaskIn: -1, StepIn: -1}
	for i := extra; i < len(in); i++ {
		switch in[i].DType() {
		case tensor.Bool, tensor.Uint8:
			g.MaskIn = i
		case tensor.Int64:
			g.StepIn = i
		}
	}
	it.Attention = g
}
