package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// The naive definitions below index NHWC and HWIO tensors with explicit
// multiply-adds and test each padded read against the input bounds, sharing
// nothing with the kernels' im2col lowering.

// at4 returns the row-major offset of (i, j, k, l) in a [_, d1, d2, d3] tensor.
func at4(i, j, k, l, d1, d2, d3 int) int { return ((i*d1+j)*d2+k)*d3 + l }

// naiveConv is the 7-loop definition of Conv2D:
// y[n, oh, ow, f] = Σ_{kh, kw, c} x[n, oh·SH-PadTop+kh, ow·SW-PadLeft+kw, c]·w[kh, kw, c, f].
func naiveConv(x, w []float64, g kernels.ConvGeom, f int) []float64 {
	y := make([]float64, g.N*g.OH*g.OW*f)
	for n := 0; n < g.N; n++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				for o := 0; o < f; o++ {
					var s float64
					for kh := 0; kh < g.KH; kh++ {
						for kw := 0; kw < g.KW; kw++ {
							for c := 0; c < g.C; c++ {
								ih, iw := oh*g.SH-g.PadTop+kh, ow*g.SW-g.PadLeft+kw
								if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
									continue // padding reads as zero
								}
								s += x[at4(n, ih, iw, c, g.H, g.W, g.C)] * w[at4(kh, kw, c, o, g.KW, g.C, f)]
							}
						}
					}
					y[at4(n, oh, ow, o, g.OH, g.OW, f)] = s
				}
			}
		}
	}
	return y
}

// naiveConvGrads returns ∂(Σ dy·y)/∂x and ∂(Σ dy·y)/∂w from the same loops:
// every product x·w that feeds y[n, oh, ow, f] sends dy[n, oh, ow, f]·w to x
// and dy[n, oh, ow, f]·x to w.
func naiveConvGrads(x, w, dy []float64, g kernels.ConvGeom, f int) (dx, dw []float64) {
	dx, dw = make([]float64, len(x)), make([]float64, len(w))
	for n := 0; n < g.N; n++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				for o := 0; o < f; o++ {
					d := dy[at4(n, oh, ow, o, g.OH, g.OW, f)]
					for kh := 0; kh < g.KH; kh++ {
						for kw := 0; kw < g.KW; kw++ {
							for c := 0; c < g.C; c++ {
								ih, iw := oh*g.SH-g.PadTop+kh, ow*g.SW-g.PadLeft+kw
								if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
									continue
								}
								xi, wi := at4(n, ih, iw, c, g.H, g.W, g.C), at4(kh, kw, c, o, g.KW, g.C, f)
								dx[xi] += d * w[wi]
								dw[wi] += d * x[xi]
							}
						}
					}
				}
			}
		}
	}
	return dx, dw
}

type convCase struct {
	n, h, w, c, kh, kw, sh, sw int
	same                       bool
	f                          int
}

func (tc convCase) geom() kernels.ConvGeom {
	return kernels.NewConvGeom(tc.n, tc.h, tc.w, tc.c, tc.kh, tc.kw, tc.sh, tc.sw, tc.same)
}

func (tc convCase) String() string {
	pad := "valid"
	if tc.same {
		pad = "same"
	}
	return fmt.Sprintf("%dx%dx%dx%d/k%dx%d/s%dx%d/%s/f%d", tc.n, tc.h, tc.w, tc.c, tc.kh, tc.kw, tc.sh, tc.sw, pad, tc.f)
}

// convCases cover odd and even sizes, strides 1 and 2 (and mixed), valid and
// same, KH != KW, C in {1, 3}, F in {1, 5}, N in {1, 3}, a window larger
// than the input under same padding, and 1x1.
var convCases = []convCase{
	{1, 7, 5, 1, 3, 3, 1, 1, false, 1},
	{3, 7, 5, 3, 3, 2, 1, 1, true, 5},
	{3, 9, 6, 3, 3, 2, 2, 2, false, 5},
	{1, 6, 7, 3, 3, 3, 2, 2, true, 5},
	{3, 5, 5, 1, 2, 3, 2, 1, true, 1},
	{3, 7, 7, 3, 3, 3, 2, 2, true, 5},
	{3, 4, 3, 3, 5, 4, 1, 1, true, 5},
	{1, 1, 1, 3, 1, 1, 1, 1, false, 5},
	{3, 8, 9, 1, 4, 1, 3, 2, false, 5},
}

