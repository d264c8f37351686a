package onnx

import (
	"github.com/headroom-ml/headroom/graph"
)

// The reductions (graph/reduce.go).
func init() {
	register(graph.OpReduceSum, rule{batch: batchReduce, emit: reduce("ReduceSum")})
	register(graph.OpReduceMean, rule{batch: batchReduce, emit: reduce("ReduceMean")})
	register(graph.OpReduceMax, rule{batch: batchReduce, emit: reduce("ReduceMax")})
}

// reduce exports ReduceSum/Mean/Max over the node's axes. ReduceSum takes
// its axes as an input since opset 13, the others since opset 18.
func reduce(op string) func(*converter, *graph.Node) (string, error) {
	return func(c *converter, n *graph.Node) (string, error) {
		x, err := c.in(n, 0)
		if err != nil {
			return "", err
		}
		at := n.Attr()
		keep := attrI("keepdims", 0)
		if at.KeepDims {
			keep.I = 1
		}
		axes := int64s(at.Axes)
		if op == "ReduceSum" || c.opset >= 18 {
			return c.node(op, "", []string{x, c.constI64(axes...)}, keep), nil
		}
		return c.node(op, "", []string{x}, keep, attrIs("axes", axes...)), nil
	}
}
