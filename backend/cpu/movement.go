package cpu

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The data-movement ops (graph/shape.go), the gradients of slice and
// gather, and Assign's copy on the host. Moving elements never looks at
// their values, so most run on any dtype by its element size.
func init() {
	register(graph.OpAssign, kernel{bind: bySize(bindCopy[uint8], bindCopy[uint16], bindCopy[uint32], bindCopy[uint64])})
	register(graph.OpTranspose, kernel{bind: bySize(bindTranspose[uint8], bindTranspose[uint16], bindTranspose[uint32], bindTranspose[uint64])})
	register(graph.OpBroadcastTo, kernel{bind: bySize(bindBroadcastTo[uint8], bindBroadcastTo[uint16], bindBroadcastTo[uint32], bindBroadcastTo[uint64])})
	register(graph.OpConcat, kernel{bind: bySize(bindConcat[uint8], bindConcat[uint16], bindConcat[uint32], bindConcat[uint64])})
	register(graph.OpSlice, kernel{bind: bySize(bindSlice[uint8], bindSlice[uint16], bindSlice[uint32], bindSlice[uint64])})
	register(graph.OpUnslice, kernel{bind: bySize(bindUnslice[uint8], bindUnslice[uint16], bindUnslice[uint32], bindUnslice[uint64])})
	register(graph.OpGather, kernel{bind: bySize(bindGather[uint8], bindGather[uint16], bindGather[uint32], bindGather[uint64])})
	register(graph.OpScatterAdd, kernel{bind: floats(bindScatterAdd[float32], bindScatterAdd[float64])})
	register(graph.OpOneHot, kernel{bind: floats(bindOneHot[float32], bindOneHot[float64])})
}

// bindCopy binds variable, value -> the value copied into the variable.
func bindCopy[T any](b *Bound) func() error {
	dst, x := asAny[T](b.out), asAny[T](b.in[1])
	return func() error {
		kernels.Copy(dst, x)
		return nil
	}
}

func bindTranspose[T any](b *Bound) func() error {
	dst, x, g := asAny[T](b.out), asAny[T](b.in[0]), b.Move
	return func() error {
		kernels.Transpose(dst, x, g.XShape, g.Perm)
		return nil
	}
}

func bindBroadcastTo[T any](b *Bound) func() error {
	dst, x, shape, g := asAny[T](b.out), asAny[T](b.in[0]), b.Shape, b.Broadcast
	return func() error {
		kernels.BroadcastTo(dst, x, shape, g.AStrides)
		return nil
	}
}

func bindConcat[T any](b *Bound) func() error {
	dst, g := asAny[T](b.out), b.Move
	parts := make([][]T, len(b.in))
	for i, p := range b.in {
		parts[i] = asAny[T](p)
	}
	return func() error {
		kernels.Concat(dst, parts, g.Outer, g.Inners)
		return nil
	}
}

func bindSlice[T any](b *Bound) func() error {
	dst, x, g := asAny[T](b.out), asAny[T](b.in[0]), b.Move
	return func() error {
		kernels.Slice(dst, x, g.XShape, g.Starts, g.Ends)
		return nil
	}
}

func bindUnslice[T any](b *Bound) func() error {
	dst, x, shape, g := asAny[T](b.out), asAny[T](b.in[0]), b.Shape, b.Move
	return func() error {
		kernels.UnsliceRegion(dst, x, shape, g.Starts, g.Ends)
		return nil
	}
}

// bindGather binds params, indices -> rows; an index outside [0, V) is a
// run-time error.
func bindGather[T any](b *Bound) func() error {
	dst, x, idx, row := asAny[T](b.out), asAny[T](b.in[0]), tensor.As[int32](b.in[1]), b.Move.RowSize
	return func() error {
		if bad := kernels.Gather(dst, x, idx, row); bad >= 0 {
			return b.fail("index %d at position %d is outside [0, %d)", idx[bad], bad, len(x)/max(1, row))
		}
		return nil
	}
}

// bindScatterAdd binds indices, rows -> zeros with each row added at its
// index; an index outside [0, V) is a run-time error.
func bindScatterAdd[T kernels.Float](b *Bound) func() error {
	dst, idx, rows, row := tensor.As[T](b.out), tensor.As[int32](b.in[0]), tensor.As[T](b.in[1]), b.Move.RowSize
	return func() error {
		kernels.Fill(dst, 0)
		if bad := kernels.ScatterAdd(dst, idx, rows, row); bad >= 0 {
			return b.fail("index %d at position %d is outside [0, %d)", idx[bad], bad, len(dst)/max(1, row))
		}
		return nil
	}
}

func bindOneHot[T kernels.Float](b *Bound) func() error {
	dst, idx, depth := tensor.As[T](b.out), tensor.As[int32](b.in[0]), b.Move.Depth
	return func() error {
		kernels.OneHot(dst, idx, depth)
		return nil
	}
}
