package kernels_test

import (
	"fmt"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// TestConvDirect checks the direct float32 convolution (forward, the
// input gradient at stride 1, the filter gradient) against the definition, over output widths
// that use every tile height, padding on every side, strides 1 and 2, odd
// and 16-multiple channel counts and 16, 32 or 48 filters; and that the
// kernels agree with the im2col path.
func TestConvDirect(t *testing.T) {
	r := rng(41)
	cases := []convCase{
		{2, 9, 27, 16, 3, 3, 1, 1, true, 16},
		{3, 7, 13, 1, 3, 3, 1, 1, true, 32},
		{2, 8, 11, 3, 3, 2, 2, 2, true, 48},
		{2, 10, 10, 16, 3, 3, 2, 2, false, 16},
		{1, 6, 31, 32, 1, 1, 1, 1, false, 64},
		{2, 6, 6, 20, 5, 5, 1, 1, true, 32},
		{1, 4, 3, 16, 5, 4, 1, 1, true, 16},
		{2, 5, 7, 16, 3, 3, 1, 1, false, 16},
		{3, 9, 9, 12, 3, 3, 2, 2, true, 32},
		{2, 7, 5, 28, 2, 3, 1, 2, true, 48},
	}
	for _, tc := range cases {
		t.Run(tc.String(), func(t *testing.T) {
			g := tc.geom()
			x := testutil.RandFloats(r, g.N*g.H*g.W*g.C)
			w := testutil.RandFloats(r, g.KH*g.KW*g.C*tc.f)
			dy := testutil.RandFloats(r, g.N*g.OH*g.OW*tc.f)
			wantY := naiveConv(x, w, g, tc.f)
			wantDX, wantDW := naiveConvGrads(x, w, dy, g, tc.f)
			work := make([]float32, g.Im2ColSize(g.N)+g.KH*g.KW*g.C*tc.f)
			y := kernels.Conv2D(f32(testutil.RandFloats(r, len(wantY))), f32(x), f32(w), work, g, tc.f)
			testutil.RequireClose(t, "direct Conv2D", f64s(y), wantY, 1e-5, 1e-5)
			dx := kernels.Conv2DBackpropInput(f32(testutil.RandFloats(r, len(x))), f32(dy), f32(w), work, g, tc.f)
			testutil.RequireClose(t, "Conv2DBackpropInput", f64s(dx), wantDX, 1e-5, 1e-5)
			dw := kernels.Conv2DBackpropFilter(f32(testutil.RandFloats(r, len(w))), f32(x), f32(dy), work, g, tc.f)
			testutil.RequireClose(t, "Conv2DBackpropFilter", f64s(dw), wantDW, 1e-5, 1e-4)
			restore := kernels.SetDirectConv(false)
			yi := kernels.Conv2D(make([]float32, len(wantY)), f32(x), f32(w), work, g, tc.f)
			restore()
			testutil.RequireClose(t, "direct vs im2col", f64s(y), f64s(yi), 1e-5, 1e-6)
		})
	}
}

// TestConvDirectThreads: the direct tiles give the same bits on one
// thread and on two.
func TestConvDirectThreads(t *testing.T) {
	defer kernels.SetThreads(kernels.Threads())
	tc := convCase{5, 12, 14, 16, 3, 3, 1, 1, true, 32}
	g := tc.geom()
	r := rng(2)
	x, w := f32(testutil.RandFloats(r, g.N*g.H*g.W*g.C)), f32(testutil.RandFloats(r, 9*g.C*tc.f))
	work := make([]float32, g.Im2ColSize(1)+9*g.C*tc.f)
	dy := f32(testutil.RandFloats(r, g.N*g.OH*g.OW*tc.f))
	var outs, dws [2][]float32
	for i, threads := range []int{1, 2} {
		kernels.SetThreads(threads)
		outs[i] = kernels.Conv2D(make([]float32, g.N*g.OH*g.OW*tc.f), x, w, work, g, tc.f)
		dws[i] = kernels.Conv2DBackpropFilter(make([]float32, len(w)), x, dy, work, g, tc.f)
	}
	for i := range outs[0] {
		if outs[0][i] != outs[1][i] {
			t.Fatalf("element %d: %v on 2 threads, %v on 1", i, outs[1][i], outs[0][i])
		}
	}
	for i := range dws[0] {
		if dws[0][i] != dws[1][i] {
			t.Fatalf("filter gradient element %d: %v on 2 threads, %v on 1", i, dws[1][i], dws[0][i])
		}
	}
}

func BenchmarkConvDirect(b *testing.B) {
	for _, tc := range []struct {
		name string
		c    convCase
	}{
		{"28x28x16-16", convCase{128, 28, 28, 16, 3, 3, 1, 1, true, 16}},
		{"14x14x32-32", convCase{128, 14, 14, 32, 3, 3, 1, 1, true, 32}},
		{"7x7x64-64", convCase{128, 7, 7, 64, 3, 3, 1, 1, true, 64}},
	} {
		for _, direct := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/direct=%v", tc.name, direct), func(b *testing.B) {
				defer kernels.SetDirectConv(direct)()
				g := tc.c.geom()
				x := make([]float32, g.N*g.H*g.W*g.C)
				w := make([]float32, 9*g.C*tc.c.f)
				y := make([]float32, g.N*g.OH*g.OW*tc.c.f)
				work := make([]float32, g.Im2ColSize(min(g.N, (8<<20)/4/g.Im2ColSize(1))))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					kernels.Conv2D(y, x, w, work, g, tc.c.f)
				}
				b.ReportMetric(2*float64(g.N*g.OH*g.OW*9*g.C*tc.c.f)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GF/s")
			})
		}
	}
}
