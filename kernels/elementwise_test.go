package kernels_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// TestUnaryFormulas compares each float64 unary kernel with a formula
// written differently from the kernel's (e^x as math.Pow(e, x), tanh from
// exponentials, √x as x^0.5, ...).
func TestUnaryFormulas(t *testing.T) {
	tests := []struct {
		name   string
		f      func(dst, x []float64) []float64
		want   func(x float64) float64
		lo, hi float64
		rtol   float64
	}{
		{"Neg", kernels.Neg[float64], func(x float64) float64 { return 0 - x }, -5, 5, 0},
		{"Exp", kernels.Exp[float64], func(x float64) float64 { return math.Pow(math.E, x) }, -20, 20, 1e-13},
		{"Log", kernels.Log[float64], func(x float64) float64 { return math.Log2(x) * math.Ln2 }, 1e-3, 1e3, 1e-14},
		{"Sqrt", kernels.Sqrt[float64], func(x float64) float64 { return math.Pow(x, 0.5) }, 0, 1e3, 1e-15},
		{"Relu", kernels.Relu[float64], func(x float64) float64 { return (x + math.Abs(x)) / 2 }, -5, 5, 0},
		// 1/(1+e^-x) is accurate (if overflow-prone) for |x| <= 30; the
		// kernel uses e^x/(1+e^x) for x < 0.
		{"Sigmoid", kernels.Sigmoid[float64], func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, -30, 30, 1e-14},
		{"Tanh", kernels.Tanh[float64], func(x float64) float64 {
			e := math.Exp(2 * x)
			return (e - 1) / (e + 1)
		}, -10, 10, 1e-12},
	}
	r := rng(1)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := testutil.RandFloats(r, 257)
			for i := range x {
				x[i] = tc.lo + (tc.hi-tc.lo)*(x[i]+1)/2
			}
			want := make([]float64, len(x))
			for i, v := range x {
				want[i] = tc.want(v)
			}
			got := tc.f(make([]float64, len(x)), x)
			testutil.RequireClose(t, tc.name, got, want, tc.rtol, 1e-300)

			// The float32 instantiation rounds the float64 result once (or,
			// for Sigmoid and Tanh, evaluates in float32 vectors).
			x32 := f32(x)
			got32 := make([]float32, len(x))
			switch tc.name {
			case "Neg":
				kernels.Neg(got32, x32)
			case "Exp":
				kernels.Exp(got32, x32)
			case "Log":
				kernels.Log(got32, x32)
			case "Sqrt":
				kernels.Sqrt(got32, x32)
			case "Relu":
				kernels.Relu(got32, x32)
			case "Sigmoid":
				kernels.Sigmoid(got32, x32)
			case "Tanh":
				kernels.Tanh(got32, x32)
			}
			want32 := make([]float64, len(x))
			for i, v := range x32 {
				want32[i] = tc.want(float64(v))
			}
			rtol := 1e-7
			if tc.name == "Sigmoid" || tc.name == "Tanh" {
				rtol = 3.6e-7 // float32 vectors where the CPU has AVX-512: within 3 ulp (TestTranscendentalULP)
			}
			testutil.RequireClose(t, tc.name+" float32", testutil.ToFloat64s(got32), want32, rtol, 1e-38)
		})
	}
}

