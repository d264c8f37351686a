package graph

import "github.com/headroom-ml/headroom/tensor"

func lastAxis(op Op, x *Node) {
	if x.dtype != tensor.Float32 && x.dtype != tensor.Float64 {
		x.g.throw(op, "needs float32 or float64, got %s%v", x.dtype, x.shape)
	}
	if x.shape.Rank() < 1 {
		x.g.throw(op, "needs rank >= 1, got a scalar")
	}
}

// Softmax normalizes the last axis of x: exp(x) / sum(exp(x)), computed
// stably.
func Softmax(x *Node) *Node {
	lastAxis(OpSoftmax, x)
	return x.g.add(OpSoftmax, x.dtype, x.shape, Attr{}, x)
}

// LogSoftmax returns log(Softmax(x)) over the last axis, computed stably.
func LogSoftmax(x *Node) *Node {
	lastAxis(OpLogSoftmax, x)
	return x.g.add(OpLogSoftmax, x.dtype, x.shape, Attr{}, x)
}

// SoftmaxCrossEntropy returns the per-example loss
// logsumexp(logits[i]) - logits[i, labels[i]] for logits [..., C] and int32
// labels [...]: the fused, stable form of sparse categorical cross-entropy
// from logits. A label outside [0, C) is a run-time error naming the op.
func SoftmaxCrossEntropy(logits, labels *Node) *Node {
	g := logits.g
	lastAxis(OpSoftmaxCrossEntropy, logits)
	if labels.dtype != tensor.Int32 {
		g.throw(OpSoftmaxCrossEntropy, "labels must be int32, got %s%v", labels.dtype, labels.shape)
	}
	batch := logits.shape[:logits.shape.Rank()-1]
	if !labels.shape.Equal(batch) {
		g.throw(OpSoftmaxCrossEntropy, "labels %v do not match logits %v (want %v)", labels.shape, logits.shape, tensor.Shape(batch))
	}
	return g.add(OpSoftmaxCrossEntropy, logits.dtype, batch, Attr{}, logits, labels)
}
