package kerneltest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Tol is the relative tolerance of the float32 closeness rules (see the
// package comment).
const Tol = 1e-5

// sizes are the vector lengths every elementwise kernel is run on.
var sizes = []int{0, 1, 7, 33, 1023}

// Run checks every non-nil field of impl against the reference kernels. Each
// kernel runs as a subtest named after its field.
func Run(t *testing.T, impl Impl) {
	ref := Reference()
	type test struct {
		name string
		set  bool
		run  func(t *testing.T)
	}
	tests := []test{
		{"Neg", impl.Neg != nil, func(t *testing.T) { testUnary(t, impl.Neg, ref.Neg, -4, 4) }},
		{"Exp", impl.Exp != nil, func(t *testing.T) { testUnary(t, impl.Exp, ref.Exp, -10, 10) }},
		{"Log", impl.Log != nil, func(t *testing.T) { testUnary(t, impl.Log, ref.Log, 1e-3, 100) }},
		{"Sqrt", impl.Sqrt != nil, func(t *testing.T) { testUnary(t, impl.Sqrt, ref.Sqrt, 0, 100) }},
		{"Relu", impl.Relu != nil, func(t *testing.T) { testUnary(t, impl.Relu, ref.Relu, -4, 4) }},
		{"Sigmoid", impl.Sigmoid != nil, func(t *testing.T) { testUnary(t, impl.Sigmoid, ref.Sigmoid, -20, 20) }},
		{"Tanh", impl.Tanh != nil, func(t *testing.T) { testUnary(t, impl.Tanh, ref.Tanh, -6, 6) }},
		{"ReluGrad", impl.ReluGrad != nil, func(t *testing.T) { testUnaryGrad(t, impl.ReluGrad, ref.ReluGrad, ref.Relu) }},
		{"SigmoidGrad", impl.SigmoidGrad != nil, func(t *testing.T) { testUnaryGrad(t, impl.SigmoidGrad, ref.SigmoidGrad, ref.Sigmoid) }},
		{"TanhGrad", impl.TanhGrad != nil, func(t *testing.T) { testUnaryGrad(t, impl.TanhGrad, ref.TanhGrad, ref.Tanh) }},
		{"Binary", impl.Binary != nil, func(t *testing.T) { testBinary(t, impl.Binary, ref.Binary) }},
		{"BinaryScalar", impl.BinaryScalar != nil, func(t *testing.T) { testBinaryScalar(t, impl.BinaryScalar, ref.BinaryScalar) }},
		{"ScalarBinary", impl.ScalarBinary != nil, func(t *testing.T) { testScalarBinary(t, impl.ScalarBinary, ref.ScalarBinary) }},
		{"BinaryBroadcast", impl.BinaryBroadcast != nil, func(t *testing.T) { testBinaryBroadcast(t, impl.BinaryBroadcast, ref.BinaryBroadcast) }},
		{"ReduceSum", impl.ReduceSum != nil, func(t *testing.T) { testReduce(t, impl.ReduceSum, ref.ReduceSum, ref, false) }},
		{"ReduceMax", impl.ReduceMax != nil, func(t *testing.T) { testReduce(t, impl.ReduceMax, ref.ReduceMax, ref, true) }},
		{"SumRows", impl.SumRows != nil, func(t *testing.T) { testSumRows(t, impl.SumRows, ref.SumRows) }},
		{"MatMul", impl.MatMul != nil, func(t *testing.T) { testMatMul(t, impl.MatMul) }},
		{"MatMulBF16", impl.MatMulBF16 != nil, func(t *testing.T) { testMatMulBF16(t, impl.MatMulBF16) }},
		{"Softmax", impl.Softmax != nil, func(t *testing.T) { testRows(t, impl.Softmax, ref.Softmax) }},
		{"LogSoftmax", impl.LogSoftmax != nil, func(t *testing.T) { testRows(t, impl.LogSoftmax, ref.LogSoftmax) }},
		{"SoftmaxGrad", impl.SoftmaxGrad != nil, func(t *testing.T) { testRowsGrad(t, impl.SoftmaxGrad, ref.SoftmaxGrad, ref.Softmax) }},
		{"LogSoftmaxGrad", impl.LogSoftmaxGrad != nil, func(t *testing.T) { testRowsGrad(t, impl.LogSoftmaxGrad, ref.LogSoftmaxGrad, ref.LogSoftmax) }},
		{"SoftmaxCrossEntropy", impl.SoftmaxCrossEntropy != nil, func(t *testing.T) { testCrossEntropy(t, impl.SoftmaxCrossEntropy, ref.SoftmaxCrossEntropy) }},
		{"SoftmaxCrossEntropyGrad", impl.SoftmaxCrossEntropyGrad != nil, func(t *testing.T) {
			testCrossEntropyGrad(t, impl.SoftmaxCrossEntropyGrad, ref.SoftmaxCrossEntropyGrad)
		}},
		{"Transpose", impl.Transpose != nil, func(t *testing.T) { testTranspose(t, impl.Transpose, ref.Transpose) }},
		{"AttentionForward", impl.AttentionForward != nil, func(t *testing.T) { testAttentionForward(t, impl.AttentionForward, ref.AttentionForward, impl.Threads) }},
		{"AttentionBackward", impl.AttentionBackward != nil, func(t *testing.T) {
			testAttentionBackward(t, impl.AttentionBackward, ref.AttentionBackward, ref.AttentionForward, impl.Threads)
		}},
		{"MaxPool2D", impl.MaxPool2D != nil, func(t *testing.T) { testMaxPool(t, impl.MaxPool2D) }},
		{"MaxPool2DGrad", impl.MaxPool2DGrad != nil, func(t *testing.T) { testMaxPoolGrad(t, impl.MaxPool2DGrad, false) }},
		{"MaxPool2DReluGrad", impl.MaxPool2DReluGrad != nil, func(t *testing.T) { testMaxPoolGrad(t, impl.MaxPool2DReluGrad, true) }},
		{"AvgPool2D", impl.AvgPool2D != nil, func(t *testing.T) { testAvgPool(t, impl.AvgPool2D) }},
		{"AvgPool2DGrad", impl.AvgPool2DGrad != nil, func(t *testing.T) { testAvgPoolGrad(t, impl.AvgPool2DGrad) }},
		{"Conv2D", impl.Conv2D != nil, func(t *testing.T) { testConv(t, impl.Conv2D, convForward, false) }},
		{"Conv2DBackpropInput", impl.Conv2DBackpropInput != nil, func(t *testing.T) { testConv(t, impl.Conv2DBackpropInput, convInput, false) }},
		{"Conv2DBackpropFilter", impl.Conv2DBackpropFilter != nil, func(t *testing.T) { testConv(t, impl.Conv2DBackpropFilter, convFilter, false) }},
		{"Conv2DBF16", impl.Conv2DBF16 != nil, func(t *testing.T) { testConv(t, impl.Conv2DBF16, convForward, true) }},
		{"Conv2DBackpropInputBF16", impl.Conv2DBackpropInputBF16 != nil, func(t *testing.T) { testConv(t, impl.Conv2DBackpropInputBF16, convInput, true) }},
		{"Conv2DBackpropFilterBF16", impl.Conv2DBackpropFilterBF16 != nil, func(t *testing.T) {
			testConv(t, impl.Conv2DBackpropFilterBF16, convFilter, true)
		}},
		{"Float32ToBF16", impl.Float32ToBF16 != nil, func(t *testing.T) { testToBF16(t, impl.Float32ToBF16, ref.Float32ToBF16) }},
		{"BF16ToFloat32", impl.BF16ToFloat32 != nil, func(t *testing.T) { testFromBF16(t, impl.BF16ToFloat32, ref.BF16ToFloat32) }},
		{"Float32ToF16", impl.Float32ToF16 != nil, func(t *testing.T) { testToF16(t, impl.Float32ToF16, ref.Float32ToF16) }},
		{"F16ToFloat32", impl.F16ToFloat32 != nil, func(t *testing.T) { testFromF16(t, impl.F16ToFloat32, ref.F16ToFloat32) }},
	}
	tested := 0
	for _, tc := range tests {
		if !tc.set {
			continue
		}
		tested++
		t.Run(tc.name, tc.run)
	}
	if tested == 0 {
		t.Errorf("%s: Impl has no kernels set", impl.Name)
	}
	t.Run("Allocs", func(t *testing.T) { testAllocs(t, impl) })
}

// newRand returns the suite's deterministic generator for one test.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6b65726e656c)) }

// uniform returns n values drawn uniformly from [lo, hi).
func uniform(r *rand.Rand, n int, lo, hi float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return x
}

func clone[T any](x []T) []T { return append([]T(nil), x...) }

// guard is the number of sentinel elements on each side of a checked dst.
const guard = 16

// out is a destination slice with sentinels around it, to catch writes
// outside dst (which an assembly kernel could make).
type out[T comparable] struct {
	buf []T
	n   int
	pad T
}

// newOut returns an out of n elements, each set to fill, between sentinels
// pad.
func newOut[T comparable](n int, fill, pad T) *out[T] {
	o := &out[T]{buf: make([]T, n+2*guard), n: n, pad: pad}
	for i := range o.buf {
		o.buf[i] = pad
	}
	for i := range o.dst() {
		o.buf[guard+i] = fill
	}
	return o
}

// newOut32 is a float32 out filled with NaN, so an element the kernel does
// not write shows up as a mismatch.
func newOut32(n int) *out[float32] { return newOut(n, float32(math.NaN()), -7.77e33) }

func (o *out[T]) dst() []T { return o.buf[guard : guard+o.n : guard+o.n] }

// check fails t if the kernel returned something other than dst or wrote
// outside it.
func (o *out[T]) check(t *testing.T, where string, returned []T) {
	t.Helper()
	d := o.dst()
	if len(returned) != len(d) || (len(d) > 0 && &returned[0] != &d[0]) {
		t.Errorf("%s: returned a slice of length %d that is not dst (length %d)", where, len(returned), len(d))
	}
	for i := 0; i < guard; i++ {
		if o.buf[i] != o.pad || o.buf[guard+o.n+i] != o.pad {
			t.Errorf("%s: wrote outside dst (guard element %d changed)", where, i)
			return
		}
	}
}

// unchanged fails t if an input changed (compared bit for bit).
func unchanged(t *testing.T, where, what string, before, after []float32) {
	t.Helper()
	for i := range before {
		if math.Float32bits(before[i]) != math.Float32bits(after[i]) {
			t.Errorf("%s: input %s changed at %d: %v, was %v", where, what, i, after[i], before[i])
			return
		}
	}
}

// within reports whether got matches want under tolerance Tol·max(1, scale).
func within(got, want float32, scale float64) bool {
	if got == want || (got != got && want != want) {
		return true
	}
	return math.Abs(float64(got)-float64(want)) <= Tol*math.Max(1, scale)
}

// compare fails t at the first element outside the closeness rule: the
// elementwise rule when scale is nil, the sum rule with scale[i] otherwise.
func compare(t *testing.T, where string, got, want []float32, scale []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d elements, want %d", where, len(got), len(want))
		return
	}
	for i := range want {
		s := math.Abs(float64(want[i]))
		if scale != nil {
			s = scale[i]
		}
		if !within(got[i], want[i], s) {
			tol := Tol * math.Max(1, s)
			if math.IsNaN(tol) || math.IsInf(tol, 0) {
				t.Errorf("%s: element %d: got %v, want %v exactly", where, i, got[i], want[i])
			} else {
				t.Errorf("%s: element %d: got %v, want %v (tolerance %.3g)", where, i, got[i], want[i], tol)
			}
			return
		}
	}
}

// compareExact fails t unless got equals want element for element, NaN
// matching NaN.
func compareExact(t *testing.T, where string, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] && !(got[i] != got[i] && want[i] != want[i]) {
			t.Errorf("%s: element %d: got %v, want exactly %v", where, i, got[i], want[i])
			return
		}
	}
}

// abs returns |x| elementwise as a new slice.
func abs(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(math.Abs(float64(v)))
	}
	return y
}

func widen(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func shapeSize(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func name(format string, args ...any) string { return fmt.Sprintf(format, args...) }
