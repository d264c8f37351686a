package kernels_test

import (
	"fmt"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// naiveGeneralConv is the definition of a dilated, grouped convolution:
// y[n, oh, ow, f] = Σ_{kh, kw, c'} x[n, oh·SH-PadTop+kh·DH, ow·SW-PadLeft+kw·DW, grp·C/G+c']·w[kh, kw, c', f]
// with grp = f / (F/G), and its gradients from the same loops.
func naiveGeneralConv(x, w, dy []float64, g kernels.ConvGeom, f int) (y, dx, dw []float64) {
	dh, dwd, gr := max(g.DH, 1), max(g.DW, 1), max(g.Groups, 1)
	cg, fg := g.C/gr, f/gr
	y, dx, dw = make([]float64, g.N*g.OH*g.OW*f), make([]float64, len(x)), make([]float64, len(w))
	for n := 0; n < g.N; n++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				for o := 0; o < f; o++ {
					yi := at4(n, oh, ow, o, g.OH, g.OW, f)
					for kh := 0; kh < g.KH; kh++ {
						for kw := 0; kw < g.KW; kw++ {
							for c := 0; c < cg; c++ {
								ih, iw := oh*g.SH-g.PadTop+kh*dh, ow*g.SW-g.PadLeft+kw*dwd
								if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
									continue
								}
								xi := at4(n, ih, iw, o/fg*cg+c, g.H, g.W, g.C)
								wi := at4(kh, kw, c, o, g.KW, cg, f)
								y[yi] += x[xi] * w[wi]
								dx[xi] += dy[yi] * w[wi]
								dw[wi] += dy[yi] * x[xi]
							}
						}
					}
				}
			}
		}
	}
	return y, dx, dw
}

type generalCase struct {
	n, h, w, c, kh, kw, sh, sw, dh, dw, groups int
	same                                       bool
	f                                          int
}

func (tc generalCase) geom() kernels.ConvGeom {
	return kernels.NewConvGeneralGeom(tc.n, tc.h, tc.w, tc.c, tc.kh, tc.kw, tc.sh, tc.sw, tc.dh, tc.dw, tc.groups, tc.same)
}

func (tc generalCase) String() string {
	pad := "valid"
	if tc.same {
		pad = "same"
	}
	return fmt.Sprintf("%dx%dx%dx%d/k%dx%d/s%dx%d/d%dx%d/g%d/%s/f%d", tc.n, tc.h, tc.w, tc.c, tc.kh, tc.kw, tc.sh, tc.sw, tc.dh, tc.dw, tc.groups, pad, tc.f)
}

// generalCases: dilation alone (both paddings, unequal rates), groups alone
// (with and without strides), depthwise with multipliers 1 and 2, strides
// and dilation, and a window whose dilated extent exceeds the input.
var generalCases = []generalCase{
	{2, 7, 8, 3, 3, 2, 1, 1, 2, 1, 1, true, 4},
	{3, 9, 7, 2, 2, 3, 1, 1, 3, 2, 1, false, 5},
	{2, 5, 6, 4, 3, 3, 2, 2, 1, 1, 2, true, 6},
	{3, 6, 5, 6, 1, 2, 1, 1, 1, 1, 3, false, 3},
	{3, 5, 5, 3, 3, 3, 1, 1, 1, 1, 3, true, 6},
	{2, 7, 6, 4, 3, 3, 2, 2, 1, 1, 4, true, 4},
	{2, 6, 6, 2, 3, 3, 1, 1, 2, 2, 2, true, 2},
	{1, 3, 4, 2, 3, 3, 1, 1, 2, 2, 2, true, 4},
	{2, 8, 8, 4, 3, 3, 1, 1, 2, 2, 2, false, 6},
}

