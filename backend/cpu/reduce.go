package cpu

import (
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The reductions (graph/reduce.go) on the host.
func init() {
	register(graph.OpReduceSum, kernel{bind: floats(bindReduceSum[float32], bindReduceSum[float64]),
		lower: func(t *Target, it *compile.Instr) int64 {
			if it.Reduce.Product {
				return int64(8 * kernels.ChannelSumsWork(it.Reduce.XShape[len(it.Reduce.XShape)-1]))
			}
			return 0
		}})
	register(graph.OpReduceMean, kernel{bind: floats(bindReduceMean[float32], bindReduceMean[float64])})
	register(graph.OpReduceMax, kernel{bind: floats(bindReduceMax[float32], bindReduceMax[float64])})
}

func bindReduceSum[T kernels.Float](b *Bound) func() error {
	dst, x, g, p := tensor.As[T](b.out), tensor.As[T](b.in[0]), b.Reduce, b.pool
	if g.Product { // Σ x and Σ x·In[1] over the rows, in one pass (FuseChannelSums)
		if len(b.in) != 2 || len(b.more) != 1 || b.more[0] == nil {
			return nil
		}
		cols := g.XShape[len(g.XShape)-1]
		rows := len(x) / max(cols, 1)
		dst2, y, work := tensor.As[T](b.more[0]), tensor.As[T](b.in[1]), tensor.As[float64](b.work)
		return func() error {
			kernels.ChannelSumsOn(p, dst, dst2, x, y, rows, cols, work)
			return nil
		}
	}
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
