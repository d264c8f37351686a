package testutil

import (
	"math"
	"testing"
)

// AllClose reports whether |got[i] - want[i]| <= atol + rtol·|want[i]| for
// every i, and returns the worst index: the one whose error exceeds its
// tolerance by the most (-1 for empty slices). NaN is close only to NaN, and
// an infinity only to the same infinity. Slices of different lengths are not
// close and give worst = -1.
func AllClose(got, want []float64, rtol, atol float64) (ok bool, worst int) {
	if len(got) != len(want) {
		return false, -1
	}
	ok, worst = true, -1
	worstExcess := math.Inf(-1)
	for i, w := range want {
		g := got[i]
		var excess float64 // error minus tolerance: > 0 means not close
		switch {
		case g == w || (g != g && w != w):
			excess = -atol - rtol*math.Abs(w)
		case g != g || w != w || math.IsInf(g, 0) || math.IsInf(w, 0):
			excess = math.Inf(1)
		default:
			excess = math.Abs(g-w) - (atol + rtol*math.Abs(w))
		}
		if excess > 0 {
			ok = false
		}
		if worst < 0 || excess > worstExcess {
			worst, worstExcess = i, excess
		}
	}
	return ok, worst
}

// RequireClose fails t (t.Fatalf) unless AllClose(got, want, rtol, atol),
// naming the check, the worst index and both values there.
func RequireClose(t testing.TB, name string, got, want []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", name, len(got), len(want))
		return
	}
	if ok, i := AllClose(got, want, rtol, atol); !ok {
		t.Fatalf("%s: index %d: got %v, want %v (|diff| %.3g > atol %g + rtol %g·|want|)",
			name, i, got[i], want[i], math.Abs(got[i]-want[i]), atol, rtol)
	}
}

// RelErrFloor is the smallest denominator RelErr divides by. It keeps
// finite-difference noise (about 1e-10 for eps = 1e-6 and a loss of order 1)
// from dominating components whose true value is near zero: below
// |a|+|b| = 1e-3 a pair is judged by its absolute difference, scaled by 1e3.
const RelErrFloor = 1e-3

// RelErr returns the largest symmetric relative error of a and b:
//
//	max_i |a_i - b_i| / max(|a_i| + |b_i|, RelErrFloor)
//
// which is 0 for equal slices and at most 1 for finite values. It is the
// measure behind "relative error < 1e-6" gradient checks (analytic gradient
// against NumericGrad). A NaN in either slice, or lengths that differ, give
// +Inf.
func RelErr(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var worst float64
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		d := math.Abs(a[i] - b[i])
		if d != d {
			return math.Inf(1)
		}
		e := d / max(math.Abs(a[i])+math.Abs(b[i]), RelErrFloor)
		if e != e { // ±Inf against a finite value or the other infinity
			return math.Inf(1)
		}
		worst = max(worst, e)
	}
	return worst
}

// ToFloat64s returns x widened to float64, for comparing float32 results.
func ToFloat64s[T ~float32 | ~float64](x []T) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
