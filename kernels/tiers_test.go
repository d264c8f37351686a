package kernels_test

import (
	"fmt"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
	"github.com/headroom-ml/headroom/tensor"
)

// The shared suite (kerneltest) on every tier of each kernel family with
// assembly: the elementwise loops, SumRows and the 16-bit casts (assembly
// on and off, per-call wrappers against the Go loops), the window kernels
// (pooling and convolution in float32 jobs on every GEMM tier, with and
// without the AVX-512 window loops and the packing straight from the
// image, and the float64 chunks), the bfloat16 convolutions on every
// MatMulBF16 path, and attention on every GEMM tier and row
// implementation; each on a Pool of its own of 1 and of 3 threads (see
// forEachPool). Sgemm and MatMulBF16 run it in gemm_test.go and
// bgemm_test.go.

// raceThin returns tiers, or under the race detector its first and last
// (the fastest tier and the Go one): the runs without the detector check
// every tier.
func raceThin[T any](tiers []T) []T {
	if raceEnabled && len(tiers) > 2 {
		return []T{tiers[0], tiers[len(tiers)-1]}
	}
	return tiers
}

// simdTiers returns the settings of the assembly switches the suite runs
// on: the Go loops of every family, the widest tiers this CPU has, and the
// 8-lane casts where the widest are 16.
func simdTiers() []kernels.SIMD {
	tiers := []kernels.SIMD{{}}
	if top := kernels.MaxSIMD(); top != (kernels.SIMD{}) {
		tiers = append(tiers, top)
		if top.ConvertLanes > 8 {
			top.ConvertLanes = 8
			tiers = append(tiers, top)
		}
	}
	return tiers
}

func simdName(s kernels.SIMD) string {
	return fmt.Sprintf("elementwise=%v/window=%v/convert=%d/transcendental=%v", s.Elementwise, s.Window, s.ConvertLanes, s.Transcendental)
}

// simdImpl returns the kernels that have assembly outside the GEMM and
// window jobs, each switched to s around its call (defer SetSIMD(SetSIMD(s))
// allocates nothing), so that the suite's Reference, called between them,
// stays on the Go loops; those that split over threads run on p.
func simdImpl(s kernels.SIMD, p *kernels.Pool) kerneltest.Impl {
	return kerneltest.Impl{
		Name:    simdName(s),
		Threads: p.Threads(),
		Sqrt: func(dst, x []float32) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.Sqrt(dst, x)
		},
		Relu: func(dst, x []float32) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.Relu(dst, x)
		},
		Sigmoid: func(dst, x []float32) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.Sigmoid(dst, x)
		},
		Tanh: func(dst, x []float32) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.Tanh(dst, x)
		},
		SoftmaxCrossEntropy: func(loss, logits []float32, labels []int32, rows, cols int) int {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.SoftmaxCrossEntropy(loss, logits, labels, rows, cols)
		},
		SoftmaxCrossEntropyGrad: func(dst, logits []float32, labels []int32, g []float32, rows, cols int) int {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.SoftmaxCrossEntropyGrad(dst, logits, labels, g, rows, cols)
		},
		ReluGrad: func(dst, x, g []float32) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.ReluGradOn(p, dst, x, g)
		},
		Binary: func(op kernels.BinaryOp, dst, a, b []float32) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.Binary(op, dst, a, b)
		},
		BinaryScalar: func(op kernels.BinaryOp, dst, a []float32, v float32) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.BinaryScalar(op, dst, a, v)
		},
		ScalarBinary: func(op kernels.BinaryOp, dst []float32, v float32, b []float32) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.ScalarBinary(op, dst, v, b)
		},
		SumRows: func(dst, x []float32, rows, cols int) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.SumRowsOn(p, dst, x, rows, cols)
		},
		ReduceSum: func(dst, x []float32, xShape, dstStrides []int) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.ReduceSumOn(p, dst, x, xShape, dstStrides)
		},
		Float32ToBF16: func(dst []tensor.BF16, src []float32) []tensor.BF16 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.Float32ToBF16(dst, src)
		},
		BF16ToFloat32: func(dst []float32, src []tensor.BF16) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.BF16ToFloat32(dst, src)
		},
		Float32ToF16: func(dst []tensor.F16, src []float32) []tensor.F16 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.Float32ToF16(dst, src)
		},
		F16ToFloat32: func(dst []float32, src []tensor.F16) []float32 {
			defer kernels.SetSIMD(kernels.SetSIMD(s))
			return kernels.F16ToFloat32(dst, src)
		},
	}
}

