package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// roundBF16 returns x with every element rounded to bfloat16.
func roundBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = tensor.ToBFloat16(v).Float32()
	}
	return out
}

// TestConvBF16 checks the bfloat16 convolutions against the float32 ones
// on operands rounded to bfloat16 first: a product of two bfloat16 values
// is exact in float32, so only the order of the float32 sums may differ.
// A chunk of two images (the workspace) covers the loop over chunks.
func TestConvBF16(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    kernels.ConvGeom
		f    int
	}{
		{"valid 3x3", kernels.NewConvGeom(5, 9, 8, 3, 3, 3, 1, 1, false), 7},
		{"same strided", kernels.NewConvGeom(3, 7, 7, 4, 3, 2, 2, 1, true), 5},
		{"one channel", kernels.NewConvGeom(4, 6, 6, 1, 3, 3, 1, 1, false), 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, f := tc.g, tc.f
			r := rand.New(rand.NewPCG(3, 4))
			rnd := func(n int) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(r.NormFloat64())
				}
				return v
			}
			x, filter := rnd(g.N*g.H*g.W*g.C), rnd(g.KH*g.KW*g.C*f)
			dy := rnd(g.N * g.OH * g.OW * f)
			work := make([]float32, g.Im2ColSize(2))
			check := func(op string, got, want []float32) {
				t.Helper()
				scale := 0.0
				for _, v := range want {
					scale = max(scale, math.Abs(float64(v)))
				}
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*scale {
						t.Fatalf("%s: element %d = %v, want %v (float32 on rounded operands)", op, i, got[i], want[i])
					}
				}
			}
			y := make([]float32, len(dy))
			check("Conv2DBF16", kernels.Conv2DBF16(y, x, filter, work, g, f),
				kernels.Conv2D(make([]float32, len(dy)), roundBF16(x), roundBF16(filter), make([]float32, g.Im2ColSize(g.N)), g, f))
			check("Conv2DBackpropInputBF16", kernels.Conv2DBackpropInputBF16(make([]float32, len(x)), dy, filter, work, g, f),
				kernels.Conv2DBackpropInput(make([]float32, len(x)), roundBF16(dy), roundBF16(filter), make([]float32, g.Im2ColSize(g.N)), g, f))
			check("Conv2DBackpropFilterBF16", kernels.Conv2DBackpropFilterBF16(make([]float32, len(filter)), x, dy, work, g, f),
				kernels.Conv2DBackpropFilter(make([]float32, len(filter)), roundBF16(x), roundBF16(dy), make([]float32, g.Im2ColSize(g.N)), g, f))
			// the same bits on one thread and on two
			old := kernels.Threads()
			for _, th := range []int{1, 2} {
				kernels.SetThreads(th)
				y2 := kernels.Conv2DBF16(make([]float32, len(dy)), x, filter, work, g, f)
				dx2 := kernels.Conv2DBackpropInputBF16(make([]float32, len(x)), dy, filter, work, g, f)
				df2 := kernels.Conv2DBackpropFilterBF16(make([]float32, len(filter)), x, dy, work, g, f)
				kernels.SetThreads(old)
				y1 := kernels.Conv2DBF16(make([]float32, len(dy)), x, filter, work, g, f)
				dx1 := kernels.Conv2DBackpropInputBF16(make([]float32, len(x)), dy, filter, work, g, f)
				df1 := kernels.Conv2DBackpropFilterBF16(make([]float32, len(filter)), x, dy, work, g, f)
				for _, pair := range [][2][]float32{{y1, y2}, {dx1, dx2}, {df1, df2}} {
					for i := range pair[0] {
						if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
							t.Fatalf("%d threads: element %d = %v, want %v as on %d", th, i, pair[1][i], pair[0][i], old)
						}
					}
				}
			}
			if full := kernels.Conv2D(make([]float32, len(dy)), x, filter, make([]float32, g.Im2ColSize(g.N)), g, f); full[0] == y[0] && full[1] == y[1] && full[2] == y[2] {
				t.Error("Conv2DBF16 gave the float32 results: the operands were not rounded")
			}
		})
	}
}
