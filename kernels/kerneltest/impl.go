package kerneltest

import (
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The function types of Impl's fields: the float32 instantiations of the
// kernels of the same names.
type (
	// UnaryFunc is Neg, Exp, Log, Sqrt, Relu, Sigmoid or Tanh.
	UnaryFunc = func(dst, x []float32) []float32
	// UnaryGradFunc is ReluGrad(dst, x, g), SigmoidGrad(dst, y, g) or TanhGrad(dst, y, g).
	UnaryGradFunc = func(dst, x, g []float32) []float32
	// BinaryFunc is Binary.
	BinaryFunc = func(op kernels.BinaryOp, dst, a, b []float32) []float32
	// BinaryScalarFunc is BinaryScalar.
	BinaryScalarFunc = func(op kernels.BinaryOp, dst, a []float32, s float32) []float32
	// ScalarBinaryFunc is ScalarBinary.
	ScalarBinaryFunc = func(op kernels.BinaryOp, dst []float32, s float32, b []float32) []float32
	// BinaryBroadcastFunc is BinaryBroadcast.
	BinaryBroadcastFunc = func(op kernels.BinaryOp, dst, a, b []float32, shape, aStrides, bStrides []int) []float32
	// ReduceFunc is ReduceSum or ReduceMax.
	ReduceFunc = func(dst, x []float32, xShape, dstStrides []int) []float32
	// RowsFunc is SumRows, Softmax or LogSoftmax.
	RowsFunc = func(dst, x []float32, rows, cols int) []float32
	// RowsGradFunc is SoftmaxGrad or LogSoftmaxGrad.
	RowsGradFunc = func(dst, y, g []float32, rows, cols int) []float32
	// MatMulFunc is MatMul.
	MatMulFunc = func(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32
	// CrossEntropyFunc is SoftmaxCrossEntropy.
	CrossEntropyFunc = func(loss, logits []float32, labels []int32, rows, cols int) int
	// CrossEntropyGradFunc is SoftmaxCrossEntropyGrad.
	CrossEntropyGradFunc = func(dst, logits []float32, labels []int32, g []float32, rows, cols int) int
	// TransposeFunc is Transpose.
	TransposeFunc = func(dst, x []float32, shape, perm []int) []float32
	// AttentionFunc is AttentionForward.
	AttentionFunc = func(o, lse, q, k, v []float32, p kernels.AttentionParams, work []float32) []float32
	// AttentionGradFunc is AttentionBackward.
	AttentionGradFunc = func(dq, dk, dv, do, o, lse, q, k, v []float32, p kernels.AttentionParams, work []float32) []float32
	// PoolFunc is MaxPool2D(dst, x, g) or AvgPool2D(dst, x, g).
	PoolFunc = func(dst, x []float32, g kernels.ConvGeom) []float32
	// MaxPoolGradFunc is MaxPool2DGrad(dx, x, dy, g) or MaxPool2DReluGrad(dx, x, dy, g).
	MaxPoolGradFunc = func(dx, x, dy []float32, g kernels.ConvGeom) []float32
	// AvgPoolGradFunc is AvgPool2DGrad(dx, dy, g).
	AvgPoolGradFunc = func(dx, dy []float32, g kernels.ConvGeom) []float32
	// ConvFunc is Conv2D(dst, x, filter, work, g, f),
	// Conv2DBackpropInput(dx, dy, filter, work, g, f) or
	// Conv2DBackpropFilter(dfilter, x, dy, work, g, f), or a BF16 version.
	ConvFunc = func(out, a, b, work []float32, g kernels.ConvGeom, f int) []float32
)

// Impl describes one implementation of the float32 kernels. Run tests every
// non-nil field; leave a field nil when the implementation falls back to the
// reference for it.
type Impl struct {
	Name string // for test names and messages

	// Threads is the number of threads the implementation runs on (a
	// kernels.Pool's), for the workspaces sized by thread count (the
	// attention passes'); 0 means the default pool's, kernels.Threads().
	Threads int

	Neg, Exp, Log, Sqrt, Relu, Sigmoid, Tanh UnaryFunc
	ReluGrad, SigmoidGrad, TanhGrad          UnaryGradFunc

	Binary          BinaryFunc
	BinaryScalar    BinaryScalarFunc
	ScalarBinary    ScalarBinaryFunc
	BinaryBroadcast BinaryBroadcastFunc

	ReduceSum, ReduceMax ReduceFunc
	SumRows              RowsFunc

	MatMul MatMulFunc
	// MatMulBF16 is checked against op(a)·op(b) with a and b rounded to
	// bfloat16 and the sums in float64 (the BF16 rule of the package
	// comment), not against Reference.
	MatMulBF16 MatMulFunc

	Softmax, LogSoftmax         RowsFunc
	SoftmaxGrad, LogSoftmaxGrad RowsGradFunc
	SoftmaxCrossEntropy         CrossEntropyFunc
	SoftmaxCrossEntropyGrad     CrossEntropyGradFunc

	Transpose TransposeFunc

	// The attention passes get work sized by the kernels' workspace
	// functions (AttentionForwardWorkspace, AttentionBackwardWorkspace).
	AttentionForward  AttentionFunc
	AttentionBackward AttentionGradFunc

	// The window kernels are checked against the direct definitions of
	// pooling and convolution in float64 in this package (window.go,
	// conv.go), not against Reference. The convolutions get work of one
	// image, two, the whole batch and more (Im2ColSize), filled with NaN.
	MaxPool2D, AvgPool2D             PoolFunc
	MaxPool2DGrad, MaxPool2DReluGrad MaxPoolGradFunc
	AvgPool2DGrad                    AvgPoolGradFunc

	Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter             ConvFunc
	Conv2DBF16, Conv2DBackpropInputBF16, Conv2DBackpropFilterBF16 ConvFunc

	Float32ToBF16 func(dst []tensor.BF16, src []float32) []tensor.BF16
	BF16ToFloat32 func(dst []float32, src []tensor.BF16) []float32
	Float32ToF16  func(dst []tensor.F16, src []float32) []tensor.F16
	F16ToFloat32  func(dst []float32, src []tensor.F16) []float32
}

// Reference returns the reference kernels of package kernels with every
// field set. Where a kernel has assembly tiers (the elementwise loops, the
// 16-bit casts, SumRows), Reference calls the exported kernel, so it is the
// reference only while a test has the Go loops selected (the kernels
// package's tests do, running each tier through per-call wrappers). The
// fields checked against this package's own definitions (MatMulBF16, the
// window kernels) hold the exported kernels, so Run(Reference()) checks
// them on whatever tier the CPU picks.
func Reference() Impl {
	return Impl{
		Name: "reference",

		Neg:     kernels.Neg[float32],
		Exp:     kernels.Exp[float32],
		Log:     kernels.Log[float32],
		Sqrt:    kernels.Sqrt[float32],
		Relu:    kernels.Relu[float32],
		Sigmoid: kernels.Sigmoid[float32],
		Tanh:    kernels.Tanh[float32],

		ReluGrad:    kernels.ReluGrad[float32],
		SigmoidGrad: kernels.SigmoidGrad[float32],
		TanhGrad:    kernels.TanhGrad[float32],

		Binary:          kernels.Binary[float32],
		BinaryScalar:    kernels.BinaryScalar[float32],
		ScalarBinary:    kernels.ScalarBinary[float32],
		BinaryBroadcast: kernels.BinaryBroadcast[float32],

		ReduceSum: kernels.ReduceSum[float32],
		ReduceMax: kernels.ReduceMax[float32],
		SumRows:   kernels.SumRows[float32],

		MatMul: kernels.MatMulRef[float32], // the loop, not Sgemm: the reference must not be the fast path

		Softmax:                 kernels.Softmax[float32],
		LogSoftmax:              kernels.LogSoftmax[float32],
		SoftmaxGrad:             kernels.SoftmaxGrad[float32],
		LogSoftmaxGrad:          kernels.LogSoftmaxGrad[float32],
		SoftmaxCrossEntropy:     kernels.SoftmaxCrossEntropy[float32],
		SoftmaxCrossEntropyGrad: kernels.SoftmaxCrossEntropyGrad[float32],

		Transpose: kernels.Transpose[float32],

		AttentionForward:  kernels.AttentionForwardRef[float32], // the row loop, not the tiled kernel
		AttentionBackward: kernels.AttentionBackwardRef[float32],

		MatMulBF16: kernels.MatMulBF16,

		MaxPool2D:         kernels.MaxPool2D[float32],
		AvgPool2D:         kernels.AvgPool2D[float32],
		MaxPool2DGrad:     kernels.MaxPool2DGrad[float32],
		MaxPool2DReluGrad: kernels.MaxPool2DReluGrad[float32],
		AvgPool2DGrad:     kernels.AvgPool2DGrad[float32],

		Conv2D:                   kernels.Conv2D[float32],
		Conv2DBackpropInput:      kernels.Conv2DBackpropInput[float32],
		Conv2DBackpropFilter:     kernels.Conv2DBackpropFilter[float32],
		Conv2DBF16:               kernels.Conv2DBF16,
		Conv2DBackpropInputBF16:  kernels.Conv2DBackpropInputBF16,
		Conv2DBackpropFilterBF16: kernels.Conv2DBackpropFilterBF16,

		Float32ToBF16: kernels.Float32ToBF16,
		BF16ToFloat32: kernels.BF16ToFloat32,
		Float32ToF16:  kernels.Float32ToF16,
		F16ToFloat32:  kernels.F16ToFloat32,
	}
}
