package compile

import (
	"github.com/headroom-ml/headroom/graph"
)

// The lowering of the vision ops (graph/vision.go). Conv2D with dilation
// or groups lowers as Conv2D (NewWindow carries both).

func init() {
	// x [N, H, W, Cin], filter [KH, KW, Cout, Cin] -> [Of]: the input
	// gradient of a Conv2D from the output's shape to x's, x as dy
	moreLowering[graph.OpConv2DTranspose] = func(n *graph.Node, it *Instr) {
		it.Geom, it.F = NewWindow(n.Shape(), n.Attr()), n.Inputs()[0].Shape()[3]
	}
	// x [N, H, W, C] -> [N, OH, OW, C]; the gradient: dy -> [Of]
	moreLowering[graph.OpResizeBilinear] = func(n *graph.Node, it *Instr) {
		it.Geom = resizeWindow(n.Inputs()[0].Shape(), n.Shape())
	}
	moreLowering[graph.OpResizeBilinearGrad] = func(n *graph.Node, it *Instr) {
		it.Geom = resizeWindow(n.Shape(), n.Inputs()[0].Shape())
	}
	// x [..., C] -> [2, C]
	moreLowering[graph.OpMoments] = func(n *graph.Node, it *Instr) {
		x := n.Inputs()[0].Shape()
		it.Cols = x[x.Rank()-1]
		it.Rows = x.Size() / max(it.Cols, 1)
	}
	act := func(n *graph.Node, it *Instr) { it.Act = n.Attr().Act }
	for _, op := range []graph.Op{graph.OpReluClip, graph.OpReluClipGrad, graph.OpElu, graph.OpEluGrad,
		graph.OpSilu, graph.OpSiluGrad, graph.OpHardSwish, graph.OpHardSwishGrad,
		graph.OpSoftplus, graph.OpSoftplusGrad, graph.OpSoftsign, graph.OpSoftsignGrad} {
		moreLowering[op] = act
	}
}

// resizeWindow is a resize from in [N, H, W, C] to out [N, OH, OW, C] as a
// Window (its sizes only).
func resizeWindow(in, out []int) Window {
	return Window{N: in[0], H: in[1], W: in[2], C: in[3], OH: out[1], OW: out[2]}
}
