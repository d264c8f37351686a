package onnx

import (
	"github.com/headroom-ml/headroom/graph"
)

// The softmax family (graph/softmax.go): softmax and log-softmax over the
// last axis. The loss and the gradients are a training step's.
func init() {
	register(graph.OpSoftmax, rule{batch: batchSame, emit: lastAxis("Softmax")})
	register(graph.OpLogSoftmax, rule{batch: batchSame, emit: lastAxis("LogSoftmax")})
	registerNotExportable("a training loss: export the logits or the probabilities", graph.OpSoftmaxCrossEntropy)
	registerNotExportable(trainingOnly, graph.OpSoftmaxGrad, graph.OpLogSoftmaxGrad, graph.OpSoftmaxCrossEntropyGrad)
}

// lastAxis exports Softmax or LogSoftmax over the last axis.
func lastAxis(op string) func(*converter, *graph.Node) (string, error) {
	return func(c *converter, n *graph.Node) (string, error) {
		x, err := c.in(n, 0)
		if err != nil {
			return "", err
		}
		return c.node(op, "", []string{x}, attrI("axis", -1)), nil
	}
}