// workspaces returns the workspace sizes every case is run with: exactly one
// image, two images (a partial last chunk when N = 3), the whole batch, and
// more than the batch.
func workspaces(g kernels.ConvGeom) map[string]int {
	return map[string]int{
		"work=1":    g.Im2ColSize(1),
		"work=2":    g.Im2ColSize(2),
		"work=N":    g.Im2ColSize(g.N),
		"work=N+1½": g.Im2ColSize(g.N+1) + g.Im2ColSize(1)/2,
	}
}

func TestNewConvGeom(t *testing.T) {
	// Shapes as tf.keras.layers.Conv2D / MaxPool2D compute them.
	tests := []struct {
		h, k, s   int
		same      bool
		out, top  int
		bottom    int
		tfExample string
	}{
		{28, 3, 1, false, 26, 0, 0, "Conv2D 3x3 on MNIST"},
		{26, 3, 1, false, 24, 0, 0, "second Conv2D of the reference cnn"},
		{24, 2, 2, false, 12, 0, 0, "MaxPool2D 2x2"},
		{25, 2, 2, false, 12, 0, 0, "MaxPool2D 2x2 drops the odd row"},
		{28, 3, 1, true, 28, 1, 1, "same keeps the size"},
		{5, 3, 2, true, 3, 1, 1, "odd input, stride 2"},
		{6, 3, 2, true, 3, 0, 1, "even input, stride 2: the extra row at the bottom"},
		{5, 2, 2, true, 3, 0, 1, "MaxPool2D 2x2 same on 5"},
		{7, 2, 2, false, 3, 0, 0, "valid 2x2 on 7"},
		{4, 4, 1, true, 4, 1, 2, "even window: pad 3 = 1 top + 2 bottom"},
		{4, 5, 1, true, 4, 2, 2, "window larger than the input"},
		{1, 3, 1, true, 1, 1, 1, "1 row"},
		{2, 5, 1, false, 0, 0, 0, "valid window larger than the input: empty"},
		{224, 7, 2, true, 112, 2, 3, "ResNet stem"},
		{0, 3, 2, true, 0, 0, 0, "empty input"},
	}
	for _, tc := range tests {
		pad := "valid"
		if tc.same {
			pad = "same"
		}
		t.Run(fmt.Sprintf("%d/k%d/s%d/%s", tc.h, tc.k, tc.s, pad), func(t *testing.T) {
			// The dimension under test is the height; the width gets a
			// different window and stride so the two cannot be confused.
			g := kernels.NewConvGeom(2, tc.h, 9, 3, tc.k, 2, tc.s, 1, tc.same)
			if g.OH != tc.out || g.PadTop != tc.top || g.PadBottom() != tc.bottom {
				t.Errorf("%s: got OH=%d PadTop=%d PadBottom=%d, want %d %d %d", tc.tfExample, g.OH, g.PadTop, g.PadBottom(), tc.out, tc.top, tc.bottom)
			}
			wantOW, wantLeft, wantRight := 8, 0, 0
			if tc.same {
				wantOW, wantRight = 9, 1
			}
			if g.OW != wantOW || g.PadLeft != wantLeft || g.PadRight() != wantRight {
				t.Errorf("width: got OW=%d PadLeft=%d PadRight=%d, want %d %d %d", g.OW, g.PadLeft, g.PadRight(), wantOW, wantLeft, wantRight)
			}
			// Transposing the geometry gives the same numbers for the width.
			gt := kernels.NewConvGeom(2, 9, tc.h, 3, 2, tc.k, 1, tc.s, tc.same)
			if gt.OW != tc.out || gt.PadLeft != tc.top || gt.PadRight() != tc.bottom {
				t.Errorf("transposed: got OW=%d PadLeft=%d PadRight=%d, want %d %d %d", gt.OW, gt.PadLeft, gt.PadRight(), tc.out, tc.top, tc.bottom)
			}
			if got, want := g.Im2ColSize(3), 3*g.OH*g.OW*tc.k*2*3; got != want {
				t.Errorf("Im2ColSize(3) = %d, want %d", got, want)
			}
		})
	}
}

