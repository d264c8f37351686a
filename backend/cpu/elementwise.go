package cpu

import (
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The elementwise ops (graph/elementwise.go), their internal gradients
// (graph/gradops.go) and dropout's mask on the host. Each op whose
// operands are the output's size (or scalars) has one chunk kernel,
// dst = op(a, b) over a range of elements, that runs it whole, split over
// the kernels' threads, and as a step of a fused chain.
func init() {
	for _, e := range []struct {
		op       graph.Op
		f32      func(dst, a, b []float32)
		f64      func(dst, a, b []float64)
		operands int
	}{
		{graph.OpNeg, neg[float32], neg[float64], 1},
		{graph.OpExp, exp[float32], exp[float64], 1},
		{graph.OpLog, log[float32], log[float64], 1},
		{graph.OpSqrt, sqrt[float32], sqrt[float64], 1},
		{graph.OpRelu, relu[float32], relu[float64], 1},
		{graph.OpSigmoid, sigmoid[float32], sigmoid[float64], 1},
		{graph.OpTanh, tanh[float32], tanh[float64], 1},
		{graph.OpErf, erf[float32], erf[float64], 1},
		{graph.OpAbs, abs[float32], abs[float64], 1},
		{graph.OpReluGrad, reluGrad[float32], reluGrad[float64], 2},
		{graph.OpSigmoidGrad, sigmoidGrad[float32], sigmoidGrad[float64], 2},
		{graph.OpTanhGrad, tanhGrad[float32], tanhGrad[float64], 2},
	} {
		register(e.op, kernel{bind: floats(bindChunked(e.f32), bindChunked(e.f64)),
			step: &stepKernel{f32: e.f32, f64: e.f64, operands: e.operands}})
	}
	for _, op := range []graph.Op{graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMaximum, graph.OpMinimum} {
		k := binaryOps[op]
		register(op, kernel{bind: floats(bindBinary[float32], bindBinary[float64]),
			step: &stepKernel{f32: binaryStep[float32](k), f64: binaryStep[float64](k), operands: 2}})
	}
	// chosen by the operands' dtype: the output is bool
	for _, op := range []graph.Op{graph.OpEqual, graph.OpNotEqual, graph.OpLess, graph.OpLessEqual, graph.OpGreater, graph.OpGreaterEqual} {
		register(op, kernel{byOperand: true, bind: [numDTypes]binder{
			tensor.Float32: bindCompare[float32], tensor.Float64: bindCompare[float64],
			tensor.Int32: bindCompare[int32], tensor.Int64: bindCompare[int64], tensor.Uint8: bindCompare[uint8]}})
	}
	// a guard in a fused chain: dst = cond ? b : c
	register(graph.OpWhere, kernel{bind: bySize(bindWhere[uint8], bindWhere[uint16], bindWhere[uint32], bindWhere[uint64]),
		step: &stepKernel{operands: 3}})
	register(graph.OpDropoutMask, kernel{bind: floats(bindDropout[float32], bindDropout[float64])})
}

// binaryOps and compareOps map the arithmetic ops and the comparisons to
// their kernel operators.
var (
	binaryOps = [graph.NumOps]kernels.BinaryOp{
		graph.OpAdd: kernels.Add, graph.OpSub: kernels.Sub, graph.OpMul: kernels.Mul,
		graph.OpDiv: kernels.Div, graph.OpMaximum: kernels.Max, graph.OpMinimum: kernels.Min,
	}
	compareOps = [graph.NumOps]kernels.CompareOp{
		graph.OpEqual: kernels.Equal, graph.OpNotEqual: kernels.NotEqual, graph.OpLess: kernels.Less,
		graph.OpLessEqual: kernels.LessEqual, graph.OpGreater: kernels.Greater, graph.OpGreaterEqual: kernels.GreaterEqual,
	}
)

// The chunk kernels: dst = op(a, b) over the same range of each.
func neg[T kernels.Float](dst, a, _ []T)         { kernels.Neg(dst, a) }
func exp[T kernels.Float](dst, a, _ []T)         { kernels.Exp(dst, a) }
func log[T kernels.Float](dst, a, _ []T)         { kernels.Log(dst, a) }
func sqrt[T kernels.Float](dst, a, _ []T)        { kernels.Sqrt(dst, a) }
func relu[T kernels.Float](dst, a, _ []T)        { kernels.Relu(dst, a) }
func sigmoid[T kernels.Float](dst, a, _ []T)     { kernels.Sigmoid(dst, a) }
func tanh[T kernels.Float](dst, a, _ []T)        { kernels.Tanh(dst, a) }
func erf[T kernels.Float](dst, a, _ []T)         { kernels.Erf(dst, a) }
func abs[T kernels.Float](dst, a, _ []T)         { kernels.Abs(dst, a) }
func reluGrad[T kernels.Float](dst, a, b []T)    { kernels.ReluGradOn(serial, dst, a, b) }
func sigmoidGrad[T kernels.Float](dst, a, b []T) { kernels.SigmoidGrad(dst, a, b) }
func tanhGrad[T kernels.Float](dst, a, b []T)    { kernels.TanhGrad(dst, a, b) }
func binaryStep[T kernels.Float](op kernels.BinaryOp) func(dst, a, b []T) {
	return func(dst, a, b []T) { kernels.Binary(op, dst, a, b) }
}

// chunked is an elementwise instruction bound to typed views: dst = f(a,
// c) element by element, a and c (nil for one operand) the output's size
// or single elements. A large one runs split over the kernels' threads
// (as fused chains do): element i of the output reads only element i of
// each operand (or one scalar), so the parts are independent and the
// result is the same bit for bit at any thread count.
type chunked[T kernels.Float] struct {
	b         *Bound
	dst, a, c []T
	f         func(dst, a, c []T)
	part      func(arg any, p int) // chunkedPart[T], made once when bound
}

// bindChunked binds an op whose operands all have the output's shape
// with its chunk kernel f.
func bindChunked[T kernels.Float](f func(dst, a, c []T)) binder {
	return func(b *Bound) func() error { return newChunked(b, f) }
}

func newChunked[T kernels.Float](b *Bound, f func(dst, a, c []T)) func() error {
	r := &chunked[T]{b: b, dst: tensor.As[T](b.out), a: tensor.As[T](b.in[0]), f: f, part: chunkedPart[T]}
	if len(b.in) > 1 {
		r.c = tensor.As[T](b.in[1])
	}
	return r.run
}

func (r *chunked[T]) run() error {
	if len(r.dst) < elementwiseSplit || r.b.pool.Threads() < 2 {
		r.f(r.dst, r.a, r.c)
		return nil
	}
	r.b.splits = r.b.pool.Threads()
	kernels.ParallelOn(r.b.pool, r.b.splits, r.part, r)
	return nil
}

// chunkedPart runs part p of r.b.splits of the chunked op arg.
func chunkedPart[T kernels.Float](arg any, p int) {
	r := arg.(*chunked[T])
	n := len(r.dst)
	lo, hi := p*n/r.b.splits, (p+1)*n/r.b.splits
	r.f(r.dst[lo:hi], operandPart(r.a, n, lo, hi), operandPart(r.c, n, lo, hi))
}

// operandPart returns elements [lo, hi) of an operand of n elements, or a
// scalar operand whole.
func operandPart[T any](v []T, n, lo, hi int) []T {
	if len(v) == n {
		return v[lo:hi]
	}
	return v
}

// elementwiseSplit is the element count from which an elementwise op is
// split over the kernels' threads.
const elementwiseSplit = 1 << 15

// bindBinary binds a broadcasting arithmetic op by its path: the operands
// of the output's size or scalars run chunked, general broadcasting whole.
func bindBinary[T kernels.Float](b *Bound) func() error {
	op, g := binaryOps[b.Op], b.Broadcast
	switch g.Path {
	case compile.PathSame:
		return newChunked(b, binaryStep[T](op))
	case compile.PathScalarRight:
		return newChunked(b, func(dst, a, c []T) { kernels.BinaryScalar(op, dst, a, c[0]) })
	case compile.PathScalarLeft:
		return newChunked(b, func(dst, a, c []T) { kernels.ScalarBinary(op, dst, a[0], c) })
	}
	dst, a, c, shape := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), b.Shape
	return func() error {
		kernels.BinaryBroadcast(op, dst, a, c, shape, g.AStrides, g.BStrides)
		return nil
	}
}

// bindCompare binds a comparison of operands of T.
func bindCompare[T kernels.Number](b *Bound) func() error {
	op, g := compareOps[b.Op], b.Broadcast
	dst, a, c, shape := b.out, tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), b.Shape
	return func() error {
		kernels.Compare(op, dst, a, c, shape, g.AStrides, g.BStrides)
		return nil
	}
}

// bindWhere binds a where over values of T's size.
func bindWhere[T any](b *Bound) func() error {
	g := b.Broadcast
	dst, cond, a, c, shape := asAny[T](b.out), b.in[0], asAny[T](b.in[1]), asAny[T](b.in[2]), b.Shape
	return func() error {
		kernels.Where(dst, cond, a, c, shape, g.CStrides, g.AStrides, g.BStrides)
		return nil
	}
}

// bindDropout binds a dropout mask drawn from the step read at run time.
func bindDropout[T kernels.Float](b *Bound) func() error {
	dst, step, g := tensor.As[T](b.out), tensor.As[int64](b.in[0]), *b.Random
	return func() error {
		kernels.DropoutMask(dst, g.Seed, step[0], g.Rate)
		return nil
	}
}
