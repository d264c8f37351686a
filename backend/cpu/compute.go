package cpu

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// compute runs the float ops on T.
func compute[T kernels.Float](b *Bound) error {
	dst := tensor.As[T](b.out)
	if elementwise[T](b, 0, len(dst)) {
		return nil
	}
	x := tensor.As[T](b.in[0])
	switch b.Op {
	case graph.OpConv2D, graph.OpConv2DBackpropInput, graph.OpConv2DBackpropFilter:
		if b.BF16 && b.DType == tensor.Float32 {
			b.convBF16()
			break
		}
		conv := kernels.Conv2D[T]
		switch b.Op {
		case graph.OpConv2DBackpropInput:
			conv = kernels.Conv2DBackpropInput[T]
		case graph.OpConv2DBackpropFilter:
			conv = kernels.Conv2DBackpropFilter[T]
		}
		conv(dst, x, tensor.As[T](b.in[1]), tensor.As[T](b.work), b.geom, b.F)
	case graph.OpMaxPool2D:
		kernels.MaxPool2D(dst, x, b.geom)
	case graph.OpMaxPool2DGrad:
		if b.ReluMask {
			kernels.MaxPool2DReluGrad(dst, x, tensor.As[T](b.in[1]), b.geom)
		} else {
			kernels.MaxPool2DGrad(dst, x, tensor.As[T](b.in[1]), b.geom)
		}
	case graph.OpAvgPool2D:
		kernels.AvgPool2D(dst, x, b.geom)
	case graph.OpAvgPool2DGrad:
		kernels.AvgPool2DGrad(dst, x, b.geom)
	case graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMaximum, graph.OpMinimum: // broadcast (elementwise ran the others)
		kernels.BinaryBroadcast(binaryOp(b.Op), dst, x, tensor.As[T](b.in[1]), b.Shape, b.AStrides, b.BStrides)
	case graph.OpReduceSum:
		kernels.ReduceSum(dst, x, b.XShape, b.DstStrides)
	case graph.OpReduceMean:
		kernels.ReduceSum(dst, x, b.XShape, b.DstStrides)
		kernels.BinaryScalar(kernels.Mul, dst, dst, T(b.Scale))
	case graph.OpReduceMax:
		kernels.ReduceMax(dst, x, b.XShape, b.DstStrides)
	case graph.OpMatMul:
		if b.BF16 && b.DType == tensor.Float32 {
			matmul(b, tensor.As[float32](b.out), tensor.As[float32](b.in[0]), tensor.As[float32](b.in[1]), kernels.MatMulBF16)
			break
		}
		matmul(b, dst, x, tensor.As[T](b.in[1]), kernels.MatMul[T])
	case graph.OpSoftmax:
		kernels.Softmax(dst, x, b.Rows, b.Cols)
	case graph.OpLogSoftmax:
		kernels.LogSoftmax(dst, x, b.Rows, b.Cols)
	case graph.OpSoftmaxGrad:
		kernels.SoftmaxGrad(dst, x, tensor.As[T](b.in[1]), b.Rows, b.Cols)
	case graph.OpLogSoftmaxGrad:
		kernels.LogSoftmaxGrad(dst, x, tensor.As[T](b.in[1]), b.Rows, b.Cols)
	case graph.OpSoftmaxCrossEntropy:
		if bad := kernels.SoftmaxCrossEntropy(dst, x, tensor.As[int32](b.in[1]), b.Rows, b.Cols); bad >= 0 {
			return b.fail("label %d of example %d is outside [0, %d)", tensor.As[int32](b.in[1])[bad], bad, b.Cols)
		}
	case graph.OpSoftmaxCrossEntropyGrad:
		labels := tensor.As[int32](b.in[1])
		if bad := kernels.SoftmaxCrossEntropyGrad(dst, x, labels, tensor.As[T](b.in[2]), b.Rows, b.Cols); bad >= 0 {
			return b.fail("label %d of example %d is outside [0, %d)", labels[bad], bad, b.Cols)
		}
	case graph.OpScatterAdd:
		idx := tensor.As[int32](b.in[0])
		kernels.Fill(dst, 0)
		if bad := kernels.ScatterAdd(dst, idx, tensor.As[T](b.in[1]), b.RowSize); bad >= 0 {
			return b.fail("index %d at position %d is outside [0, %d)", idx[bad], bad, len(dst)/max(1, b.RowSize))
		}
	case graph.OpDropoutMask:
		kernels.DropoutMask(dst, b.Seed, tensor.As[int64](b.in[0])[0], b.Rate)
	case graph.OpOneHot:
		kernels.OneHot(dst, tensor.As[int32](b.in[0]), b.Depth)
	default:
		return b.fail("no %s kernel for %s", b.DType, b.Op)
	}
	return nil
}

