package compile

import (
	"github.com/headroom-ml/headroom/graph"
)

// The lowering of convolution and pooling (graph/conv.go) and their
// internal gradients: the window geometry over the forward op's input
// (WindowGeom). Conv2D with dilation or groups lowers as Conv2D: NewWindow
// carries both.
func init() {
	// x [N, H, W, C], filter [KH, KW, C/G, F] -> [N, OH, OW, F]
	register(graph.OpConv2D, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Window = &WindowGeom{Geom: NewWindow(n.Inputs()[0].Shape(), n.Attr()), F: n.Shape()[3], BF16: n.Attr().BF16}
	}, flops: convFlops})
	// dy, filter -> dx [Of]
	register(graph.OpConv2DBackpropInput, lowering{lower: func(n *graph.Node, it *Instr) {
		at := n.Attr()
		it.Window = &WindowGeom{Geom: NewWindow(at.Of, at), F: n.Inputs()[0].Shape()[3], BF16: at.BF16}
	}, flops: convFlops})
	// x, dy -> dfilter [Of]
	register(graph.OpConv2DBackpropFilter, lowering{lower: func(n *graph.Node, it *Instr) {
		at := n.Attr()
		it.Window = &WindowGeom{Geom: NewWindow(n.Inputs()[0].Shape(), at), F: at.Of[3], BF16: at.BF16}
	}, flops: convFlops})
	// x [N, H, W, C] -> [N, OH, OW, C]; the max gradient: x, dy -> dx
	for _, op := range []graph.Op{graph.OpMaxPool2D, graph.OpAvgPool2D, graph.OpMaxPool2DGrad} {
		register(op, lowering{lower: func(n *graph.Node, it *Instr) {
			it.Window = &WindowGeom{Geom: NewWindow(n.Inputs()[0].Shape(), n.Attr())}
		}})
	}
	// dy -> dx [Of]
	register(graph.OpAvgPool2DGrad, lowering{lower: func(n *graph.Node, it *Instr) {
		at := n.Attr()
		it.Window = &WindowGeom{Geom: NewWindow(at.Of, at)}
	}})
}

// convFlops counts a convolution's (or its gradients') multiply-adds as
// two operations each.
func convFlops(it *Instr, _ float64) float64 {
	w := it.Window
	g := w.Geom
	return 2 * float64(g.N*g.OH*g.OW) * float64(g.KH*g.KW*g.C) * float64(w.F) / float64(max(g.Groups, 1))
}
