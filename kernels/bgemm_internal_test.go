package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/headroom-ml/headroom/tensor"
)

// TestBgemmTierBlocking checks that the bfloat16 tiers' tiles and blocks fit
// the float32 packing workspace they share with Sgemm, and that the blocks
// are whole tiles.
func TestBgemmTierBlocking(t *testing.T) {
	for _, tier := range allBgemmTiers() {
		b := tier.blk
		if tier.mr > gemmMaxMR || tier.nr > gemmMaxNR {
			t.Errorf("%s: tile %d×%d, want at most %d×%d", tier.name, tier.mr, tier.nr, gemmMaxMR, gemmMaxNR)
		}
		if b.mc%tier.mr != 0 || b.nc%tier.nr != 0 || b.kc < 1 {
			t.Errorf("%s: blocks mc=%d nc=%d kc=%d are not whole %d×%d tiles", tier.name, b.mc, b.nc, b.kc, tier.mr, tier.nr)
		}
		if b.mc*b.kc > gemmMC*gemmKC || b.kc*b.nc > gemmKC*gemmNC {
			t.Errorf("%s: A panel %d or B block %d elements, want at most %d and %d", tier.name, b.mc*b.kc, b.kc*b.nc, gemmMC*gemmKC, gemmKC*gemmNC)
		}
	}
}

// allBgemmTiers returns the AVX512_BF16 tier, if any, and the fallback
// tiers, each with its narrow variant.
func allBgemmTiers() []gemmTier {
	var ts []gemmTier
	if bgemmAsm != nil {
		ts = append(ts, *bgemmAsm)
	}
	ts = append(ts, bgemmFallbacks...)
	var all []gemmTier
	for _, t := range ts {
		all = append(all, t)
		if t.narrow != nil {
			all = append(all, *t.narrow)
		}
	}
	return all
}

// BenchmarkBgemmMicroKernel times the AVX512_BF16 micro-kernels alone on
// packed panels that stay in L1 and L2 (one A micro-panel against eight B
// micro-panels, KC deep, accumulating into C): the ceiling the blocked
// product approaches. 2·12·NR·KC flops per call, as for Sgemm's.
func BenchmarkBgemmMicroKernel(b *testing.B) {
	if bgemmAsm == nil {
		b.Skip("no AVX512_BF16 tier on this CPU or build")
	}
	for _, t := range []gemmTier{*bgemmAsm, *bgemmAsm.narrow} {
		b.Run(t.name, func(b *testing.B) {
			const kc, panels = bgemmKC, 8
			a := make([]float32, kc*t.mr)
			bp := make([]float32, kc*t.nr*panels)
			c := make([]float32, t.mr*t.nr*panels)
			for b.Loop() {
				for j := 0; j < panels; j++ {
					t.kernel(kc, a, bp[j*kc*t.nr:], c[j*t.nr:], t.nr*panels, true)
				}
			}
			b.ReportMetric(2*float64(kc*t.mr*t.nr*panels)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// roundingCases are float32 bit patterns whose bfloat16 rounding is easy to
// get wrong: ties (to even, both ways), values next to ties, overflow to
// Inf, infinities, NaNs (quiet, signalling, negative, all payload bits),
// signed zeros, and subnormals (kept and rounded: a tie to zero, a tie up,
// and the largest, which rounds up to the smallest normal).
var roundingCases = []uint32{
	0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0xbf818000, 0xbf808000,
	0x7f7fffff, 0xff7fffff, 0x7f7f7fff, 0x7f800000, 0xff800000,
	0x7fc00000, 0x7f800001, 0xff800001, 0x7fffffff, 0xffffffff, 0x7f80ffff,
	0x00000000, 0x80000000,
	0x00000001, 0x00008000, 0x00018000, 0x007fffff, 0x807fffff, 0x00010000, 0x80010001,
}

// sourceWithSpecials returns n float32s in [-1, 1) with a quarter of them
// replaced by roundingCases.
func sourceWithSpecials(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		if r.IntN(4) == 0 {
			x[i] = math.Float32frombits(roundingCases[r.IntN(len(roundingCases))])
		} else {
			x[i] = float32(2*r.Float64() - 1)
		}
	}
	return x
}

// packPairsRef returns the micro-panel [ceil(kc/2)][w] of bfloat16 pairs of
// the elements at(p, j) (step p < kc, lane j < valid), rounded by
// tensor.ToBFloat16; other lanes and the odd half of a last, single step
// are zero.
func packPairsRef(w, kc, valid int, at func(p, j int) float32) []uint32 {
	kp := (kc + 1) / 2
	d := make([]uint32, kp*w)
	for p := 0; p < kp; p++ {
		for j := 0; j < valid; j++ {
			pair := uint32(tensor.ToBFloat16(at(2*p, j)))
			if 2*p+1 < kc {
				pair |= uint32(tensor.ToBFloat16(at(2*p+1, j))) << 16
			}
			d[p*w+j] = pair
		}
	}
	return d
}

// TestBgemmPacking checks every packing routine of the AVX512_BF16 tier,
// bit for bit, against packPairsRef: the layout of pairs, the rounding of
// roundingCases, zero lanes beyond valid, the zero odd half when kc is odd,
// and no write beyond the ceil(kc/2) pairs.
func TestBgemmPacking(t *testing.T) {
	if bgemmAsm == nil {
		t.Skip("no AVX512_BF16 tier on this CPU or build")
	}
	type packer struct {
		name string
		w    int
		f    func(d, src []float32, ld, kc, valid int)
		rows bool // the valid rows of src are contiguous (scatter), else its steps (gather)
	}
	packers := []packer{
		{"gather12", 12, bgemmAsm.gatherA, false},
		{"gather32", 32, bgemmAsm.gatherB, false},
		{"gather16", 16, bgemmAsm.narrow.gatherB, false},
		{"scatter12", 12, bgemmAsm.scatterA, true},
		{"scatter32", 32, bgemmAsm.scatterB, true},
		{"scatter16", 16, bgemmAsm.narrow.scatterB, true},
	}
	r := rand.New(rand.NewPCG(6, 6))
	const sentinel = 0x5a5a5a5a
	for _, pk := range packers {
		for _, kc := range []int{1, 2, 3, 31, 32, 33, 64, 65, 100} {
			for _, valid := range []int{1, pk.w/2 + 1, pk.w - 1, pk.w} {
				t.Run(fmt.Sprintf("%s/kc=%d/valid=%d", pk.name, kc, valid), func(t *testing.T) {
					var src []float32
					var ld int
					var at func(p, j int) float32
					if pk.rows {
						ld = kc + 5
						src = sourceWithSpecials(r, (valid-1)*ld+kc)
						at = func(p, j int) float32 { return src[j*ld+p] }
					} else {
						ld = pk.w + 3
						src = sourceWithSpecials(r, (kc-1)*ld+valid)
						at = func(p, j int) float32 { return src[p*ld+j] }
					}
					want := packPairsRef(pk.w, kc, valid, at)
					buf := make([]float32, pk.w*kc+16)
					for i := range buf {
						buf[i] = math.Float32frombits(sentinel)
					}
					pk.f(buf[:pk.w*kc], src, ld, kc, valid)
					got := unsafe.Slice((*uint32)(unsafe.Pointer(&buf[0])), len(buf))
					for i, g := range got {
						w := uint32(sentinel)
						if i < len(want) {
							w = want[i]
						}
						if g != w {
							t.Fatalf("element %d (pair %d, lane %d): got %#08x, want %#08x", i, i/pk.w, i%pk.w, g, w)
						}
					}
				})
			}
		}
	}
}
