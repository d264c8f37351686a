package compile

import (
	"github.com/headroom-ml/headroom/graph"
)

// Cost estimates the work of one run of the program: floating-point
// operations (2 per multiply-add in products and convolutions, one per
// element and step elsewhere) and bytes read and written. Fit-to-budget
// ranks plans with it before timing the best few.
func (p *Program) Cost() (flops, bytes float64) {
	size := func(b int) float64 { return float64(p.Plan.Buffers[b].Shape.Size()) }
	for _, in := range p.Instrs {
		out := size(in.Out)
		bytes += float64(p.Plan.Buffers[in.Out].Bytes)
		for _, b := range in.In {
			bytes += float64(p.Plan.Buffers[b].Bytes)
		}
		switch in.Op {
		case graph.OpMatMul:
			flops += 2 * float64(in.M) * float64(in.N) * float64(in.K) * float64(in.Batch)
		case graph.OpConv2D, graph.OpConv2DBackpropInput, graph.OpConv2DBackpropFilter, graph.OpConv2DTranspose:
			g := in.Geom
			flops += 2 * float64(g.N*g.OH*g.OW) * float64(g.KH*g.KW*g.C) * float64(in.F) / float64(max(g.Groups, 1))
		case graph.OpFused:
			flops += out * float64(len(in.Fused.Steps))
		default:
			flops += out
		}
	}
	return flops, bytes
}
