package autodiff

import (
	"slices"

	"github.com/headroom-ml/headroom/graph"
)

// The VJP rules of the shape and data-movement ops (graph/shape.go), and
// of Unslice, which is graph.Pad's op.
func init() {
	register(graph.OpReshape, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.Reshape(gy, raw(n, 0).Shape()...)) })
	register(graph.OpTranspose, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		perm := n.Attr().Perm
		inv := make([]int, len(perm))
		for i, p := range perm {
			inv[p] = i
		}
		return one(graph.Transpose(gy, inv...))
	})
	register(graph.OpBroadcastTo, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(unbroadcast(gy, raw(n, 0))) })
	register(graph.OpConcat, ruleConcat)
	register(graph.OpSlice, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return one(graph.Unslice(gy, raw(n, 0).Shape(), n.Attr().Starts))
	})
	// Pad: the gradient is the slice of gy where x was placed
	register(graph.OpUnslice, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		starts := n.Attr().Starts
		ends := make([]int, len(starts))
		for i, s := range starts {
			ends[i] = s + raw(n, 0).Shape()[i]
		}
		return one(graph.Slice(gy, starts, ends))
	})
	register(graph.OpGather, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return two(graph.ScatterAdd(c.in(n, 1), gy, raw(n, 0).Shape()), nil)
	})
	registerZero(graph.OpOneHot) // int32 indices
	registerNoRule(internal, graph.OpScatterAdd)
}

func ruleConcat(c *vjp, n, gy *graph.Node) []*graph.Node {
	axis := n.Attr().Axis
	out := make([]*graph.Node, len(n.Inputs()))
	off := 0
	for i, x := range n.Inputs() {
		starts := make([]int, gy.Shape().Rank())
		ends := slices.Clone([]int(gy.Shape()))
		starts[axis], ends[axis] = off, off+x.Shape()[axis]
		off = ends[axis]
		out[i] = graph.Slice(gy, starts, ends)
	}
	return out
}
