package testutil

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// recorder is a testing.TB that records failures instead of stopping the
// test, so the helpers' failure paths can be checked.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
}
func (r *recorder) Errorf(format string, args ...any) { r.Fatalf(format, args...) }
func (r *recorder) Logf(string, ...any)               {}

func TestAllClose(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name       string
		got, want  []float64
		rtol, atol float64
		ok         bool
		worst      int
	}{
		{"empty", nil, nil, 0, 0, true, -1},
		{"equal", []float64{1, 2, 3}, []float64{1, 2, 3}, 0, 0, true, 0},
		{"within atol", []float64{1e-9}, []float64{0}, 0, 1e-8, true, 0},
		{"beyond atol", []float64{2e-8}, []float64{0}, 0, 1e-8, false, 0},
		{"within rtol", []float64{1000.5}, []float64{1000}, 1e-3, 0, true, 0},
		{"beyond rtol", []float64{1002}, []float64{1000}, 1e-3, 0, false, 0},
		{"rtol uses want, not got", []float64{0}, []float64{1}, 1, 0, true, 0},
		{"rtol uses want (reverse)", []float64{1}, []float64{0}, 1, 0, false, 0},
		{"worst is largest excess", []float64{1, 2.5, 3.1}, []float64{1, 2, 3}, 0, 0.2, false, 1},
		{"nan equals nan", []float64{nan, 1}, []float64{nan, 1}, 0, 0, true, 0},
		{"nan vs number", []float64{1, nan}, []float64{1, 1}, 1, 1, false, 1},
		{"number vs nan", []float64{1, 1}, []float64{nan, 1}, 1, 1, false, 0},
		{"inf equals inf", []float64{inf, -inf}, []float64{inf, -inf}, 0, 0, true, 0},
		{"inf vs -inf", []float64{inf}, []float64{-inf}, 1, 1, false, 0},
		{"inf vs large", []float64{inf}, []float64{1e308}, 1, 1, false, 0},
		{"length mismatch", []float64{1}, []float64{1, 2}, 1, 1, false, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, worst := AllClose(tc.got, tc.want, tc.rtol, tc.atol)
			if ok != tc.ok || worst != tc.worst {
				t.Errorf("AllClose(%v, %v, %g, %g) = %v, %d; want %v, %d", tc.got, tc.want, tc.rtol, tc.atol, ok, worst, tc.ok, tc.worst)
			}
		})
	}
}

func TestRequireClose(t *testing.T) {
	r := &recorder{TB: t}
	RequireClose(r, "close", []float64{1, 2}, []float64{1, 2 + 1e-12}, 1e-9, 0)
	if r.failed {
		t.Fatalf("RequireClose failed on close values: %s", r.msg)
	}
	RequireClose(r, "logits", []float64{1, 2, 7}, []float64{1, 2, 3}, 1e-9, 0)
	if !r.failed {
		t.Fatal("RequireClose passed values that differ")
	}
	for _, want := range []string{"logits", "index 2", "got 7", "want 3"} {
		if !strings.Contains(r.msg, want) {
			t.Errorf("message %q lacks %q", r.msg, want)
		}
	}
	r = &recorder{TB: t}
	RequireClose(r, "short", []float64{1}, []float64{1, 2}, 1, 1)
	if !r.failed || !strings.Contains(r.msg, "got 1 values, want 2") {
		t.Errorf("length mismatch: failed=%v msg=%q", r.failed, r.msg)
	}
}

func TestRelErr(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		a, b []float64
		want float64
	}{
		{"equal", []float64{1, -2, 0}, []float64{1, -2, 0}, 0},
		{"symmetric relative", []float64{1, 10}, []float64{1, 11}, 1.0 / 21},
		{"opposite signs", []float64{1}, []float64{-1}, 1},
		{"floor near zero", []float64{0}, []float64{1e-10}, 1e-10 / RelErrFloor},
		{"floor boundary", []float64{0}, []float64{2 * RelErrFloor}, 1},
		{"nan", []float64{nan}, []float64{nan}, inf},
		{"inf vs finite", []float64{inf}, []float64{1}, inf},
		{"inf vs inf", []float64{inf}, []float64{inf}, 0},
		{"length mismatch", []float64{1}, nil, inf},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RelErr(tc.a, tc.b)
			if math.Abs(got-tc.want) > 1e-15*math.Max(1, tc.want) && got != tc.want {
				t.Errorf("RelErr(%v, %v) = %g, want %g", tc.a, tc.b, got, tc.want)
			}
			if back := RelErr(tc.b, tc.a); back != got {
				t.Errorf("RelErr is not symmetric: %g and %g", got, back)
			}
		})
	}
}

func TestToFloat64s(t *testing.T) {
	got := ToFloat64s([]float32{1.5, -2, 0.1})
	want := []float64{1.5, -2, float64(float32(0.1))}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ToFloat64s[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}