// move runs the data-movement ops on elements of T's size.
func move[T any](b *Bound) error {
	d := asAny[T](b.out)
	x := asAny[T](b.in[0])
	switch b.Op {
	case graph.OpAssign:
		kernels.Copy(d, asAny[T](b.in[1]))
	case graph.OpTranspose:
		kernels.Transpose(d, x, b.XShape, b.Perm)
	case graph.OpBroadcastTo:
		kernels.BroadcastTo(d, x, b.Shape, b.AStrides)
	case graph.OpConcat:
		kernels.Concat(d, b.parts.([][]T), b.Outer, b.Inners)
	case graph.OpSlice:
		kernels.Slice(d, x, b.XShape, b.Starts, b.Ends)
	case graph.OpUnslice:
		kernels.UnsliceRegion(d, x, b.Shape, b.Starts, b.Ends)
	case graph.OpGather:
		idx := tensor.As[int32](b.in[1])
		if bad := kernels.Gather(d, x, idx, b.RowSize); bad >= 0 {
			return b.fail("index %d at position %d is outside [0, %d)", idx[bad], bad, len(x)/max(1, b.RowSize))
		}
	case graph.OpWhere:
		kernels.Where(d, b.in[0], asAny[T](b.in[1]), asAny[T](b.in[2]), b.Shape, b.CStrides, b.AStrides, b.BStrides)
	default:
		return b.fail("no data-movement kernel for %s", b.Op)
	}
	return nil
}

// matmul runs matmul instruction b over its batch with mm (kernels.MatMul,
// or MatMulBF16 for bfloat16 operands).
func matmul[T kernels.Float](b *Bound, dst, x, y []T, mm func(dst, a, b []T, m, n, k int, transA, transB, accumulate bool) []T) {
	am, bm, cm := b.M*b.K, b.K*b.N, b.M*b.N
	if b.SharedB && !b.TransA {
		// rows of every batch element are contiguous: one product
		mm(dst, x, y, b.Batch*b.M, b.N, b.K, false, b.TransB, false)
		return
	}
	for i := 0; i < b.Batch; i++ {
		yb := y
		if !b.SharedB {
			yb = y[i*bm : (i+1)*bm]
		}
		mm(dst[i*cm:(i+1)*cm], x[i*am:(i+1)*am], yb, b.M, b.N, b.K, b.TransA, b.TransB, false)
	}
}

// convBF16 runs a convolution instruction on bfloat16 operands (the
// mixed_bfloat16 policy's products).
func (b *Bound) convBF16() {
	conv := kernels.Conv2DBF16
	switch b.Op {
	case graph.OpConv2DBackpropInput:
		conv = kernels.Conv2DBackpropInputBF16
	case graph.OpConv2DBackpropFilter:
		conv = kernels.Conv2DBackpropFilterBF16
	}
	f32 := tensor.As[float32]
	conv(f32(b.out), f32(b.in[0]), f32(b.in[1]), f32(b.work), b.geom, b.F)
}
