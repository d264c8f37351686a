package autodiff

import (
	"github.com/headroom-ml/headroom/graph"
)

// The VJP rules of the vision ops (graph/vision.go), and of Unslice, which
// is graph.Pad's op.
var _ = registerRules(func() {
	// Conv2D with dilation or groups: its gradients carry both; a plain
	// convolution keeps the core rule.
	core := rules[graph.OpConv2D]
	rules[graph.OpConv2D] = func(c *vjp, n, gy *graph.Node) []*graph.Node {
		at := n.Attr()
		if at.Dilation == [2]int{} && at.Groups == 0 {
			return core(c, n, gy)
		}
		x, f, o := c.in(n, 0), c.in(n, 1), graph.ConvOptionsOf(at)
		return two(graph.Conv2DBackpropInputWith(gy, f, x.Shape(), o), graph.Conv2DBackpropFilterWith(x, gy, f.Shape(), o))
	}
	// y = Conv2DBackpropInput(x, f) from y's shape: dx is the forward
	// convolution of gy, df the filter gradient with gy as its input and x
	// as its output gradient.
	rules[graph.OpConv2DTranspose] = func(c *vjp, n, gy *graph.Node) []*graph.Node {
		x, f, o := c.in(n, 0), c.in(n, 1), graph.ConvOptionsOf(n.Attr())
		return two(graph.Conv2DWith(gy, f, o), graph.Conv2DBackpropFilterWith(gy, x, f.Shape(), o))
	}
	rules[graph.OpResizeBilinear] = func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return one(graph.ResizeBilinearGrad(gy, raw(n, 0).Shape()))
	}
	rules[graph.OpMoments] = ruleMoments
	// Pad: the gradient is the slice of gy where x was placed
	rules[graph.OpUnslice] = func(c *vjp, n, gy *graph.Node) []*graph.Node {
		starts := n.Attr().Starts
		ends := make([]int, len(starts))
		for i, s := range starts {
			ends[i] = s + raw(n, 0).Shape()[i]
		}
		return one(graph.Slice(gy, starts, ends))
	}
	rules[graph.OpReluClip] = func(c *vjp, n, gy *graph.Node) []*graph.Node {
		a := n.Attr().Act
		if graph.ReluClipFromOutput(a[1], a[2]) { // read the output: the input may be overwritten
			a[3] = 1
			return one(graph.ReluClipGrad(c.val(n), gy, a))
		}
		return one(graph.ReluClipGrad(c.in(n, 0), gy, a))
	}
	rules[graph.OpElu] = func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return one(graph.EluGrad(c.val(n), gy, n.Attr().Act))
	}
	rules[graph.OpSilu] = func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.SiluGrad(c.in(n, 0), gy)) }
	rules[graph.OpHardSwish] = func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.HardSwishGrad(c.in(n, 0), gy)) }
	rules[graph.OpSoftplus] = func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.SoftplusGrad(c.in(n, 0), gy)) }
	rules[graph.OpSoftsign] = func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.SoftsignGrad(c.in(n, 0), gy)) }
})

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
