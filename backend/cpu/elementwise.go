package cpu

import (
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// An elementwise op the fusion pass left alone (its operand has other
// readers, as the gradient of a ReLU feeding a BatchNormalization's three
// gradient terms) runs split over the kernels' threads when it is large,
// as fused chains do: element i of the output reads only element i of each
// operand (or one scalar), so the parts are independent and the result is
// the same bit for bit at any thread count.

// elementwiseSplits reports whether b is a large float elementwise op
// whose operands are the output's size or scalars.
func (b *Bound) elementwiseSplits() bool {
	if b.DType != tensor.Float32 && b.DType != tensor.Float64 || len(b.out)/b.DType.Size() < geluSplit || kernels.Threads() < 2 {
		return false
	}
	switch b.Op {
	case graph.OpNeg, graph.OpExp, graph.OpLog, graph.OpSqrt, graph.OpRelu, graph.OpSigmoid, graph.OpTanh,
		graph.OpErf, graph.OpAbs:
		return len(b.in[0]) == len(b.out)
	case graph.OpReluGrad, graph.OpSigmoidGrad, graph.OpTanhGrad:
		return len(b.in[0]) == len(b.out) && len(b.in[1]) == len(b.out)
	case graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMaximum, graph.OpMinimum:
		switch b.Path {
		case compile.PathSame:
			return len(b.in[0]) == len(b.out) && len(b.in[1]) == len(b.out)
		case compile.PathScalarRight:
			return len(b.in[0]) == len(b.out)
		case compile.PathScalarLeft:
			return len(b.in[1]) == len(b.out)
		}
	}
	return false
}

// elementwisePart runs part p of b.splits of an elementwise op (see
// elementwiseSplits).
func elementwisePart(arg any, p int) {
	if arg.(*Bound).DType == tensor.Float32 {
		elementwiseRange[float32](arg.(*Bound), p)
	} else {
		elementwiseRange[float64](arg.(*Bound), p)
	}
}

func elementwiseRange[T kernels.Float](b *Bound, p int) {
	out := tensor.As[T](b.out)
	lo, hi := p*len(out)/b.splits, (p+1)*len(out)/b.splits
	full := func(i int) []T { return tensor.As[T](b.in[i])[lo:hi] }
	dst := out[lo:hi]
	switch b.Op {
	case graph.OpNeg:
		kernels.Neg(dst, full(0))
	case graph.OpExp:
		kernels.Exp(dst, full(0))
	case graph.OpLog:
		kernels.Log(dst, full(0))
	case graph.OpSqrt:
		kernels.Sqrt(dst, full(0))
	case graph.OpRelu:
		kernels.Relu(dst, full(0))
	case graph.OpSigmoid:
		kernels.Sigmoid(dst, full(0))
	case graph.OpTanh:
		kernels.Tanh(dst, full(0))
	case graph.OpErf:
		kernels.Erf(dst, full(0))
	case graph.OpAbs:
		kernels.Abs(dst, full(0))
	case graph.OpReluGrad:
		kernels.ReluGrad(dst, full(0), full(1))
	case graph.OpSigmoidGrad:
		kernels.SigmoidGrad(dst, full(0), full(1))
	case graph.OpTanhGrad:
		kernels.TanhGrad(dst, full(0), full(1))
	default:
		op := binaryOp(b.Op)
		switch b.Path {
		case compile.PathSame:
			kernels.Binary(op, dst, full(0), full(1))
		case compile.PathScalarRight:
			kernels.BinaryScalar(op, dst, full(0), tensor.As[T](b.in[1])[0])
		case compile.PathScalarLeft:
			kernels.ScalarBinary(op, dst, tensor.As[T](b.in[0])[0], full(1))
		}
	}
}
