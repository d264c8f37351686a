package autodiff

import (
	"github.com/headroom-ml/headroom/graph"
)

// The VJP rules of the vision ops (graph/vision.go).
func init() {
	// y = Conv2DBackpropInput(x, f) from y's shape: dx is the forward
	// convolution of gy, df the filter gradient with gy as its input and x
	// as its output gradient.
	register(graph.OpConv2DTranspose, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		x, f, o := c.in(n, 0), c.in(n, 1), graph.ConvOptionsOf(n.Attr())
		return two(graph.Conv2DWith(gy, f, o), graph.Conv2DBackpropFilterWith(gy, x, f.Shape(), o))
	})
	register(graph.OpResizeBilinear, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return one(graph.ResizeBilinearGrad(gy, raw(n, 0).Shape()))
	})
	register(graph.OpMoments, ruleMoments)
	register(graph.OpReluClip, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		a := n.Attr().Act
		if graph.ReluClipFromOutput(a[1], a[2]) { // read the output: the input may be overwritten
			a[3] = 1
			return one(graph.ReluClipGrad(c.val(n), gy, a))
		}
		return one(graph.ReluClipGrad(c.in(n, 0), gy, a))
	})
	register(graph.OpElu, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return one(graph.EluGrad(c.val(n), gy, n.Attr().Act))
	})
	register(graph.OpSilu, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.SiluGrad(c.in(n, 0), gy)) })
	register(graph.OpHardSwish, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.HardSwishGrad(c.in(n, 0), gy)) })
	register(graph.OpSoftplus, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.SoftplusGrad(c.in(n, 0), gy)) })
	register(graph.OpSoftsign, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.SoftsignGrad(c.in(n, 0), gy)) })
	registerNoRule(internal, graph.OpResizeBilinearGrad, graph.OpReluClipGrad, graph.OpEluGrad, graph.OpSiluGrad,
		graph.OpHardSwishGrad, graph.OpSoftplusGrad, graph.OpSoftsignGrad)
}

// ruleMoments: for m = mean(x) and v = mean((x - m)²) over the R rows of
// x [..., C], dx = gm/R + gv·2(x - m)/R (the gv term's dm part sums to
// zero), broadcast over the rows: an elementwise chain the fusion pass
// runs as one.
func ruleMoments(c *vjp, n, gy *graph.Node) []*graph.Node {
	x := c.in(n, 0)
	ch := n.Shape()[1]
	rows := float64(x.Shape().Size() / ch)
	row := func(v *graph.Node, i int) *graph.Node {
		return graph.Reshape(graph.Slice(v, []int{i, 0}, []int{i + 1, ch}), ch)
	}
	gm, gv, mean := row(gy, 0), row(gy, 1), row(c.val(n), 0)
	dx := graph.Mul(graph.Sub(x, mean), graph.MulScalar(gv, 2/rows))
	return one(graph.Add(dx, graph.MulScalar(gm, 1/rows)))
}
