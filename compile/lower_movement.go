package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The lowering of the shape and data-movement ops (graph/shape.go) and of
// the gradients of slice and gather (graph/gradops.go): which elements of
// the inputs land where (MoveGeom).
func init() {
	registerNoInstr("a view of its input's bytes", graph.OpReshape)
	// x [XShape] -> x permuted
	register(graph.OpTranspose, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Move = &MoveGeom{XShape: n.Inputs()[0].Shape(), Perm: n.Attr().Perm}
	}})
	// x -> x broadcast to the output's shape
	register(graph.OpBroadcastTo, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Broadcast = &BroadcastGeom{AStrides: tensor.BroadcastStrides(n.Inputs()[0].Shape(), n.Shape())}
	}})
	// parts... -> joined along Attr.Axis
	register(graph.OpConcat, lowering{lower: func(n *graph.Node, it *Instr) {
		axis := n.Attr().Axis
		g := &MoveGeom{Outer: tensor.Shape(n.Shape()[:axis]).Size(), Inners: make([]int, len(n.Inputs()))}
		for i, p := range n.Inputs() {
			g.Inners[i] = tensor.Shape(p.Shape()[axis:]).Size()
		}
		it.Move = g
	}})
	// x [XShape] -> x[Starts:Ends]
	register(graph.OpSlice, lowering{lower: func(n *graph.Node, it *Instr) {
		at := n.Attr()
		it.Move = &MoveGeom{XShape: n.Inputs()[0].Shape(), Starts: at.Starts, Ends: at.Ends}
	}})
	// x -> zeros of the output's shape with x at [Starts:Ends]
	register(graph.OpUnslice, lowering{lower: lowerRegion})
	// params [V, ...], indices -> rows
	register(graph.OpGather, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Move = &MoveGeom{RowSize: tensor.Shape(n.Inputs()[0].Shape()[1:]).Size()}
	}})
	// indices, rows -> zeros [V, ...] with each row added at its index
	register(graph.OpScatterAdd, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Move = &MoveGeom{RowSize: tensor.Shape(n.Shape()[1:]).Size()}
	}})
	// indices -> [..., Depth]
	register(graph.OpOneHot, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Move = &MoveGeom{Depth: n.Attr().Depth}
	}})
}

// lowerRegion sets where input x of n (its last input) lands in the
// output: [Starts, Starts + x's shape).
func lowerRegion(n *graph.Node, it *Instr) {
	in := n.Inputs()
	x := in[len(in)-1]
	starts := n.Attr().Starts
	g := &MoveGeom{Starts: starts, Ends: make([]int, len(starts))}
	for i, st := range starts {
		g.Ends[i] = st + x.Shape()[i]
	}
	it.Move = g
}
