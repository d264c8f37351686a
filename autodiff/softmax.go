package autodiff

import "github.com/headroom-ml/headroom/graph"

// The VJP rules of the softmax family (graph/softmax.go): each reads its
// output (or the logits) and builds the family's gradient op.
func init() {
	register(graph.OpSoftmax, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.SoftmaxGrad(c.val(n), gy)) })
	register(graph.OpLogSoftmax, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return one(graph.LogSoftmaxGrad(c.val(n), gy))
	})
	register(graph.OpSoftmaxCrossEntropy, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return two(graph.SoftmaxCrossEntropyGrad(c.in(n, 0), c.in(n, 1), gy), nil)
	})
	registerNoRule(internal, graph.OpSoftmaxGrad, graph.OpLogSoftmaxGrad, graph.OpSoftmaxCrossEntropyGrad)
}
