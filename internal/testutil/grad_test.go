package testutil

import (
	"math"
	"testing"
)

func TestNumericGrad(t *testing.T) {
	tests := []struct {
		name string
		f    func(x []float64) float64
		grad func(x []float64) []float64
	}{
		{"sum of cubes",
			func(x []float64) float64 {
				var s float64
				for _, v := range x {
					s += v * v * v
				}
				return s
			},
			func(x []float64) []float64 {
				g := make([]float64, len(x))
				for i, v := range x {
					g[i] = 3 * v * v
				}
				return g
			}},
		{"sin of weighted sum",
			func(x []float64) float64 { return math.Sin(x[0] + 2*x[1] - x[2]) },
			func(x []float64) []float64 {
				c := math.Cos(x[0] + 2*x[1] - x[2])
				return []float64{c, 2 * c, -c}
			}},
		{"product", // couples the inputs: each partial depends on the others
			func(x []float64) float64 { return x[0] * x[1] * x[2] },
			func(x []float64) []float64 { return []float64{x[1] * x[2], x[0] * x[2], x[0] * x[1]} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := []float64{0.7, -1.3, 2.1}
			orig := append([]float64(nil), x...)
			got := NumericGrad(tc.f, x, 1e-6)
			for i := range x {
				if x[i] != orig[i] {
					t.Fatalf("x[%d] = %v after NumericGrad, want %v restored", i, x[i], orig[i])
				}
			}
			want := tc.grad(x)
			if e := RelErr(got, want); e > 1e-8 {
				t.Errorf("NumericGrad = %v, want %v (relative error %.3g)", got, want, e)
			}
		})
	}
}
