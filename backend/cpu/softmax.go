package cpu

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The softmax family (graph/softmax.go) and its internal gradients on the
// host, over the rows of the first input.
func init() {
	register(graph.OpSoftmax, kernel{bind: floats(bindRows(kernels.Softmax[float32]), bindRows(kernels.Softmax[float64]))})
	register(graph.OpLogSoftmax, kernel{bind: floats(bindRows(kernels.LogSoftmax[float32]), bindRows(kernels.LogSoftmax[float64]))})
	register(graph.OpSoftmaxGrad, kernel{bind: floats(bindRowsGrad(kernels.SoftmaxGrad[float32]), bindRowsGrad(kernels.SoftmaxGrad[float64]))})
	register(graph.OpLogSoftmaxGrad, kernel{bind: floats(bindRowsGrad(kernels.LogSoftmaxGrad[float32]), bindRowsGrad(kernels.LogSoftmaxGrad[float64]))})
	register(graph.OpSoftmaxCrossEntropy, kernel{bind: floats(bindSCE[float32], bindSCE[float64])})
	register(graph.OpSoftmaxCrossEntropyGrad, kernel{bind: floats(bindSCEGrad[float32], bindSCEGrad[float64])})
}

// bindRows binds x -> f(x) over rows.
func bindRows[T kernels.Float](f func(dst, x []T, rows, cols int) []T) binder {
	return func(b *Bound) func() error {
		dst, x, g := tensor.As[T](b.out), tensor.As[T](b.in[0]), *b.Matrix
		return func() error {
			f(dst, x, g.Rows, g.Cols)
			return nil
		}
	}
}

// bindRowsGrad binds y, dy -> f(y, dy) over rows.
func bindRowsGrad[T kernels.Float](f func(dst, y, dy []T, rows, cols int) []T) binder {
	return func(b *Bound) func() error {
		dst, y, dy, g := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), *b.Matrix
		return func() error {
			f(dst, y, dy, g.Rows, g.Cols)
			return nil
		}
	}
}

// bindSCE binds the per-example loss from logits and labels; a label
// outside [0, C) is a run-time error.
func bindSCE[T kernels.Float](b *Bound) func() error {
	dst, x, labels, g := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[int32](b.in[1]), *b.Matrix
	return func() error {
		if bad := kernels.SoftmaxCrossEntropy(dst, x, labels, g.Rows, g.Cols); bad >= 0 {
			return b.fail("label %d of example %d is outside [0, %d)", labels[bad], bad, g.Cols)
		}
		return nil
	}
}

func bindSCEGrad[T kernels.Float](b *Bound) func() error {
	dst, x, labels, dy, g := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[int32](b.in[1]), tensor.As[T](b.in[2]), *b.Matrix
	return func() error {
		if bad := kernels.SoftmaxCrossEntropyGrad(dst, x, labels, dy, g.Rows, g.Cols); bad >= 0 {
			return b.fail("label %d of example %d is outside [0, %d)", labels[bad], bad, g.Cols)
		}
		return nil
	}
}
