package compile

import (
	"github.com/headroom-ml/headroom/graph"
)

// The lowering of the softmax family (graph/softmax.go) and its internal
// gradients: the first input as a matrix of rows over the last axis.
func init() {
	for _, op := range []graph.Op{graph.OpSoftmax, graph.OpLogSoftmax, graph.OpSoftmaxGrad, graph.OpLogSoftmaxGrad,
		graph.OpSoftmaxCrossEntropy, graph.OpSoftmaxCrossEntropyGrad} {
		register(op, lowering{lower: lowerRows})
	}
}

// lowerRows sets the first input [..., C] as a matrix of C columns.
func lowerRows(n *graph.Node, it *Instr) {
	x := n.Inputs()[0].Shape()
	g := &MatrixGeom{Cols: x[x.Rank()-1]}
	g.Rows = x.Size() / max(g.Cols, 1)
	it.Matrix = g
}
