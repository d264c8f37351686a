package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The lowering of the elementwise ops (graph/elementwise.go), their
// internal gradients (graph/gradops.go) and dropout's random mask
// (graph/conv.go). The ops whose every operand has the output's shape need
// nothing beyond the header; the broadcasting ones carry their operands'
// strides (BroadcastGeom).

func init() {
	// unary, and the gradients of relu, sigmoid and tanh: the header says
	// all; each may be a step of a fused chain
	for _, op := range []graph.Op{graph.OpNeg, graph.OpExp, graph.OpLog, graph.OpSqrt, graph.OpRelu, graph.OpSigmoid,
		graph.OpTanh, graph.OpErf, graph.OpAbs, graph.OpReluGrad, graph.OpSigmoidGrad, graph.OpTanhGrad} {
		register(op, lowering{fusable: always})
	}
	// a, b -> a op b, broadcasting: the fastest loop their shapes allow
	for _, op := range []graph.Op{graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMaximum, graph.OpMinimum} {
		register(op, lowering{lower: lowerBinary, fusable: always})
	}
	// a, b -> bool, broadcasting
	for _, op := range []graph.Op{graph.OpEqual, graph.OpNotEqual, graph.OpLess, graph.OpLessEqual, graph.OpGreater, graph.OpGreaterEqual} {
		register(op, lowering{lower: func(n *graph.Node, it *Instr) {
			in, s := n.Inputs(), n.Shape()
			it.Broadcast = &BroadcastGeom{AStrides: tensor.BroadcastStrides(in[0].Shape(), s), BStrides: tensor.BroadcastStrides(in[1].Shape(), s)}
		}})
	}
	// cond, a, b -> a where cond else b; InDType is the values' dtype. In
	// a fused chain only as a guard: one Bool for every element (see
	// graph.SetGuard).
	register(graph.OpWhere, lowering{
		lower: func(n *graph.Node, it *Instr) {
			in, s := n.Inputs(), n.Shape()
			it.InDType = in[1].DType()
			it.Broadcast = &BroadcastGeom{CStrides: tensor.BroadcastStrides(in[0].Shape(), s),
				AStrides: tensor.BroadcastStrides(in[1].Shape(), s), BStrides: tensor.BroadcastStrides(in[2].Shape(), s)}
		},
		fusable: func(n *graph.Node) bool { return n.Inputs()[0].Shape().Size() == 1 },
	})
	// x -> x as the node's dtype (InDType: x's)
	register(graph.OpCast, lowering{})
	// step -> a mask of the node's shape
	register(graph.OpDropoutMask, lowering{lower: func(n *graph.Node, it *Instr) {
		at := n.Attr()
		it.Random = &RandomGeom{Rate: at.Rate, Seed: at.Seed}
	}})
}

// lowerBinary chooses the loop of a broadcasting binary op: the fastest
// its operands' shapes allow.
func lowerBinary(n *graph.Node, it *Instr) {
	in, s := n.Inputs(), n.Shape()
	a, b := in[0].Shape(), in[1].Shape()
	g := &BroadcastGeom{Path: PathBroadcast}
	switch {
	case a.Equal(s) && b.Equal(s):
		g.Path = PathSame
	case a.Size() == s.Size() && b.Size() == 1:
		g.Path = PathScalarRight
	case a.Size() == 1 && b.Size() == s.Size():
		g.Path = PathScalarLeft
	}
	g.AStrides, g.BStrides = tensor.BroadcastStrides(a, s), tensor.BroadcastStrides(b, s)
	it.Broadcast = g
}
