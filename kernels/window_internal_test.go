package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestCol2imRows checks col2im, whose interior windows go through
// col2imRowSIMD where the CPU runs it, bit for bit against col2imWindow
// over every window in order, for same and valid padding, strides, and
// rows that are and are not whole multiples of sixteen floats.
func TestCol2imRows(t *testing.T) {
	for _, tc := range []struct{ n, h, w, c, kh, kw, sh, sw int }{
		{2, 8, 9, 32, 3, 3, 1, 1},
		{2, 7, 8, 5, 3, 3, 1, 1},
		{1, 9, 10, 16, 3, 2, 2, 3},
		{2, 6, 6, 1, 3, 3, 1, 1},
		{1, 5, 11, 7, 2, 4, 1, 2},
	} {
		for _, same := range []bool{false, true} {
			g := NewConvGeom(tc.n, tc.h, tc.w, tc.c, tc.kh, tc.kw, tc.sh, tc.sw, same)
			t.Run(fmt.Sprintf("%+v/same=%v", tc, same), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(tc.c), uint64(tc.w)))
				k := g.KH * g.KW * g.C
				cols := make([]float32, g.N*g.OH*g.OW*k)
				for i := range cols {
					cols[i] = float32(r.NormFloat64())
				}
				got := make([]float32, g.N*g.H*g.W*g.C)
				col2im(got, cols, g, 0, g.N)
				want := make([]float32, len(got))
				row := 0
				for n := 0; n < g.N; n++ {
					di := want[n*g.H*g.W*g.C : (n+1)*g.H*g.W*g.C]
					for oh := 0; oh < g.OH; oh++ {
						ih0 := oh*g.SH - g.PadTop
						kh0, kh1 := window(ih0, g.KH, g.H)
						for ow := 0; ow < g.OW; ow++ {
							if kh0 < kh1 {
								col2imWindow(di, cols[row*k:(row+1)*k], g, ih0, kh0, kh1, ow*g.SW-g.PadLeft)
							}
							row++
						}
					}
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("dx[%d]: got %v, want %v", i, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestConv2DPackedFromImage checks Conv2D in float32, whose product packs
// its A panels straight from x (packIm2col) where window rows hold 16
// floats or more, bit for bit against the im2col matrix multiplied by Sgemm,
// on geometries whose micro-panels lie in one output row, straddle output
// rows, or touch the padding.
func TestConv2DPackedFromImage(t *testing.T) {
	defer WithoutExternalSgemm()() // the openblas tag's products are not packed from the image
	for _, tc := range []struct {
		n, h, w, c, kh, kw, sh, sw, f int
		same                          bool
	}{
		{3, 26, 26, 32, 3, 3, 1, 1, 64, false},
		{2, 9, 15, 16, 3, 3, 1, 1, 40, false},
		{2, 11, 13, 7, 3, 3, 2, 2, 33, true},
		{2, 8, 10, 5, 2, 4, 1, 2, 17, true},
		{2, 9, 30, 8, 3, 3, 2, 2, 24, false},
	} {
		g := NewConvGeom(tc.n, tc.h, tc.w, tc.c, tc.kh, tc.kw, tc.sh, tc.sw, tc.same)
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.c), uint64(tc.f)))
			rnd := func(n int) []float32 {
				s := make([]float32, n)
				for i := range s {
					s[i] = float32(r.NormFloat64())
				}
				return s
			}
			x, filter := rnd(g.N*g.H*g.W*g.C), rnd(g.KH*g.KW*g.C*tc.f)
			k, rows := g.KH*g.KW*g.C, g.N*g.OH*g.OW
			got := Conv2D(make([]float32, rows*tc.f), x, filter, make([]float32, g.Im2ColSize(1)), g, tc.f)
			cols := make([]float32, rows*k)
			im2col(cols, x, g, 0, g.N)
			want := Sgemm(make([]float32, rows*tc.f), cols, filter, rows, tc.f, k, false, false, false)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("y[%d]: got %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
}

// TestConvPackedFromImageSameBits checks that Conv2D and
// Conv2DBackpropFilter give the same bits with their A panels packed
// straight from the image (packFromImage) as through the im2col matrix, on
// one and two threads, where the filter gradient's panels qualify (no
// padding, window rows and K multiples of twelve) and where they do not.
func TestConvPackedFromImageSameBits(t *testing.T) {
	defer func(old bool) { packFromImage = old }(packFromImage)
	defer SetThreads(Threads())
	for _, tc := range []struct{ n, h, w, c, kh, kw, sh, sw, f int }{
		{4, 26, 26, 32, 3, 3, 1, 1, 64},
		{3, 15, 29, 4, 3, 3, 2, 2, 24},
		{3, 12, 12, 8, 2, 3, 1, 1, 16},
	} {
		g := NewConvGeom(tc.n, tc.h, tc.w, tc.c, tc.kh, tc.kw, tc.sh, tc.sw, false)
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.c), 9))
			rnd := func(n int) []float32 {
				s := make([]float32, n)
				for i := range s {
					s[i] = float32(r.NormFloat64())
				}
				return s
			}
			x, dy := rnd(g.N*g.H*g.W*g.C), rnd(g.N*g.OH*g.OW*tc.f)
			filter := rnd(g.KH * g.KW * g.C * tc.f)
			work := make([]float32, g.Im2ColSize(2))
			run := func(direct bool, threads int) ([]float32, []float32) {
				packFromImage = direct
				SetThreads(threads)
				y := Conv2D(make([]float32, len(dy)), x, filter, work, g, tc.f)
				df := Conv2DBackpropFilter(make([]float32, len(filter)), x, dy, work, g, tc.f)
				return y, df
			}
			wantY, wantDF := run(false, 1)
			for _, threads := range []int{1, 2} {
				y, df := run(true, threads)
				for i := range wantY {
					if math.Float32bits(y[i]) != math.Float32bits(wantY[i]) {
						t.Fatalf("Conv2D on %d threads, y[%d]: got %v, want %v", threads, i, y[i], wantY[i])
					}
				}
				for i := range wantDF {
					if math.Float32bits(df[i]) != math.Float32bits(wantDF[i]) {
						t.Fatalf("Conv2DBackpropFilter on %d threads, dfilter[%d]: got %v, want %v", threads, i, df[i], wantDF[i])
					}
				}
			}
		})
	}
}