// TestSIMDSuite runs the suite on the elementwise loops, SumRows, the
// 16-bit casts, and the vector Sigmoid, Tanh and softmax cross-entropy
// (trans.go) on every tier, against the Go loops: lengths around the
// vector blocks (1, 7, 33, 1023, and 2^16+33, which ReluGrad splits over
// the pool on more than one thread), in place, special values, every
// 16-bit pattern.
func TestSIMDSuite(t *testing.T) {
	defer kernels.SetSIMD(kernels.SetSIMD(kernels.SIMD{})) // Reference: the Go loops
	for _, s := range simdTiers() {
		forEachPool(t, simdName(s), func(t *testing.T, p *kernels.Pool) {
			kerneltest.Run(t, simdImpl(s, p))
		})
	}
}

// float32Window is the float32 window kernels: the jobs on pool p.
func float32Window(name string, p *kernels.Pool) kerneltest.Impl {
	on := onPool(p)
	return kerneltest.Impl{
		Name:                 name,
		Threads:              on.Threads,
		MaxPool2D:            on.MaxPool2D,
		MaxPool2DGrad:        on.MaxPool2DGrad,
		MaxPool2DReluGrad:    on.MaxPool2DReluGrad,
		AvgPool2D:            on.AvgPool2D,
		AvgPool2DGrad:        on.AvgPool2DGrad,
		Conv2D:               on.Conv2D,
		Conv2DBackpropInput:  on.Conv2DBackpropInput,
		Conv2DBackpropFilter: on.Conv2DBackpropFilter,
	}
}

// TestWindowSuite runs the suite on the float32 pooling and convolution
// kernels on every GEMM tier, with the AVX-512 window loops (max pooling,
// col2im, the filter gradient's packing) on and off and the products'
// packing straight from the image on and off, on pools of 1 and 3
// threads. Pooling does not use the GEMM tiers or that packing, so it runs
// on the first tier only, with both switches on and with both off. Under
// the race detector, fewer tiers and settings (see
// raceThin, poolThreads).
func TestWindowSuite(t *testing.T) {
	defer kernels.WithoutExternalSgemm()() // the openblas tag's products run the chunks instead of the jobs
	top := kernels.MaxSIMD()
	defer kernels.SetSIMD(kernels.SetSIMD(top))
	windows := []bool{false}
	if top.Window {
		windows = append(windows, true)
	}
	for ti, tier := range raceThin(kernels.GemmTierNames()) {
		for _, window := range windows {
			for _, pack := range []bool{false, true} {
				if raceEnabled && pack != window && len(windows) > 1 {
					continue // both switches on, and both off
				}
				forEachPool(t, fmt.Sprintf("%s/window=%v/pack=%v", tier, window, pack), func(t *testing.T, p *kernels.Pool) {
					defer kernels.UseGemmTier(tier)()
					defer kernels.SetSIMD(kernels.SetSIMD(kernels.SIMD{Elementwise: top.Elementwise, Window: window, ConvertLanes: top.ConvertLanes}))
					defer kernels.UsePackFromImage(pack)()
					impl := float32Window(tier, p)
					if ti > 0 || pack != window { // pooling: once with the window loops, once without
						impl.MaxPool2D, impl.MaxPool2DGrad, impl.MaxPool2DReluGrad = nil, nil, nil
						impl.AvgPool2D, impl.AvgPool2DGrad = nil, nil
					}
					kerneltest.Run(t, impl)
				})
			}
		}
	}
}

// TestWindowSuiteFloat64 runs the suite on the float64 pooling and
// convolution kernels (the convolutions' im2col chunks and MatMul, the
// image halves on 3 threads) through widening wrappers: float32 inputs
// widened exactly, float64 results rounded once, so the float32 rules are
// looser than float64 needs but every index, padding and chunk is checked.
func TestWindowSuiteFloat64(t *testing.T) {
	forEachPool(t, "float64", func(t *testing.T, p *kernels.Pool) {
		kerneltest.Run(t, float64Window(p))
	})
}

