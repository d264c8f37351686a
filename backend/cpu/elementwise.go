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
// whose operands are the output's size or scalars (graph gives the unary
// ops and the gradients operands of their output's shape).
func (b *Bound) elementwiseSplits() bool {
	if b.DType != tensor.Float32 && b.DType != tensor.Float64 || len(b.out)/b.DType.Size() < geluSplit || kernels.Threads() < 2 {
		return false
	}
	switch b.Op {
	case graph.OpNeg, graph.OpExp, graph.OpLog, graph.OpSqrt, graph.OpRelu, graph.OpSigmoid, graph.OpTanh,
		graph.OpErf, graph.OpAbs, graph.OpReluGrad, graph.OpSigmoidGrad, graph.OpTanhGrad:
		return true
	case graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMaximum, graph.OpMinimum:
		return b.Path != compile.PathBroadcast
	}
	return false
}

// elementwisePart runs part p of b.splits of an elementwise op (see
// elementwiseSplits).
func elementwisePart(arg any, p int) {
	b := arg.(*Bound)
	n := len(b.out) / b.DType.Size()
	lo, hi := p*n/b.splits, (p+1)*n/b.splits
	if b.DType == tensor.Float32 {
		elementwise[float32](b, lo, hi)
	} else {
		elementwise[float64](b, lo, hi)
	}
}

// elementwise runs b's op over output elements [lo, hi) when it is an
// elementwise op whose operands are the output's size or scalars (compute
// runs the whole output through it), and reports whether it was one.
func elementwise[T kernels.Float](b *Bound, lo, hi int) bool {
	out := tensor.As[T](b.out)
	operand := func(i int) []T { // a full operand's part, or a scalar
		v := tensor.As[T](b.in[i])
		if len(v) == len(out) {
			return v[lo:hi]
		}
		return v
	}
	dst := out[lo:hi]
	switch b.Op {
	case graph.OpNeg:
		kernels.Neg(dst, operand(0))
	case graph.OpExp:
		kernels.Exp(dst, operand(0))
	case graph.OpLog:
		kernels.Log(dst, operand(0))
	case graph.OpSqrt:
		kernels.Sqrt(dst, operand(0))
	case graph.OpRelu:
		kernels.Relu(dst, operand(0))
	case graph.OpSigmoid:
		kernels.Sigmoid(dst, operand(0))
	case graph.OpTanh:
		kernels.Tanh(dst, operand(0))
	case graph.OpErf:
		kernels.Erf(dst, operand(0))
	case graph.OpAbs:
		kernels.Abs(dst, operand(0))
	case graph.OpReluGrad:
		kernels.ReluGrad(dst, operand(0), operand(1))
	case graph.OpSigmoidGrad:
		kernels.SigmoidGrad(dst, operand(0), operand(1))
	case graph.OpTanhGrad:
		kernels.TanhGrad(dst, operand(0), operand(1))
	case graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMaximum, graph.OpMinimum:
		op := binaryOp(b.Op)
		switch b.Path {
		case compile.PathSame:
			kernels.Binary(op, dst, operand(0), operand(1))
		case compile.PathScalarRight:
			kernels.BinaryScalar(op, dst, operand(0), operand(1)[0])
		case compile.PathScalarLeft:
			kernels.ScalarBinary(op, dst, operand(0)[0], operand(1))
		default:
			return false
		}
	default:
		return false
	}
	return true
}
