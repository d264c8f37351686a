package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// poolCell calls visit(ih, iw) for each input cell of the window of output
// (oh, ow), testing every padded position against the input bounds.
func poolCell(g kernels.ConvGeom, oh, ow int, visit func(ih, iw int)) {
	for kh := 0; kh < g.KH; kh++ {
		for kw := 0; kw < g.KW; kw++ {
			ih, iw := oh*g.SH-g.PadTop+kh, ow*g.SW-g.PadLeft+kw
			if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
				continue // padding takes no part
			}
			visit(ih, iw)
		}
	}
}

// naiveMaxPool returns MaxPool2D(x) and the gradient of Σ dy·MaxPool2D(x),
// which sends each dy to the first maximum of its window in (kh, kw) order.
func naiveMaxPool(x, dy []float64, g kernels.ConvGeom) (y, dx []float64) {
	y, dx = make([]float64, g.N*g.OH*g.OW*g.C), make([]float64, len(x))
	for n := 0; n < g.N; n++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				for c := 0; c < g.C; c++ {
					arg := -1
					poolCell(g, oh, ow, func(ih, iw int) {
						if i := at4(n, ih, iw, c, g.H, g.W, g.C); arg < 0 || x[i] > x[arg] {
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

// naiveAvgPool returns AvgPool2D(x) and the gradient of Σ dy·AvgPool2D(x):
// the mean over the window's cells inside the input, and dy/count to each.
func naiveAvgPool(x, dy []float64, g kernels.ConvGeom) (y, dx []float64) {
	y, dx = make([]float64, g.N*g.OH*g.OW*g.C), make([]float64, len(x))
	for n := 0; n < g.N; n++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				for c := 0; c < g.C; c++ {
					var sum float64
					count := 0
					poolCell(g, oh, ow, func(ih, iw int) {
						sum += x[at4(n, ih, iw, c, g.H, g.W, g.C)]
						count++
					})
					o := at4(n, oh, ow, c, g.OH, g.OW, g.C)
					y[o] = sum / float64(count)
					poolCell(g, oh, ow, func(ih, iw int) {
						dx[at4(n, ih, iw, c, g.H, g.W, g.C)] += dy[o] / float64(count)
					})
				}
			}
		}
	}
	return y, dx
}

type poolCase struct {
	n, h, w, c, kh, kw, sh, sw int
	same                       bool
}

func (tc poolCase) geom() kernels.ConvGeom {
	return kernels.NewConvGeom(tc.n, tc.h, tc.w, tc.c, tc.kh, tc.kw, tc.sh, tc.sw, tc.same)
}

func (tc poolCase) String() string {
	pad := "valid"
	if tc.same {
		pad = "same"
	}
	return fmt.Sprintf("%dx%dx%dx%d/k%dx%d/s%dx%d/%s", tc.n, tc.h, tc.w, tc.c, tc.kh, tc.kw, tc.sh, tc.sw, pad)
}

// poolCases: the usual 2x2/2 on even and odd inputs, overlapping windows,
// KH != KW, mixed strides, same padding on every side, a window larger than
// the input, and a global pool.
var poolCases = []poolCase{
	{3, 6, 8, 3, 2, 2, 2, 2, false},
	{1, 7, 5, 1, 2, 2, 2, 2, false},
	{3, 7, 5, 3, 2, 2, 2, 2, true},
	{1, 7, 7, 3, 3, 3, 2, 2, true},
	{3, 6, 5, 1, 3, 3, 1, 1, true},
	{3, 5, 8, 3, 3, 2, 2, 1, true},
	{1, 9, 4, 3, 3, 2, 1, 2, false},
	{3, 3, 4, 3, 4, 5, 1, 1, true},
	{3, 5, 6, 3, 5, 6, 1, 1, false},
}

// ties returns n values from {-1, 0, 1}, so most windows hold a tied maximum.
func ties(seed uint64, n int) []float64 {
	r := rng(seed)
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(r.IntN(3) - 1)
	}
	return x
}

func TestMaxPool2DNaive(t *testing.T) {
	r := rng(31)
	for _, tc := range poolCases {
		g := tc.geom()
		for _, data := range []string{"random", "ties"} {
			t.Run(tc.String()+"/"+data, func(t *testing.T) {
				x := testutil.RandFloats(r, g.N*g.H*g.W*g.C)
				if data == "ties" {
					x = ties(uint64(len(x)), len(x))
				}
				dy := testutil.RandFloats(r, g.N*g.OH*g.OW*g.C)
				wantY, wantDX := naiveMaxPool(x, dy, g)
				y := kernels.MaxPool2D(testutil.RandFloats(r, len(dy)), x, g)
				testutil.RequireClose(t, "MaxPool2D", y, wantY, 0, 0)
				dx := kernels.MaxPool2DGrad(testutil.RandFloats(r, len(x)), x, dy, g)
				testutil.RequireClose(t, "MaxPool2DGrad", dx, wantDX, 1e-15, 1e-15)

				y32 := kernels.MaxPool2D(make([]float32, len(dy)), f32(x), g)
				testutil.RequireClose(t, "MaxPool2D float32", testutil.ToFloat64s(y32), testutil.ToFloat64s(f32(wantY)), 0, 0)
				dx32 := kernels.MaxPool2DGrad(make([]float32, len(x)), f32(x), f32(dy), g)
				testutil.RequireClose(t, "MaxPool2DGrad float32", testutil.ToFloat64s(dx32), wantDX, 1e-6, 1e-6)
			})
		}
	}
}

// TestMaxPool2DTieHand pins the tie rule on one window: the gradient goes to
// the first maximum in row-major window order, not the last and not split.
func TestMaxPool2DTieHand(t *testing.T) {
	g := kernels.NewConvGeom(1, 2, 3, 1, 2, 3, 1, 1, false) // one 2x3 window
	x := []float64{
		0, 5, 1,
		5, 2, 5,
	}
	y := kernels.MaxPool2D(make([]float64, 1), x, g)
	dx := kernels.MaxPool2DGrad(make([]float64, 6), x, []float64{3}, g)
	testutil.RequireClose(t, "MaxPool2D", y, []float64{5}, 0, 0)
	testutil.RequireClose(t, "MaxPool2DGrad", dx, []float64{0, 3, 0, 0, 0, 0}, 0, 0)
}

// TestMaxPool2DNaN checks that a NaN in a window propagates (whatever its
// position) and receives the gradient, and that padding, even when every
// input cell is negative, is never selected.
func TestMaxPool2DNaN(t *testing.T) {
	nan := math.NaN()
	g := kernels.NewConvGeom(1, 2, 4, 1, 2, 2, 2, 2, false) // two 2x2 windows
	x := []float64{
		9, 1, -4, -2,
		2, nan, -3, -5,
	}
	y := kernels.MaxPool2D(make([]float64, 2), x, g)
	if !math.IsNaN(y[0]) || y[1] != -2 {
		t.Errorf("MaxPool2D: got %v, want [NaN -2]", y)
	}
	dx := kernels.MaxPool2DGrad(make([]float64, 8), x, []float64{3, 4}, g)
	testutil.RequireClose(t, "MaxPool2DGrad", dx, []float64{0, 0, 0, 4, 0, 3, 0, 0}, 0, 0)

	// Same padding around an all-negative input: the maximum is an input cell.
	gs := kernels.NewConvGeom(1, 3, 3, 1, 3, 3, 1, 1, true)
	xs := []float64{-9, -8, -7, -6, -5, -4, -3, -2, -1}
	ys := kernels.MaxPool2D(make([]float64, 9), xs, gs)
	testutil.RequireClose(t, "MaxPool2D same, negative input", ys, []float64{-5, -4, -4, -2, -1, -1, -2, -1, -1}, 0, 0)
}

func TestAvgPool2DNaive(t *testing.T) {
	r := rng(32)
	for _, tc := range poolCases {
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			x := testutil.RandFloats(r, g.N*g.H*g.W*g.C)
			dy := testutil.RandFloats(r, g.N*g.OH*g.OW*g.C)
			wantY, wantDX := naiveAvgPool(x, dy, g)
			y := kernels.AvgPool2D(testutil.RandFloats(r, len(dy)), x, g)
			testutil.RequireClose(t, "AvgPool2D", y, wantY, 1e-14, 1e-15)
			dx := kernels.AvgPool2DGrad(testutil.RandFloats(r, len(x)), dy, g)
			testutil.RequireClose(t, "AvgPool2DGrad", dx, wantDX, 1e-14, 1e-15)

			y32 := kernels.AvgPool2D(make([]float32, len(dy)), f32(x), g)
			testutil.RequireClose(t, "AvgPool2D float32", testutil.ToFloat64s(y32), testutil.ToFloat64s(f32(wantY)), 1e-7, 1e-7)
			dx32 := kernels.AvgPool2DGrad(make([]float32, len(x)), f32(dy), g)
			testutil.RequireClose(t, "AvgPool2DGrad float32", testutil.ToFloat64s(dx32), wantDX, 1e-6, 1e-6)

			// AvgPool2D is linear: its gradient is its adjoint.
			if a, b := dotF(y, dy), dotF(x, dx); math.Abs(a-b) > 1e-12*dotAbs(y, dy) {
				t.Errorf("got <AvgPool2D(x), dy> = %.17g, <x, AvgPool2DGrad(dy)> = %.17g, want equal", a, b)
			}
		})
	}
}

