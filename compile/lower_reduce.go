package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The lowering of the reductions (graph/reduce.go): x [XShape] -> the
// output, each input element added (or compared) into the output element
// its index maps to through DstStrides.
func init() {
	for _, op := range []graph.Op{graph.OpReduceSum, graph.OpReduceMean, graph.OpReduceMax} {
		register(op, lowering{lower: lowerReduce})
	}
}

func lowerReduce(n *graph.Node, it *Instr) {
	x := n.Inputs()[0]
	keep := x.Shape().Clone()
	count := 1
	for _, ax := range n.Attr().Axes {
		count *= keep[ax]
		keep[ax] = 1
	}
	it.Reduce = &ReduceGeom{XShape: x.Shape(), DstStrides: tensor.BroadcastStrides(keep, x.Shape()), Scale: 1 / float64(max(count, 1))}
}
