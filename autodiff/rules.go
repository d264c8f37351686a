package autodiff

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// What the rules of several families share.

// raw returns input i of n for its shape or dtype only (never recomputed).
func raw(n *graph.Node, i int) *graph.Node { return n.Inputs()[i] }

func one(a *graph.Node) []*graph.Node    { return []*graph.Node{a} }
func two(a, b *graph.Node) []*graph.Node { return []*graph.Node{a, b} }

// unbroadcast sums gy over the axes along which x was broadcast to gy's
// shape, and reshapes the result to x's shape.
func unbroadcast(gy, x *graph.Node) *graph.Node {
	if gy.Shape().Equal(x.Shape()) {
		return gy
	}
	axes := tensor.ReducedAxes(x.Shape(), gy.Shape())
	r := gy
	if len(axes) > 0 {
		r = graph.ReduceSum(gy, axes...)
	}
	return graph.Reshape(r, x.Shape()...)
}

// expandReduced broadcasts the gradient of a reduction back over the
// reduced axes of its input.
func expandReduced(n, gy *graph.Node) *graph.Node {
	x := raw(n, 0)
	return graph.BroadcastTo(graph.Reshape(gy, keepShape(x.Shape(), n.Attr().Axes)...), x.Shape()...)
}

func keepShape(s tensor.Shape, axes []int) []int {
	k := s.Clone()
	for _, a := range axes {
		k[a] = 1
	}
	return k
}