func TestConvGeneralNaive(t *testing.T) {
	r := rng(31)
	for _, tc := range generalCases {
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			if !g.General() {
				t.Fatalf("geometry %+v is not general", g)
			}
			x := testutil.RandFloats(r, g.N*g.H*g.W*g.C)
			w := testutil.RandFloats(r, g.KH*g.KW*(g.C/tc.groups)*tc.f)
			dy := testutil.RandFloats(r, g.N*g.OH*g.OW*tc.f)
			wantY, wantDX, wantDW := naiveGeneralConv(x, w, dy, g, tc.f)
			for _, images := range []int{1, 2, g.N + 1} {
				name := fmt.Sprintf("work=%d", images)
				work := testutil.RandFloats(r, kernels.ConvGeneralWork(g, tc.f, images)) // stale contents must not matter
				y := kernels.Conv2D(testutil.RandFloats(r, len(wantY)), x, w, work, g, tc.f)
				testutil.RequireClose(t, name+" Conv2D", y, wantY, 1e-12, 1e-13)
				dx := kernels.Conv2DBackpropInput(testutil.RandFloats(r, len(x)), dy, w, work, g, tc.f)
				testutil.RequireClose(t, name+" Conv2DBackpropInput", dx, wantDX, 1e-12, 1e-13)
				dw := kernels.Conv2DBackpropFilter(testutil.RandFloats(r, len(w)), x, dy, work, g, tc.f)
				testutil.RequireClose(t, name+" Conv2DBackpropFilter", dw, wantDW, 1e-12, 1e-13)
			}
			// float32, through the products on the worker pool
			work := make([]float32, kernels.ConvGeneralWork(g, tc.f, 2))
			y := kernels.Conv2D(make([]float32, len(wantY)), f32(x), f32(w), work, g, tc.f)
			testutil.RequireClose(t, "float32 Conv2D", f64s(y), wantY, 1e-5, 1e-5)
			dw := kernels.Conv2DBackpropFilter(make([]float32, len(w)), f32(x), f32(dy), work, g, tc.f)
			testutil.RequireClose(t, "float32 Conv2DBackpropFilter", f64s(dw), wantDW, 1e-5, 1e-5)
		})
	}
}

// TestDepthwiseThreads checks the depthwise kernels give the same bits on
// one thread and on two.
func TestDepthwiseThreads(t *testing.T) {
	defer kernels.SetThreads(kernels.Threads())
	tc := generalCase{5, 9, 9, 8, 3, 3, 1, 1, 1, 1, 8, true, 16}
	g := tc.geom()
	r := rng(5)
	x := f32(testutil.RandFloats(r, g.N*g.H*g.W*g.C))
	w := f32(testutil.RandFloats(r, g.KH*g.KW*tc.f))
	dy := f32(testutil.RandFloats(r, g.N*g.OH*g.OW*tc.f))
	run := func(threads int) (y, dx, dw []float32) {
		kernels.SetThreads(threads)
		work := make([]float32, kernels.ConvGeneralWork(g, tc.f, 1))
		y = kernels.Conv2D(make([]float32, g.N*g.OH*g.OW*tc.f), x, w, work, g, tc.f)
		dx = kernels.Conv2DBackpropInput(make([]float32, len(x)), dy, w, work, g, tc.f)
		dw = kernels.Conv2DBackpropFilter(make([]float32, len(w)), x, dy, work, g, tc.f)
		return y, dx, dw
	}
	y1, dx1, dw1 := run(1)
	y2, dx2, dw2 := run(2)
	for _, p := range []struct {
		name string
		a, b []float32
	}{{"Conv2D", y1, y2}, {"Conv2DBackpropInput", dx1, dx2}, {"Conv2DBackpropFilter", dw1, dw2}} {
		for i := range p.a {
			if p.a[i] != p.b[i] {
				t.Fatalf("%s element %d: got %v on 2 threads, want %v as on 1", p.name, i, p.b[i], p.a[i])
			}
		}
	}
}

func TestNewConvGeneralGeom(t *testing.T) {
	// Keras: Conv2D(kernel_size=3, dilation_rate=2, padding="same") keeps
	// the size and pads 2 each side; "valid" loses 4.
	tests := []struct {
		h, k, s, d int
		same       bool
		out, top   int
	}{
		{28, 3, 1, 2, true, 28, 2},
		{28, 3, 1, 2, false, 24, 0},
		{10, 3, 1, 4, false, 2, 0},
		{9, 2, 1, 3, true, 9, 1},
		{6, 3, 2, 1, true, 3, 0},
	}
	for _, tc := range tests {
		g := kernels.NewConvGeneralGeom(1, tc.h, 5, 2, tc.k, 1, tc.s, 1, tc.d, 1, 2, tc.same)
		if g.OH != tc.out || g.PadTop != tc.top || g.KH != tc.k {
			t.Errorf("h=%d k=%d s=%d d=%d same=%v: got OH=%d PadTop=%d KH=%d, want %d %d %d", tc.h, tc.k, tc.s, tc.d, tc.same, g.OH, g.PadTop, g.KH, tc.out, tc.top, tc.k)
		}
	}
	if g := kernels.NewConvGeneralGeom(1, 5, 5, 2, 3, 3, 1, 1, 1, 1, 1, true); g.General() {
		t.Errorf("a plain convolution is general: %+v", g)
	}
}

func f64s(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}
