package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// refMaxPool32 is max pooling and its gradient in float32 by the reference
// rule, one channel at a time: the selected cell of a window is the first in
// row-major order that is greater than the best so far, or a NaN while the
// best is not; dx starts at +0 and each dy is added to its cell in window
// order.
func refMaxPool32(x, dy []float32, g kernels.ConvGeom) (y, dx []float32) {
	y, dx = make([]float32, g.N*g.OH*g.OW*g.C), make([]float32, len(x))
	for n := 0; n < g.N; n++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				for c := 0; c < g.C; c++ {
					arg := -1
					poolCell(g, oh, ow, func(ih, iw int) {
						i := at4(n, ih, iw, c, g.H, g.W, g.C)
						if v := x[i]; arg < 0 || v > x[arg] || (v != v && x[arg] == x[arg]) {
							arg = i
						}
					})
					o := at4(n, oh, ow, c, g.OH, g.OW, g.C)
					y[o] = x[arg]
					dx[arg] += dy[o]
				}
			}
		}
	}
	return y, dx
}

// requireBits fails unless got and want hold the same float32 bits.
func requireBits(t *testing.T, name string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d]: got %v (%#x), want %v (%#x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestMaxPool2DWideChannels checks max pooling (and MaxPool2DReluGrad
// against ReluGrad of the reference gradient) over channel counts that
// the vector loops take whole (16, 64) or in part (35), on the tiling 2x2/2
// window (each dx cell written once), on overlapping and padded windows (dx
// accumulated) and on a window too large for the vector loops, bit for bit
// against refMaxPool32, with data full of ties, signed zeros and NaNs.
func TestMaxPool2DWideChannels(t *testing.T) {
	cases := []poolCase{
		{3, 4, 6, 16, 2, 2, 2, 2, false},
		{2, 24, 24, 64, 2, 2, 2, 2, false},
		{3, 5, 7, 35, 2, 2, 2, 2, false},
		{2, 5, 5, 32, 3, 3, 1, 1, true},
		{2, 7, 6, 48, 3, 2, 2, 1, true},
		{1, 9, 9, 16, 9, 8, 1, 1, false},
	}
	values := []float32{-1, float32(math.Copysign(0, -1)), 0, 1, 2, float32(math.NaN())}
	for _, tc := range cases {
		for _, data := range []string{"ties", "nan"} {
			t.Run(fmt.Sprintf("%v/%s", tc, data), func(t *testing.T) {
				g := tc.geom()
				r := rng(uint64(g.C + len(data)))
				x := make([]float32, g.N*g.H*g.W*g.C)
				choices := len(values) - 1
				if data == "nan" {
					choices++
				}
				for i := range x {
					x[i] = values[r.IntN(choices)]
				}
				dy := make([]float32, g.N*g.OH*g.OW*g.C)
				for i := range dy {
					dy[i] = float32(r.NormFloat64())
					if i%7 == 0 {
						dy[i] = float32(math.Copysign(0, -1))
					}
				}
				wantY, wantDX := refMaxPool32(x, dy, g)
				wantReluDX := kernels.ReluGrad(make([]float32, len(x)), x, wantDX)
				for _, threads := range []int{1, 2} {
					kernels.SetThreads(threads)
					y := kernels.MaxPool2D(make([]float32, len(dy)), x, g)
					requireBits(t, fmt.Sprintf("MaxPool2D (%d threads)", threads), y, wantY)
					dx := make([]float32, len(x))
					for i := range dx {
						dx[i] = 7 // overwritten
					}
					kernels.MaxPool2DGrad(dx, x, dy, g)
					requireBits(t, fmt.Sprintf("MaxPool2DGrad (%d threads)", threads), dx, wantDX)
					kernels.MaxPool2DReluGrad(dx, x, dy, g)
					requireBits(t, fmt.Sprintf("MaxPool2DReluGrad (%d threads)", threads), dx, wantReluDX)
				}
				kernels.SetThreads(0)
			})
		}
	}
}

// TestMaxPool2DReluGrad checks MaxPool2DReluGrad against ReluGrad of
// MaxPool2DGrad, bit for bit, on the geometries of poolCases in float64 and
// float32, with data of many ties at 0 and below.
func TestMaxPool2DReluGrad(t *testing.T) {
	for _, tc := range poolCases {
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			x := ties(uint64(g.N*g.H*g.W), g.N*g.H*g.W*g.C)
			dy := make([]float64, g.N*g.OH*g.OW*g.C)
			r := rng(uint64(len(dy)))
			for i := range dy {
				dy[i] = r.NormFloat64()
			}
			want := kernels.ReluGrad(make([]float64, len(x)), x, kernels.MaxPool2DGrad(make([]float64, len(x)), x, dy, g))
			got := kernels.MaxPool2DReluGrad(make([]float64, len(x)), x, dy, g)
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("float64 dx[%d]: got %v, want %v", i, got[i], want[i])
				}
			}
			x32, dy32 := f32(x), f32(dy)
			want32 := kernels.ReluGrad(make([]float32, len(x)), x32, kernels.MaxPool2DGrad(make([]float32, len(x)), x32, dy32, g))
			requireBits(t, "float32 dx", kernels.MaxPool2DReluGrad(make([]float32, len(x)), x32, dy32, g), want32)
		})
	}
}