// TestAvgPool2DSameCount pins the count on a hand example: a 3x3 same pool
// over a 2x2 input averages the whole input at every output (4 cells, not 9).
func TestAvgPool2DSameCount(t *testing.T) {
	g := kernels.NewConvGeom(1, 2, 2, 1, 3, 3, 1, 1, true)
	y := kernels.AvgPool2D(make([]float64, 4), []float64{1, 2, 3, 6}, g)
	testutil.RequireClose(t, "AvgPool2D", y, []float64{3, 3, 3, 3}, 0, 0)
	dx := kernels.AvgPool2DGrad(make([]float64, 4), []float64{4, 8, 0, 4}, g)
	testutil.RequireClose(t, "AvgPool2DGrad", dx, []float64{4, 4, 4, 4}, 0, 0)
}

// TestPool2DNumericGrad checks both gradients against central differences of
// L = Σ dy·Pool(x), on continuous random data (no ties, so max pool is
// differentiable there).
func TestPool2DNumericGrad(t *testing.T) {
	r := rng(33)
	for _, tc := range []poolCase{{2, 5, 4, 2, 3, 2, 2, 1, true}, {1, 6, 6, 3, 2, 2, 2, 2, false}} {
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			x := testutil.RandFloats(r, g.N*g.H*g.W*g.C)
			dy := testutil.RandFloats(r, g.N*g.OH*g.OW*g.C)
			y := make([]float64, len(dy))
			maxLoss := func(v []float64) float64 { return dotF(kernels.MaxPool2D(y, v, g), dy) }
			avgLoss := func(v []float64) float64 { return dotF(kernels.AvgPool2D(y, v, g), dy) }
			dx := kernels.MaxPool2DGrad(make([]float64, len(x)), x, dy, g)
			if e := testutil.RelErr(dx, testutil.NumericGrad(maxLoss, x, 1e-6)); e > 1e-6 {
				t.Errorf("MaxPool2DGrad: got relative error %.3g against central differences, want <= 1e-6", e)
			}
			dx = kernels.AvgPool2DGrad(make([]float64, len(x)), dy, g)
			if e := testutil.RelErr(dx, testutil.NumericGrad(avgLoss, x, 1e-6)); e > 1e-6 {
				t.Errorf("AvgPool2DGrad: got relative error %.3g against central differences, want <= 1e-6", e)
			}
		})
	}
}