func TestConv2DNaive(t *testing.T) {
	r := rng(21)
	for _, tc := range convCases {
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			x := testutil.RandFloats(r, g.N*g.H*g.W*g.C)
			w := testutil.RandFloats(r, g.KH*g.KW*g.C*tc.f)
			dy := testutil.RandFloats(r, g.N*g.OH*g.OW*tc.f)
			wantY := naiveConv(x, w, g, tc.f)
			wantDX, wantDW := naiveConvGrads(x, w, dy, g, tc.f)
			var firstY, firstDX, firstDW []float64
			for name, size := range workspaces(g) {
				work := testutil.RandFloats(r, size) // stale contents must not matter
				y := kernels.Conv2D(testutil.RandFloats(r, len(wantY)), x, w, work, g, tc.f)
				testutil.RequireClose(t, name+" Conv2D", y, wantY, 1e-12, 1e-13)
				dx := kernels.Conv2DBackpropInput(testutil.RandFloats(r, len(x)), dy, w, work, g, tc.f)
				testutil.RequireClose(t, name+" Conv2DBackpropInput", dx, wantDX, 1e-12, 1e-13)
				dw := kernels.Conv2DBackpropFilter(testutil.RandFloats(r, len(w)), x, dy, work, g, tc.f)
				testutil.RequireClose(t, name+" Conv2DBackpropFilter", dw, wantDW, 1e-12, 1e-13)
				if firstY == nil {
					firstY, firstDX, firstDW = y, dx, dw
					continue
				}
				// The chunk size changes no operation's order: results are identical.
				testutil.RequireClose(t, name+" Conv2D vs other workspace", y, firstY, 0, 0)
				testutil.RequireClose(t, name+" Conv2DBackpropInput vs other workspace", dx, firstDX, 0, 0)
				testutil.RequireClose(t, name+" Conv2DBackpropFilter vs other workspace", dw, firstDW, 0, 0)
			}
		})
	}
}

func TestConv2DFloat32(t *testing.T) {
	r := rng(22)
	for _, tc := range convCases {
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			x := testutil.RandFloat32s(r, g.N*g.H*g.W*g.C)
			w := testutil.RandFloat32s(r, g.KH*g.KW*g.C*tc.f)
			dy := testutil.RandFloat32s(r, g.N*g.OH*g.OW*tc.f)
			x64, w64, dy64 := testutil.ToFloat64s(x), testutil.ToFloat64s(w), testutil.ToFloat64s(dy)
			wantDX, wantDW := naiveConvGrads(x64, w64, dy64, g, tc.f)
			work := make([]float32, g.Im2ColSize(2))
			// Sums of at most a few hundred products of values in [-1, 1).
			const rtol, atol = 1e-5, 1e-5
			y := kernels.Conv2D(make([]float32, len(dy)), x, w, work, g, tc.f)
			testutil.RequireClose(t, "Conv2D", testutil.ToFloat64s(y), naiveConv(x64, w64, g, tc.f), rtol, atol)
			dx := kernels.Conv2DBackpropInput(make([]float32, len(x)), dy, w, work, g, tc.f)
			testutil.RequireClose(t, "Conv2DBackpropInput", testutil.ToFloat64s(dx), wantDX, rtol, atol)
			dw := kernels.Conv2DBackpropFilter(make([]float32, len(w)), x, dy, work, g, tc.f)
			testutil.RequireClose(t, "Conv2DBackpropFilter", testutil.ToFloat64s(dw), wantDW, rtol, atol)
		})
	}
}

