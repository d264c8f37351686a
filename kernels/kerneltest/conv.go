package kerneltest

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// The convolution definitions below are the seven loops of the formula,
// with every padded read tested against the input bounds, in float64:
// nothing is shared with the kernels' im2col lowering, packing or jobs.
//
//	x:      [N, H, W, C]
//	filter: [KH, KW, C, F]
//	y:      [N, OH, OW, F]   y[n, oh, ow, f] = Σ_{kh, kw, c} x[n, oh·SH - PadTop + kh, ow·SW - PadLeft + kw, c]·filter[kh, kw, c, f]
//
// a read outside the input being zero. The gradients of Σ dy·y come from the
// same loops: each product x·filter that feeds y[n, oh, ow, f] sends
// dy[n, oh, ow, f]·filter to x and dy[n, oh, ow, f]·x to filter.

// raceTerms is the most terms (N·OH·OW·KH·KW·C·F) of a convolution the
// suite runs under the race detector.
const raceTerms = 300_000

// convCase is one convolution of the suite: a geometry and F.
type convCase struct {
	windowCase
	f int
}

func (c convCase) String() string { return name("%v/f%d", c.windowCase, c.f) }

// convCases cover odd sizes (1, 7, 33, F = 1023), strides 1 and 2 (and
// mixed), valid and same padding, KH != KW, a window larger than the input,
// 1x1; window rows of 16 floats or more (the float32 forward pass packs
// them straight from the image); no padding with window rows and K
// multiples of twelve (the filter gradient's panels packed straight from
// the image on the 12-row tier); channels the AVX-512 col2im takes whole
// (16, 32); a batch large enough for the float64 im2col to split in halves;
// and empty tensors.
var convCases = []convCase{
	{windowCase{1, 7, 5, 1, 3, 3, 1, 1, false}, 1},
	{windowCase{3, 7, 5, 3, 3, 2, 1, 1, true}, 5},
	{windowCase{3, 9, 6, 3, 3, 2, 2, 2, false}, 5},
	{windowCase{1, 6, 7, 3, 3, 3, 2, 2, true}, 5},
	{windowCase{3, 4, 3, 3, 5, 4, 1, 1, true}, 5},
	{windowCase{1, 1, 1, 3, 1, 1, 1, 1, false}, 7},
	{windowCase{3, 8, 9, 1, 4, 1, 3, 2, false}, 5},
	{windowCase{1, 33, 7, 3, 3, 3, 1, 1, true}, 33},
	{windowCase{1, 3, 3, 7, 2, 2, 1, 1, false}, 1023},
	{windowCase{2, 9, 15, 16, 3, 3, 1, 1, false}, 40},
	{windowCase{2, 11, 13, 7, 3, 3, 2, 2, true}, 33},
	{windowCase{3, 12, 12, 8, 2, 3, 1, 1, false}, 16},
	{windowCase{2, 15, 29, 4, 3, 3, 2, 2, false}, 24},
	{windowCase{2, 8, 9, 32, 3, 3, 1, 1, true}, 7},
	{windowCase{2, 16, 16, 64, 3, 3, 2, 2, true}, 2},
	{windowCase{0, 5, 5, 3, 3, 3, 1, 1, true}, 2},
	{windowCase{2, 5, 5, 0, 3, 3, 1, 1, true}, 2},
	{windowCase{2, 2, 5, 3, 3, 3, 1, 1, false}, 2},
	{windowCase{2, 5, 5, 3, 3, 3, 1, 1, true}, 0},
}

// The three passes of a convolution.
const (
	convForward = iota
	convInput
	convFilter
)

// convRef returns the pass's result (y, dx or dfilter) by the definition,
// with each operand read through round (exact widening, or rounding to
// bfloat16), and the scale of each sum: the sum of the absolute values of
// its terms.
func convRef(pass int, x, filter, dy []float32, g kernels.ConvGeom, f int, round func(float32) float64) (want, scale []float64) {
	size := [3]int{g.N * g.OH * g.OW * f, len(x), len(filter)}[pass]
	want, scale = make([]float64, size), make([]float64, size)
	for n := 0; n < g.N; n++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				for o := 0; o < f; o++ {
					yi := ((n*g.OH+oh)*g.OW+ow)*f + o
					for kh := 0; kh < g.KH; kh++ {
						for kw := 0; kw < g.KW; kw++ {
							ih, iw := oh*g.SH-g.PadTop+kh, ow*g.SW-g.PadLeft+kw
							if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
								continue // padding reads as zero
							}
							for c := 0; c < g.C; c++ {
								xi, wi := ((n*g.H+ih)*g.W+iw)*g.C+c, ((kh*g.KW+kw)*g.C+c)*f+o
								var at int
								var term float64
								switch pass {
								case convForward:
									at, term = yi, round(x[xi])*round(filter[wi])
								case convInput:
									at, term = xi, round(dy[yi])*round(filter[wi])
								default:
									at, term = wi, round(dy[yi])*round(x[xi])
								}
								want[at] += term
								scale[at] += math.Abs(term)
							}
						}
					}
				}
			}
		}
	}
	return want, scale
}

// convWorkspaces returns the workspace sizes every case runs with: one
// image, two (a partial last chunk when N = 3), the whole batch, and more
// than the batch (the filter gradient's second group takes the end of
// work), without repeats.
func convWorkspaces(g kernels.ConvGeom) []int {
	var sizes []int
	for _, s := range []int{g.Im2ColSize(1), g.Im2ColSize(2), g.Im2ColSize(g.N), g.Im2ColSize(g.N+1) + g.Im2ColSize(1)/2} {
		seen := false
		for _, v := range sizes {
			seen = seen || v == s
		}
		if !seen {
			sizes = append(sizes, s)
		}
	}
	return sizes
}

// testConv runs one pass of a convolution against convRef on every case
// and workspace size: under the sum rule in float32, under the BF16 rule
// (every operand rounded to bfloat16 in the reference) when bf16 is set.
// work is filled with NaN, so a kernel that reads work before writing it
// fails, and has guards like dst.
func testConv(t *testing.T, fn ConvFunc, pass int, bf16Rule bool) {
	round := func(v float32) float64 { return float64(v) }
	if bf16Rule {
		round = bf16
	}
	for i, c := range convCases {
		g := c.geom()
		if raceEnabled && g.N*g.OH*g.OW*g.KH*g.KW*g.C*c.f > raceTerms {
			continue
		}
		r := newRand(uint64(600 + 10*pass + 100*i))
		x, filter := uniform(r, g.N*g.H*g.W*g.C, -1, 1), uniform(r, g.KH*g.KW*g.C*c.f, -1, 1)
		dy := uniform(r, g.N*g.OH*g.OW*c.f, -1, 1)
		want, scale := convRef(pass, x, filter, dy, g, c.f, round)
		a, b := [3][]float32{x, dy, x}[pass], [3][]float32{filter, filter, dy}[pass]
		aName, bName := [3]string{"x", "dy", "x"}[pass], [3]string{"filter", "filter", "dy"}[pass]
		for _, size := range convWorkspaces(g) {
			where := name("%v/work=%d", c, size)
			o, work := newOut32(len(want)), newOut32(size)
			as, bs := clone(a), clone(b)
			got := fn(o.dst(), a, b, work.dst(), g, c.f)
			o.check(t, where, got)
			work.check(t, where+" work", work.dst())
			unchanged(t, where, aName, as, a)
			unchanged(t, where, bName, bs, b)
			if bf16Rule {
				compareBF16(t, where, o.dst(), want, scale)
			} else {
				compare(t, where, o.dst(), narrow(want), scale)
			}
		}
	}
}
