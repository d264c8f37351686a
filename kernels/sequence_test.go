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
