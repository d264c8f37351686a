package kernels

import (
	"math"
	"testing"
)

// TestErf32 holds erf32 within 1.2e-7 (two float32 roundings near 1) of
// math.Erf over [-6, 6], and exp32
// within 3e-7 relative of math.Exp over [-87, 0].
func TestErf32(t *testing.T) {
	worst := 0.0
	for i := -600000; i <= 600000; i++ {
		x := float32(i) / 100000
		got, want := float64(erf32(x)), math.Erf(float64(x))
		worst = max(worst, math.Abs(got-want))
	}
	if worst > 1.2e-7 {
		t.Errorf("erf32: largest error %.3g over [-6, 6], want <= 1.2e-7", worst)
	}
	worst = 0
	for i := -870000; i <= 0; i++ {
		x := float32(i) / 10000
		got, want := float64(exp32(x)), math.Exp(float64(x))
		if want > 1e-37 {
			worst = max(worst, math.Abs(got-want)/want)
		}
	}
	if worst > 3e-7 {
		t.Errorf("exp32: largest relative error %.3g over [-87, 0], want <= 3e-7", worst)
	}
}

// TestGelu compares Gelu and GeluGrad in float32 (AVX-512 where the CPU
// has it, erf32 for the tail and elsewhere) with float64's math.Erf over
// [-12, 12]: within 3e-7·(|x|+1) of the exact values (float32 rounding
// of erf near ±1, times x).
func TestGelu(t *testing.T) {
	const n = 240001
	x := make([]float32, n)
	g := make([]float32, n)
	for i := range x {
		x[i] = float32(i-n/2) / 10000
		g[i] = 1 + float32(i%7)/7
	}
	x64 := make([]float64, n)
	for i, v := range x {
		x64[i] = float64(v)
	}
	y, dy := Gelu(make([]float32, n), x), GeluGrad(make([]float32, n), x, g)
	want, wantD := Gelu(make([]float64, n), x64), GeluGrad(make([]float64, n), x64, toFloat64s(g))
	worst, worstD := 0.0, 0.0
	for i := range x {
		s := math.Abs(x64[i]) + 1
		worst = max(worst, math.Abs(float64(y[i])-want[i])/s)
		worstD = max(worstD, math.Abs(float64(dy[i])-wantD[i])/s/float64(g[i]))
	}
	t.Logf("largest errors: gelu %.3g, gradient %.3g (scaled by |x|+1)", worst, worstD)
	if worst > 3e-7 || worstD > 3e-7 {
		t.Errorf("largest error: gelu %.3g, gradient %.3g; want <= 3e-7·(|x|+1)", worst, worstD)
	}
}

func toFloat64s(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