func TestPool2DPanics(t *testing.T) {
	g := kernels.NewConvGeom(2, 4, 4, 3, 2, 2, 2, 2, false)
	x, y := make([]float64, 2*4*4*3), make([]float64, 2*2*2*3)
	bad := g
	bad.OH = 3 // the third window starts at row 4, past the input
	tests := []struct {
		name, want string
		f          func()
	}{
		{"max short x", "MaxPool2D: len(x)", func() { kernels.MaxPool2D(y, x[1:], g) }},
		{"max short dst", "MaxPool2D: len(dst)", func() { kernels.MaxPool2D(y[1:], x, g) }},
		{"max window outside", "MaxPool2D: geometry", func() { kernels.MaxPool2D(make([]float64, 2*3*2*3), x, bad) }},
		{"max grad short dy", "MaxPool2DGrad: len(dy)", func() { kernels.MaxPool2DGrad(x, x, y[1:], g) }},
		{"max grad short dx", "MaxPool2DGrad: len(dx)", func() { kernels.MaxPool2DGrad(x[1:], x, y, g) }},
		{"avg short dst", "AvgPool2D: len(dst)", func() { kernels.AvgPool2D(y[1:], x, g) }},
		{"avg grad short dx", "AvgPool2DGrad: len(dx)", func() { kernels.AvgPool2DGrad(x[1:], y, g) }},
		{"avg grad short dy", "AvgPool2DGrad: len(dy)", func() { kernels.AvgPool2DGrad(x, y[1:], g) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { mustPanic(t, tc.want, tc.f) })
	}
}

func TestPool2DAllocs(t *testing.T) {
	g := kernels.NewConvGeom(3, 7, 6, 3, 3, 2, 2, 1, true)
	x, dx, y := make([]float32, g.N*g.H*g.W*g.C), make([]float32, g.N*g.H*g.W*g.C), make([]float32, g.N*g.OH*g.OW*g.C)
	for name, run := range map[string]func(){
		"MaxPool2D":     func() { kernels.MaxPool2D(y, x, g) },
		"MaxPool2DGrad": func() { kernels.MaxPool2DGrad(dx, x, y, g) },
		"AvgPool2D":     func() { kernels.AvgPool2D(y, x, g) },
		"AvgPool2DGrad": func() { kernels.AvgPool2DGrad(dx, y, g) },
	} {
		if a := testing.AllocsPerRun(20, run); a != 0 {
			t.Errorf("AllocsPerRun(%s) = %v, want 0", name, a)
		}
	}
}

// BenchmarkPool2D runs the reference cnn's 2x2/2 max pool (and the same
// average pool) in float32 over [128, 24, 24, 64], reporting input GB/s.
func BenchmarkPool2D(b *testing.B) {
	g := kernels.NewConvGeom(128, 24, 24, 64, 2, 2, 2, 2, false)
	r := rng(34)
	x := testutil.RandFloat32s(r, g.N*g.H*g.W*g.C)
	dx := make([]float32, len(x))
	y := testutil.RandFloat32s(r, g.N*g.OH*g.OW*g.C)
	for _, bc := range []struct {
		name string
		run  func()
	}{
		{"max/forward", func() { kernels.MaxPool2D(y, x, g) }},
		{"max/grad", func() { kernels.MaxPool2DGrad(dx, x, y, g) }},
		{"avg/forward", func() { kernels.AvgPool2D(y, x, g) }},
		{"avg/grad", func() { kernels.AvgPool2DGrad(dx, y, g) }},
	} {
		run := bc.run
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for i := 0; i < b.N; i++ {
				run()
			}
		})
	}
}