func TestUnarySpecialValues(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name string
		f    func(dst, x []float64) []float64
		x    []float64
		want []float64
	}{
		{"Neg", kernels.Neg[float64], []float64{0, 1.5, -inf, nan64}, []float64{negZ64, -1.5, inf, nan64}},
		{"Exp", kernels.Exp[float64], []float64{0, -inf, inf, 710, nan64}, []float64{1, 0, inf, inf, nan64}},
		{"Log", kernels.Log[float64], []float64{1, 0, -1, inf, math.E}, []float64{0, -inf, nan64, inf, 1}},
		{"Sqrt", kernels.Sqrt[float64], []float64{4, 0, -1, inf, 2.25}, []float64{2, 0, nan64, inf, 1.5}},
		{"Relu", kernels.Relu[float64], []float64{-1, negZ64, 0, 2.5, -inf, inf, nan64}, []float64{0, 0, 0, 2.5, 0, inf, nan64}},
		{"Sigmoid", kernels.Sigmoid[float64], []float64{0, 1000, -1000, inf, -inf, nan64}, []float64{0.5, 1, 0, 1, 0, nan64}},
		{"Tanh", kernels.Tanh[float64], []float64{0, 1000, -1000, nan64}, []float64{0, 1, -1, nan64}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.f(make([]float64, len(tc.x)), tc.x)
			testutil.RequireClose(t, tc.name, got, tc.want, 1e-15, 0)
		})
	}
	// Relu gives +0 for -0, so a later division cannot produce -Inf.
	if got := kernels.Relu(make([]float64, 1), []float64{negZ64}); math.Signbit(got[0]) {
		t.Errorf("Relu(-0) = -0, want +0")
	}
	// Sigmoid stays finite and monotone where e^-x overflows.
	s := kernels.Sigmoid(make([]float32, 4), []float32{-200, -100, -89, -88})
	for i, v := range s {
		if isNaN32(v) || v < 0 || (i > 0 && v < s[i-1]) {
			t.Errorf("Sigmoid(float32) of large negative inputs = %v, want finite, >= 0, non-decreasing", s)
		}
	}
}

// TestUnaryGradsNumeric checks each gradient kernel against the central
// difference of L(x) = Σ g_i·f(x_i) computed with the forward kernel.
func TestUnaryGradsNumeric(t *testing.T) {
	tests := []struct {
		name   string
		fwd    func(dst, x []float64) []float64
		grad   func(dst, yx, g []float64) []float64
		fromX  bool // the gradient takes x (Relu), not y = f(x)
		offset float64
	}{
		{"Relu", kernels.Relu[float64], kernels.ReluGrad[float64], true, 0.05},
		{"Sigmoid", kernels.Sigmoid[float64], kernels.SigmoidGrad[float64], false, 0},
		{"Tanh", kernels.Tanh[float64], kernels.TanhGrad[float64], false, 0},
	}
	r := rng(2)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := testutil.RandFloats(r, 31)
			for i := range x { // keep Relu's inputs away from its kink at 0
				x[i] = 3 * x[i]
				if math.Abs(x[i]) < tc.offset {
					x[i] = tc.offset
				}
			}
			g := testutil.RandFloats(r, len(x))
			buf := make([]float64, len(x))
			loss := func(x []float64) float64 {
				tc.fwd(buf, x)
				var s float64
				for i, v := range buf {
					s += g[i] * v
				}
				return s
			}
			want := testutil.NumericGrad(loss, x, 1e-6)
			in := tc.fwd(make([]float64, len(x)), x)
			if tc.fromX {
				in = x
			}
			got := tc.grad(make([]float64, len(x)), in, g)
			if e := testutil.RelErr(got, want); e > 1e-6 {
				t.Errorf("%sGrad: relative error %.3g against the numeric gradient, want < 1e-6\ngot  %v\nwant %v", tc.name, e, got, want)
			}
		})
	}
	// Relu's gradient at exactly 0 is 0, and NaN inputs pass no gradient.
	got := kernels.ReluGrad(make([]float64, 3), []float64{0, nan64, 1}, []float64{5, 5, 5})
	testutil.RequireClose(t, "ReluGrad at 0 and NaN", got, []float64{0, 0, 5}, 0, 0)
}

func TestCopyFill(t *testing.T) {
	src := []int32{3, -1, 7}
	dst := kernels.Copy(make([]int32, 3), src)
	for i := range src {
		if dst[i] != src[i] {
			t.Errorf("Copy[%d] = %d, want %d", i, dst[i], src[i])
		}
	}
	f := kernels.Fill(make([]uint8, 5), 9)
	for i, v := range f {
		if v != 9 {
			t.Errorf("Fill[%d] = %d, want 9", i, v)
		}
	}
	// In place on overlapping halves behaves like copy.
	s := []float32{1, 2, 3, 4}
	kernels.Copy(s[1:], s[:3])
	if s[0] != 1 || s[1] != 1 || s[2] != 2 || s[3] != 3 {
		t.Errorf("overlapping Copy = %v, want [1 1 2 3]", s)
	}
}
