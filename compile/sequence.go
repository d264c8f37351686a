package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Lowering of the sequence ops (graph/sequence.go).
func init() {
	moreLowering[graph.OpAttention] = func(n *graph.Node, it *Instr) { lowerAttention(n, it, 3) }
	moreLowering[graph.OpAttentionGrad] = func(n *graph.Node, it *Instr) { lowerAttention(n, it, 6) }
	moreLowering[graph.OpUnsliceAdd] = func(n *graph.Node, it *Instr) { // acc, x -> acc with x added at Starts
		x := n.Inputs()[1]
		it.InDType = n.DType()
		it.Starts = n.Attr().Starts
		it.Ends = make([]int, len(it.Starts))
		for i, st := range it.Starts {
			it.Ends[i] = st + x.Shape()[i]
		}
	}
	layerNorm := func(n *graph.Node, it *Instr) { // x [rows, C] first
		x := n.Inputs()[0].Shape()
		it.Cols = x[x.Rank()-1]
		it.Rows = x.Size() / max(it.Cols, 1)
		it.Eps = n.Attr().Eps
	}
	moreLowering[graph.OpLayerNorm] = layerNorm
	moreLowering[graph.OpLayerNormGrad] = layerNorm
	moreLowering[graph.OpCacheWrite] = func(n *graph.Node, it *Instr) { // cache, x, pos
		it.InDType = n.DType()
		it.XShape = n.Inputs()[1].Shape()
	}
}

// lowerAttention sets the geometry of an attention (q, k, v first) or its
// gradient; its mask and step inputs, if any, come from input extra on.
func lowerAttention(n *graph.Node, it *Instr, extra int) {
	in := n.Inputs()
	q, k := in[0].Shape(), in[1].Shape()
	at := n.Attr()
	it.Attn = AttnGeom{B: q[0], Tq: q[1], Tk: k[1], H: q[2], D: q[3], Scale: at.Scale, Causal: at.Causal}
	it.Rate, it.Seed = at.Rate, at.Seed
	it.MaskIn, it.StepIn = -1, -1
	for i := extra; i < len(in); i++ {
		switch in[i].DType() {
		case tensor.Bool, tensor.Uint8:
			it.MaskIn = i
		case tensor.Int64:
			it.StepIn = i
		}
	}
}
