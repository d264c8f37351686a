package kernels_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// TestAttentionRowOps checks every implementation of the row operations
// against float64: e^x within 2 ulps (exactly 0 at -Inf, +Inf above the
// range, NaN for NaN), the sum, the maximum, ds, masks and dropout (as
// DropoutMask) exactly; every length from 0 to 40 (the assembly's partial last
// vector) and nothing written past n.
func TestAttentionRowOps(t *testing.T) {
	r := rng(31)
	specials := []float32{float32(math.Inf(-1)), -200, -103.9, -87.5, -87.3, -20, -1e-7, 0, 1e-7, 0.5, 80, 88.7, 89, 200, inf32}
	for _, name := range kernels.AttentionRowNames() {
		t.Run(name, func(t *testing.T) {
			for n := 0; n <= 40; n++ {
				x := make([]float32, n+8)
				for j := range x {
					x[j] = float32(-60*r.Float64() + 2)
				}
				if n > 0 {
					x[r.IntN(n)] = specials[n%len(specials)]
				}
				sub := float32(r.Float64())
				row := append([]float32(nil), x...)
				sum := kernels.AttentionRowExp(name, row[:n], sub)
				var want float64
				for j := 0; j < n; j++ {
					e := math.Exp(float64(x[j] - sub))
					want += float64(float32(e))
					got := float64(row[j])
					switch {
					case e > math.MaxFloat32:
						if !math.IsInf(got, 1) {
							t.Fatalf("n=%d: e^%v = %v, want +Inf", n, x[j]-sub, got)
						}
					case e < 0x1p-126:
						if got < 0 || math.Abs(got-e) > 0x1p-149 {
							t.Fatalf("n=%d: e^%v = %v, want %v (to a subnormal ulp)", n, x[j]-sub, got, e)
						}
					default:
						if ulps := math.Abs(got-e) / ulp32(e); ulps > 2 {
							t.Fatalf("n=%d: e^%v = %v, want %v (%.2f ulps)", n, x[j]-sub, got, e, ulps)
						}
					}
				}
				for j := n; j < len(x); j++ {
					if row[j] != x[j] {
						t.Fatalf("n=%d: exp wrote row[%d]", n, j)
					}
				}
				if !(math.Abs(float64(sum)-want) <= 1e-6*want) && !(math.IsInf(want, 1) && math.IsInf(float64(sum), 1)) {
					t.Fatalf("n=%d: sum %v, want %v", n, sum, want)
				}
				if n > 0 {
					mx := float32(math.Inf(-1))
					for _, v := range x[:n] {
						mx = max(mx, v)
					}
					if got := kernels.AttentionRowMax(name, x[:n]); got != mx {
						t.Fatalf("n=%d: max %v, want %v", n, got, mx)
					}
				}
				p, ds := testutil.RandFloat32s(r, n+8), testutil.RandFloat32s(r, n+8)
				got := append([]float32(nil), ds...)
				di := float32(r.Float64())
				kernels.AttentionRowDS(name, got[:n], p, di)
				for j := range ds {
					w := ds[j]
					if j < n {
						w = p[j] * (ds[j] - di)
					}
					if got[j] != w {
						t.Fatalf("n=%d: ds[%d] = %v, want %v", n, j, got[j], w)
					}
				}
			}
			// masks: -Inf where the mask is 0, nothing read or written past n
			for n := 0; n <= 40; n++ {
				x := testutil.RandFloat32s(r, n+8)
				m := make([]uint8, n)
				for j := range m {
					m[j] = uint8(r.IntN(3))
				}
				row := append([]float32(nil), x...)
				kernels.AttentionRowMask(name, row[:n], m)
				for j := range x {
					want := x[j]
					if j < n && m[j] == 0 {
						want = float32(math.Inf(-1))
					}
					if row[j] != want {
						t.Fatalf("n=%d: mask row[%d] = %v, want %v", n, j, row[j], want)
					}
				}
			}
			// dropout: DropoutMask's draws, from any element on
			for _, rate := range []float64{0.1, 0.5, 1} {
				for n := 0; n <= 40; n++ {
					e0 := r.IntN(1000)
					mask := kernels.DropoutMask(make([]float32, e0+n+8), 77, 5, rate)
					x := testutil.RandFloat32s(r, n+8)
					row := append([]float32(nil), x...)
					kernels.AttentionRowDrop(name, row[:n], 77, 5, rate, e0)
					for j := range x {
						want := x[j]
						if j < n {
							want = x[j] * mask[e0+j]
						}
						if row[j] != want {
							t.Fatalf("rate %v n=%d e0=%d: dropout row[%d] = %v, want %v", rate, n, e0, j, row[j], want)
						}
					}
				}
			}
			// NaN propagates through exp
			row := []float32{1, nan32, 2}
			if s := kernels.AttentionRowExp(name, row, 0); !isNaN32(row[1]) || !isNaN32(s) {
				t.Errorf("exp of NaN: row %v, sum %v, want NaN in both", row, s)
			}
		})
	}
}

// ulp32 returns the spacing of float32 values at |x| (a normal float32).
func ulp32(x float64) float64 {
	f := float32(math.Abs(x))
	return float64(math.Float32frombits(math.Float32bits(f)+1) - f)
}

// TestAttentionLog checks the forward pass's logarithm of the row sums
// against math.Log over the float32 range.
func TestAttentionLog(t *testing.T) {
	r := rng(51)
	xs := []float32{1, 2, 0.5, math.Sqrt2, 1.4142135, 1.4142137, 3, 128, 2048, 0x1p-126, math.MaxFloat32, 0, 1e-45, inf32, nan32}
	for range 10000 {
		xs = append(xs, float32(math.Exp(r.Float64()*170-85)))
	}
	for _, x := range xs {
		got, want := kernels.AttentionLog(x), math.Log(float64(x))
		if got != want && !(math.Abs(got-want) <= 1e-9*max(1, math.Abs(want))) && !(got != got && want != want) {
			t.Fatalf("log %v = %v, want %v", x, got, want)
		}
	}
}