// TestConvBF16Suite runs the suite on the bfloat16 convolutions on every
// path of MatMulBF16 (the AVX512_BF16 tier, the fallback on every float32
// tier), on pools of 1 and 3 threads, against the convolution of operands
// rounded to bfloat16.
func TestConvBF16Suite(t *testing.T) {
	defer kernels.WithoutExternalSgemm()()
	for _, path := range raceThin(bgemmPaths()) {
		forEachPool(t, path.name, func(t *testing.T, p *kernels.Pool) {
			defer path.use()()
			on := onPool(p)
			kerneltest.Run(t, kerneltest.Impl{Name: "bf16 " + path.name, Threads: on.Threads,
				Conv2DBF16:               on.Conv2DBF16,
				Conv2DBackpropInputBF16:  on.Conv2DBackpropInputBF16,
				Conv2DBackpropFilterBF16: on.Conv2DBackpropFilterBF16,
			})
		})
	}
}

// widened holds the float64 operands of the float64 window kernels under
// test, kept between calls so that a call allocates nothing once its sizes
// have been seen.
type widened struct{ buf [4][]float64 }

// widen returns slot i holding x widened.
func (w *widened) widen(i int, x []float32) []float64 {
	if cap(w.buf[i]) < len(x) {
		w.buf[i] = make([]float64, len(x))
	}
	b := w.buf[i][:len(x)]
	for j, v := range x {
		b[j] = float64(v)
	}
	return b
}

// narrowInto sets dst to x rounded to float32 and returns dst.
func narrowInto(dst []float32, x []float64) []float32 {
	for i, v := range x {
		dst[i] = float32(v)
	}
	return dst
}

// float64Window returns the float64 window kernels on pool p as float32
// ones (see TestWindowSuiteFloat64). Outputs are widened too, so a kernel
// that leaves an element unwritten keeps the suite's NaN there; work
// likewise.
func float64Window(p *kernels.Pool) kerneltest.Impl {
	w := new(widened)
	conv := func(k func(p *kernels.Pool, out, a, b, work []float64, g kernels.ConvGeom, f int) []float64) kerneltest.ConvFunc {
		return func(out, a, b, work []float32, g kernels.ConvGeom, f int) []float32 {
			return narrowInto(out, k(p, w.widen(0, out), w.widen(1, a), w.widen(2, b), w.widen(3, work), g, f))
		}
	}
	return kerneltest.Impl{
		Name:    "float64",
		Threads: p.Threads(),
		MaxPool2D: func(dst, x []float32, g kernels.ConvGeom) []float32 {
			return narrowInto(dst, kernels.MaxPool2DOn(p, w.widen(0, dst), w.widen(1, x), g))
		},
		AvgPool2D: func(dst, x []float32, g kernels.ConvGeom) []float32 {
			return narrowInto(dst, kernels.AvgPool2D(w.widen(0, dst), w.widen(1, x), g))
		},
		MaxPool2DGrad: func(dx, x, dy []float32, g kernels.ConvGeom) []float32 {
			return narrowInto(dx, kernels.MaxPool2DGradOn(p, w.widen(0, dx), w.widen(1, x), w.widen(2, dy), g))
		},
		MaxPool2DReluGrad: func(dx, x, dy []float32, g kernels.ConvGeom) []float32 {
			return narrowInto(dx, kernels.MaxPool2DReluGradOn(p, w.widen(0, dx), w.widen(1, x), w.widen(2, dy), g))
		},
		AvgPool2DGrad: func(dx, dy []float32, g kernels.ConvGeom) []float32 {
			return narrowInto(dx, kernels.AvgPool2DGrad(w.widen(0, dx), w.widen(1, dy), g))
		},
		Conv2D:               conv(kernels.Conv2DOn[float64]),
		Conv2DBackpropInput:  conv(kernels.Conv2DBackpropInputOn[float64]),
		Conv2DBackpropFilter: conv(kernels.Conv2DBackpropFilterOn[float64]),
	}
}