// TestConv2DSameIsPaddedValid checks the padding explicitly: a same
// convolution equals a valid one over the input with PadTop, PadBottom,
// PadLeft and PadRight zero rows and columns written out.
func TestConv2DSameIsPaddedValid(t *testing.T) {
	r := rng(23)
	for _, tc := range convCases {
		if !tc.same {
			continue
		}
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			top, bottom, left, right := g.PadTop, g.PadBottom(), g.PadLeft, g.PadRight()
			hp, wp := g.H+top+bottom, g.W+left+right
			x := testutil.RandFloats(r, g.N*g.H*g.W*g.C)
			xp := make([]float64, g.N*hp*wp*g.C)
			for n := 0; n < g.N; n++ {
				for i := 0; i < g.H; i++ {
					for j := 0; j < g.W; j++ {
						for c := 0; c < g.C; c++ {
							xp[at4(n, i+top, j+left, c, hp, wp, g.C)] = x[at4(n, i, j, c, g.H, g.W, g.C)]
						}
					}
				}
			}
			gv := kernels.NewConvGeom(g.N, hp, wp, g.C, g.KH, g.KW, g.SH, g.SW, false)
			if gv.OH != g.OH || gv.OW != g.OW {
				t.Fatalf("valid over padded input: got %dx%d outputs, want %dx%d", gv.OH, gv.OW, g.OH, g.OW)
			}
			w := testutil.RandFloats(r, g.KH*g.KW*g.C*tc.f)
			got := kernels.Conv2D(make([]float64, g.N*g.OH*g.OW*tc.f), x, w, make([]float64, g.Im2ColSize(1)), g, tc.f)
			want := kernels.Conv2D(make([]float64, len(got)), xp, w, make([]float64, gv.Im2ColSize(1)), gv, tc.f)
			testutil.RequireClose(t, "same vs padded valid", got, want, 1e-12, 1e-13)
		})
	}
}

// TestConv2DAdjoint checks <Conv2D(x, w), dy> == <x, BackpropInput(dy, w)>
// == <w, BackpropFilter(x, dy)>: the convolution is bilinear, so all three
// are the same sum of products x·w·dy.
func TestConv2DAdjoint(t *testing.T) {
	r := rng(24)
	for _, tc := range convCases {
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			x := testutil.RandFloats(r, g.N*g.H*g.W*g.C)
			w := testutil.RandFloats(r, g.KH*g.KW*g.C*tc.f)
			dy := testutil.RandFloats(r, g.N*g.OH*g.OW*tc.f)
			work := make([]float64, g.Im2ColSize(1))
			y := kernels.Conv2D(make([]float64, len(dy)), x, w, work, g, tc.f)
			dx := kernels.Conv2DBackpropInput(make([]float64, len(x)), dy, w, work, g, tc.f)
			dw := kernels.Conv2DBackpropFilter(make([]float64, len(w)), x, dy, work, g, tc.f)
			fwd, in, filt := dotF(y, dy), dotF(x, dx), dotF(w, dw)
			scale := math.Max(dotAbs(y, dy), 1e-300)
			if math.Abs(fwd-in) > 1e-12*scale || math.Abs(fwd-filt) > 1e-12*scale {
				t.Errorf("got <y,dy> = %.17g, <x,dx> = %.17g, <w,dw> = %.17g, want all equal (rel 1e-12 of %.3g)", fwd, in, filt, scale)
			}
		})
	}
}

func dotF(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// dotAbs returns Σ |a·b|, the scale of the rounding error in dotF.
func dotAbs(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += math.Abs(a[i] * b[i])
	}
	return s
}

