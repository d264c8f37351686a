package cpu

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The reductions (graph/reduce.go) on the host.
func init() {
	register(graph.OpReduceSum, kernel{bind: floats(bindReduceSum[float32], bindReduceSum[float64])})
	register(graph.OpReduceMean, kernel{bind: floats(bindReduceMean[float32], bindReduceMean[float64])})
	register(graph.OpReduceMax, kernel{bind: floats(bindReduceMax[float32], bindReduceMax[float64])})
}

func bindReduceSum[T kernels.Float](b *Bound) func() error {
	dst, x, g, p := tensor.As[T](b.out), tensor.As[T](b.in[0]), b.Reduce, b.pool
	return func() error {
		kernels.ReduceSumOn(p, dst, x, g.XShape, g.DstStrides)
		return nil
	}
}

// bindReduceMean binds the sum scaled by 1/count.
func bindReduceMean[T kernels.Float](b *Bound) func() error {
	dst, x, g, p := tensor.As[T](b.out), tensor.As[T](b.in[0]), b.Reduce, b.pool
	return func() error {
		kernels.ReduceSumOn(p, dst, x, g.XShape, g.DstStrides)
		kernels.BinaryScalar(kernels.Mul, dst, dst, T(g.Scale))
		return nil
	}
}

func bindReduceMax[T kernels.Float](b *Bound) func() error {
	dst, x, g := tensor.As[T](b.out), tensor.As[T](b.in[0]), b.Reduce
	return func() error {
		kernels.ReduceMax(dst, x, g.XShape, g.DstStrides)
		return nil
	}
}
