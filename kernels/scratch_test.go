package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// poison fills the scratch memory with NaN so that a test can see whether a
// product packed into it.
func poison(buf []byte) {
	for i := 0; i+4 <= len(buf); i += 4 {
		buf[i], buf[i+1], buf[i+2], buf[i+3] = 0xff, 0xff, 0xc0, 0x7f // a NaN
	}
}

func touched(buf []byte) bool {
	for i := 0; i+4 <= len(buf); i += 4 {
		if buf[i] != 0xff || buf[i+1] != 0xff || buf[i+2] != 0xc0 || buf[i+3] != 0x7f {
			return true
		}
	}
	return false
}

// TestScratchHoldsWhatPackFloatsSays: a product packs into its pool's
// Scratch of exactly PackFloats per thread (its memory is written, the
// result is the same bits as with the pool's own buffers, nothing is
// allocated); with one float less per thread it does not touch the Scratch
// and packs into buffers of its own, with the same result.
func TestScratchHoldsWhatPackFloatsSays(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, sz := range [][3]int{{1, 1, 1}, {7, 33, 5}, {130, 70, 600}, {1100, 40, 40}, {64, 1023, 513}} {
		m, n, k := sz[0], sz[1], sz[2]
		a, b := randSlice(r, m*k), randSlice(r, k*n)
		for _, bf16 := range []bool{false, true} {
			forEachConfig(t, func(t *testing.T, p *kernels.Pool) {
				mm := sgemmOn(p)
				if bf16 {
					mm = matMulBF16On(p)
				}
				threads := p.Threads()
				want := mm(make([]float32, m*n), a, b, m, n, k, false, false, false)
				per := kernels.PackFloats(m, n, k, bf16)
				if per <= 0 {
					t.Fatalf("PackFloats(%d, %d, %d) = %d", m, n, k, per)
				}
				for _, short := range []int{0, 1} {
					buf := make([]byte, kernels.ScratchBytes(per-short, threads))
					poison(buf)
					s := kernels.NewScratch(buf, per-short, threads)
					p.SetScratch(s)
					misses := p.ScratchMisses()
					got := mm(make([]float32, m*n), a, b, m, n, k, false, false, false)
					if d := p.ScratchMisses() - misses; d != int64(short) {
						t.Errorf("%dx%dx%d, scratch %d short: %d scratch misses, want %d", m, n, k, short, d, short)
					}
					allocs := testing.AllocsPerRun(2, func() { mm(got, a, b, m, n, k, false, false, false) })
					p.ReleaseScratch(s)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%dx%dx%d bf16=%v, scratch %d short: element %d = %v, want %v", m, n, k, bf16, short, i, got[i], want[i])
						}
					}
					if use := touched(buf); use != (short == 0) {
						t.Errorf("%dx%dx%d bf16=%v, scratch of %d floats (PackFloats %d): used %v, want %v", m, n, k, bf16, per-short, per, use, short == 0)
					}
					if allocs != 0 {
						t.Errorf("%dx%dx%d: %v allocations per product with a scratch", m, n, k, allocs)
					}
				}
			})
		}
	}
}

// TestConvScratch: the convolutions and their gradients pack into a
// Scratch of ConvPackFloats per thread and give the same bits as without.
func TestConvScratch(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	g := kernels.NewConvGeom(3, 12, 11, 5, 3, 3, 1, 2, true)
	f := 16
	x, w, dy := randSlice(r, g.N*g.H*g.W*g.C), randSlice(r, g.KH*g.KW*g.C*f), randSlice(r, g.N*g.OH*g.OW*f)
	work := make([]float32, g.Im2ColSize(g.N))
	for _, bf16 := range []bool{false, true} {
		forEachConfig(t, func(t *testing.T, p *kernels.Pool) {
			threads := p.Threads()
			run := func() [3][]float32 {
				y, dx, dw := make([]float32, len(dy)), make([]float32, len(x)), make([]float32, len(w))
				if bf16 {
					kernels.Conv2DBF16On(p, y, x, w, work, g, f)
					kernels.Conv2DBackpropInputBF16On(p, dx, dy, w, work, g, f)
					kernels.Conv2DBackpropFilterBF16On(p, dw, x, dy, work, g, f)
				} else {
					kernels.Conv2DOn(p, y, x, w, work, g, f)
					kernels.Conv2DBackpropInputOn(p, dx, dy, w, work, g, f)
					kernels.Conv2DBackpropFilterOn(p, dw, x, dy, work, g, f)
				}
				return [3][]float32{y, dx, dw}
			}
			want := run()
			per := kernels.ConvPackFloats(g, f, bf16)
			buf := make([]byte, kernels.ScratchBytes(per, threads))
			poison(buf)
			s := kernels.NewScratch(buf, per, threads)
			p.SetScratch(s)
			got := run()
			p.ReleaseScratch(s)
			if !touched(buf) {
				t.Errorf("bf16=%v: the convolutions did not pack into a scratch of ConvPackFloats = %d", bf16, per)
			}
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("bf16=%v, output %d element %d: %v with the scratch, %v without", bf16, i, j, got[i][j], want[i][j])
					}
				}
			}
		})
	}
}