// TestConv2DNumericGrad checks both backward passes against central
// differences of L = Σ dy·Conv2D(x, w).
func TestConv2DNumericGrad(t *testing.T) {
	r := rng(25)
	for _, tc := range []convCase{{2, 5, 4, 3, 3, 2, 2, 1, true, 2}, {1, 6, 5, 2, 2, 3, 1, 2, false, 3}} {
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			x := testutil.RandFloats(r, g.N*g.H*g.W*g.C)
			w := testutil.RandFloats(r, g.KH*g.KW*g.C*tc.f)
			dy := testutil.RandFloats(r, g.N*g.OH*g.OW*tc.f)
			work := make([]float64, g.Im2ColSize(1))
			y := make([]float64, len(dy))
			lossX := func(v []float64) float64 { return dotF(kernels.Conv2D(y, v, w, work, g, tc.f), dy) }
			lossW := func(v []float64) float64 { return dotF(kernels.Conv2D(y, x, v, work, g, tc.f), dy) }
			dx := kernels.Conv2DBackpropInput(make([]float64, len(x)), dy, w, work, g, tc.f)
			dw := kernels.Conv2DBackpropFilter(make([]float64, len(w)), x, dy, work, g, tc.f)
			if e := testutil.RelErr(dx, testutil.NumericGrad(lossX, x, 1e-6)); e > 1e-6 {
				t.Errorf("dx: got relative error %.3g against central differences, want <= 1e-6", e)
			}
			if e := testutil.RelErr(dw, testutil.NumericGrad(lossW, w, 1e-6)); e > 1e-6 {
				t.Errorf("dfilter: got relative error %.3g against central differences, want <= 1e-6", e)
			}
		})
	}
}

// TestConv2DEmpty covers zero-sized dimensions: nothing to read, and the
// overwritten outputs are zero.
func TestConv2DEmpty(t *testing.T) {
	for _, tc := range []convCase{
		{0, 5, 5, 3, 3, 3, 1, 1, true, 2},  // no images
		{2, 5, 5, 0, 3, 3, 1, 1, true, 2},  // no input channels
		{2, 2, 5, 3, 3, 3, 1, 1, false, 2}, // window taller than the input: no output rows
		{2, 5, 5, 3, 3, 3, 1, 1, true, 0},  // no output channels
	} {
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			x := make([]float64, g.N*g.H*g.W*g.C)
			for i := range x {
				x[i] = 1
			}
			y := make([]float64, g.N*g.OH*g.OW*tc.f)
			w := make([]float64, g.KH*g.KW*g.C*tc.f)
			for i := range y {
				y[i] = 7
			}
			for i := range w {
				w[i] = 7
			}
			work := make([]float64, g.Im2ColSize(1)) // empty unless f is the only zero
			got := kernels.Conv2D(y, x, w, work, g, tc.f)
			testutil.RequireClose(t, "Conv2D", got, make([]float64, len(got)), 0, 0)
			dx := kernels.Conv2DBackpropInput(x, y, w, work, g, tc.f)
			testutil.RequireClose(t, "Conv2DBackpropInput", dx, make([]float64, len(dx)), 0, 0)
			dw := kernels.Conv2DBackpropFilter(w, make([]float64, len(x)), y, work, g, tc.f)
			testutil.RequireClose(t, "Conv2DBackpropFilter", dw, make([]float64, len(dw)), 0, 0)
		})
	}
}

