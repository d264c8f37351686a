package autodiff

import "github.com/headroom-ml/headroom/graph"

// The VJP rules of convolution and pooling (graph/conv.go).
func init() {
	// a plain convolution's gradients are the core backprop ops; with
	// dilation or groups they carry both
	register(graph.OpConv2D, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		x, f, at := c.in(n, 0), c.in(n, 1), n.Attr()
		if at.Dilation == [2]int{} && at.Groups == 0 {
			return two(graph.Conv2DBackpropInput(gy, f, x.Shape(), at.Strides, at.Same),
				graph.Conv2DBackpropFilter(x, gy, f.Shape(), at.Strides, at.Same))
		}
		o := graph.ConvOptionsOf(at)
		return two(graph.Conv2DBackpropInputWith(gy, f, x.Shape(), o), graph.Conv2DBackpropFilterWith(x, gy, f.Shape(), o))
	})
	register(graph.OpMaxPool2D, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		at := n.Attr()
		return one(graph.MaxPool2DGrad(c.in(n, 0), gy, at.Window, at.Strides, at.Same))
	})
	register(graph.OpAvgPool2D, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		at := n.Attr()
		return one(graph.AvgPool2DGrad(gy, raw(n, 0).Shape(), at.Window, at.Strides, at.Same))
	})
	registerNoRule(internal, graph.OpConv2DBackpropInput, graph.OpConv2DBackpropFilter, graph.OpMaxPool2DGrad, graph.OpAvgPool2DGrad)
}
