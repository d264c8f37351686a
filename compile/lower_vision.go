package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The lowering of the vision ops (graph/vision.go).
func init() {
	// x [N, H, W, Cin], filter [KH, KW, Cout, Cin] -> [Of]: the input
	// gradient of a Conv2D from the output's shape to x's, x as dy
	register(graph.OpConv2DTranspose, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Window = &WindowGeom{Geom: NewWindow(n.Shape(), n.Attr()), F: n.Inputs()[0].Shape()[3], BF16: n.Attr().BF16}
	}, flops: convFlops})
	// x [N, H, W, C] -> [N, OH, OW, C]; the gradient: dy -> [Of]
	register(graph.OpResizeBilinear, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Window = &WindowGeom{Geom: resizeWindow(n.Inputs()[0].Shape(), n.Shape())}
	}})
	register(graph.OpResizeBilinearGrad, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Window = &WindowGeom{Geom: resizeWindow(n.Shape(), n.Inputs()[0].Shape())}
	}})
	// x [..., C] -> [2, C]
	register(graph.OpMoments, lowering{lower: func(n *graph.Node, it *Instr) {
		lowerRows(n, it)
		x := n.Inputs()[0].Shape()
		it.Matrix.Image = 1
		if r := x.Rank(); r >= 3 {
			it.Matrix.Image = tensor.Shape(x[1 : r-1]).Size()
		}
	}})
	// x -> act(x); the gradients: v, dy -> dx
	for _, op := range []graph.Op{graph.OpReluClip, graph.OpReluClipGrad, graph.OpElu, graph.OpEluGrad,
		graph.OpSilu, graph.OpSiluGrad, graph.OpHardSwish, graph.OpHardSwishGrad,
		graph.OpSoftplus, graph.OpSoftplusGrad, graph.OpSoftsign, graph.OpSoftsignGrad} {
		register(op, lowering{lower: func(n *graph.Node, it *Instr) {
			a := ActParams(n.Attr().Act)
			it.Act = &a
		}})
	}
}

// resizeWindow is a resize from in [N, H, W, C] to out [N, OH, OW, C] as a
// Window (its sizes only).
func resizeWindow(in, out []int) Window {
	return Window{N: in[0], H: in[1], W: in[2], C: in[3], OH: out[1], OW: out[2]}
}
