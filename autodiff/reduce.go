package autodiff

import "github.com/headroom-ml/headroom/graph"

// The VJP rules of the reductions (graph/reduce.go).
func init() {
	register(graph.OpReduceSum, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(expandReduced(n, gy)) })
	register(graph.OpReduceMean, ruleReduceMean)
	register(graph.OpReduceMax, ruleReduceMax)
}

func ruleReduceMean(c *vjp, n, gy *graph.Node) []*graph.Node {
	x := raw(n, 0)
	count := 1
	for _, a := range n.Attr().Axes {
		count *= x.Shape()[a]
	}
	return one(graph.MulScalar(expandReduced(n, gy), 1/float64(count)))
}

// ruleReduceMax shares the gradient equally among the elements equal to the
// maximum, as TensorFlow does.
func ruleReduceMax(c *vjp, n, gy *graph.Node) []*graph.Node {
	x := c.in(n, 0)
	keep := keepShape(x.Shape(), n.Attr().Axes)
	mask := graph.Cast(graph.Equal(x, graph.Reshape(c.val(n), keep...)), x.DType())
	count := graph.ReduceSumKeep(mask, n.Attr().Axes...)
	return one(graph.Mul(mask, graph.Div(graph.Reshape(gy, keep...), count)))
}