func TestConv2DPanics(t *testing.T) {
	g := kernels.NewConvGeom(2, 5, 5, 3, 3, 3, 1, 1, true)
	const f = 4
	x, w := make([]float64, 2*5*5*3), make([]float64, 3*3*3*f)
	y, work := make([]float64, 2*5*5*f), make([]float64, g.Im2ColSize(1))
	bad := g
	bad.PadTop = 3 // the first window lies wholly in the padding
	neg := g
	neg.SH = 0
	tests := []struct {
		name, want string
		f          func()
	}{
		{"short x", "Conv2D: len(x)", func() { kernels.Conv2D(y, x[1:], w, work, g, f) }},
		{"short filter", "Conv2D: len(filter)", func() { kernels.Conv2D(y, x, w[1:], work, g, f) }},
		{"short dst", "Conv2D: len(dst)", func() { kernels.Conv2D(y[1:], x, w, work, g, f) }},
		{"short work", "Conv2D: len(work)", func() { kernels.Conv2D(y, x, w, work[1:], g, f) }},
		{"negative f", "Conv2D: negative output channels", func() { kernels.Conv2D(y, x, w, work, g, -1) }},
		{"window in padding", "wholly in the padding", func() { kernels.Conv2D(y, x, w, work, bad, f) }},
		{"zero stride", "Conv2D: invalid geometry", func() { kernels.Conv2D(y, x, w, work, neg, f) }},
		{"input short dx", "Conv2DBackpropInput: len(dx)", func() { kernels.Conv2DBackpropInput(x[1:], y, w, work, g, f) }},
		{"input short dy", "Conv2DBackpropInput: len(dy)", func() { kernels.Conv2DBackpropInput(x, y[1:], w, work, g, f) }},
		{"input short work", "Conv2DBackpropInput: len(work)", func() { kernels.Conv2DBackpropInput(x, y, w, work[1:], g, f) }},
		{"filter short dfilter", "Conv2DBackpropFilter: len(dfilter)", func() { kernels.Conv2DBackpropFilter(w[1:], x, y, work, g, f) }},
		{"filter short work", "Conv2DBackpropFilter: len(work)", func() { kernels.Conv2DBackpropFilter(w, x, y, work[1:], g, f) }},
		{"geom negative size", "NewConvGeom: negative input size", func() { kernels.NewConvGeom(1, -1, 5, 3, 3, 3, 1, 1, false) }},
		{"geom zero stride", "NewConvGeom: window 3x3, strides 1x0", func() { kernels.NewConvGeom(1, 5, 5, 3, 3, 3, 1, 0, false) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { mustPanic(t, tc.want, tc.f) })
	}
}

func TestConv2DAllocs(t *testing.T) {
	g := kernels.NewConvGeom(3, 7, 6, 3, 3, 2, 2, 1, true)
	const f = 5
	x, w := make([]float32, g.N*g.H*g.W*g.C), make([]float32, g.KH*g.KW*g.C*f)
	y, work := make([]float32, g.N*g.OH*g.OW*f), make([]float32, g.Im2ColSize(2))
	for name, run := range map[string]func(){
		"Conv2D":               func() { kernels.Conv2D(y, x, w, work, g, f) },
		"Conv2DBackpropInput":  func() { kernels.Conv2DBackpropInput(x, y, w, work, g, f) },
		"Conv2DBackpropFilter": func() { kernels.Conv2DBackpropFilter(w, x, y, work, g, f) },
	} {
		if a := testing.AllocsPerRun(20, run); a != 0 {
			t.Errorf("AllocsPerRun(%s) = %v, want 0", name, a)
		}
	}
}

// benchConv times one pass of a stride-1 valid k×k convolution in float32
// over a batch of n [h, w, c] images with f filters, the workspace holding
// the whole batch, and reports GFLOP/s counting 2·N·OH·OW·K·K·C·F flops (a
// multiply and an add per product; the same count for all three passes).
func benchConv(b *testing.B, pass string, n, h, w, c, k, f int) {
	g := kernels.NewConvGeom(n, h, w, c, k, k, 1, 1, false)
	r := rng(26)
	x := testutil.RandFloat32s(r, n*h*w*c)
	filt := testutil.RandFloat32s(r, k*k*c*f)
	y := testutil.RandFloat32s(r, n*g.OH*g.OW*f)
	work := make([]float32, g.Im2ColSize(n))
	var run func()
	switch pass {
	case "forward":
		run = func() { kernels.Conv2D(y, x, filt, work, g, f) }
	case "input":
		run = func() { kernels.Conv2DBackpropInput(x, y, filt, work, g, f) }
	case "filter":
		run = func() { kernels.Conv2DBackpropFilter(filt, x, y, work, g, f) }
	}
	flops := 2 * float64(n*g.OH*g.OW) * float64(k*k*c*f)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkConv2D runs the reference cnn's two convolutions at batch 128.
// Each pass takes up to about a second: run with -benchtime=2x.
func BenchmarkConv2D(b *testing.B) {
	for _, pass := range []string{"forward", "input", "filter"} {
		b.Run("28x28x1-3x3x32/"+pass, func(b *testing.B) { benchConv(b, pass, 128, 28, 28, 1, 3, 32) })
		b.Run("26x26x32-3x3x64/"+pass, func(b *testing.B) { benchConv(b, pass, 128, 26, 26, 32, 3, 64) })
	}
}
