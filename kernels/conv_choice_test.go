package kernels_test

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// TestConvAlgos runs every algorithm ConvAlgos offers for each product of
// odd and typical geometries, on 1 to 3 threads, against the naive
// definitions, so that a measured choice can pick any of them. It includes
// filter gradients the built-in rule gives to im2col (32 channels on a
// 16x16 output), which only a forced or measured choice runs direct.
func TestConvAlgos(t *testing.T) {
	geoms := []struct{ n, h, w, c, k, s, pad, f int }{
		{2, 16, 16, 32, 3, 1, 1, 32}, // filter gradient past the rule's area
		{3, 7, 9, 16, 3, 1, 1, 16},
		{2, 9, 7, 16, 3, 2, 1, 32}, // stride 2: input gradient im2col only
		{2, 8, 8, 16, 3, 2, 1, 32}, // stride 2, padding 1 before and none after (PyTorch's padding=1 folded in)
		{2, 6, 6, 32, 3, 2, 1, 64},
		{1, 5, 5, 64, 1, 1, 0, 16},  // 1x1
		{2, 6, 6, 4, 5, 1, 2, 16},   // few channels, wide window
		{1, 8, 8, 3, 3, 1, 1, 16},   // a stem: 3 channels
		{3, 28, 28, 1, 3, 1, 1, 16}, // the ResNet's stem: 1 channel (the stem tiles, 3 window rows at once)
		{2, 9, 11, 1, 3, 2, 0, 32},  // no padding, stride 2, two filter blocks
		{2, 13, 12, 3, 7, 2, 3, 16}, // ImageNet's stem: 7×7, 3 channels (one window row of 21 pairs)
		{17, 6, 5, 2, 5, 1, 2, 16},  // 2 channels, more images than groups, window rows 3 + 1 + 1
		{2, 6, 7, 5, 3, 1, 1, 16},   // 5 channels
	}
	r := rand.New(rand.NewSource(7))
	for _, c := range geoms {
		oh, ow := (c.h+2*c.pad-c.k)/c.s+1, (c.w+2*c.pad-c.k)/c.s+1
		g := kernels.ConvGeom{N: c.n, H: c.h, W: c.w, C: c.c, KH: c.k, KW: c.k, SH: c.s, SW: c.s, PadTop: c.pad, PadLeft: c.pad, OH: oh, OW: ow}
		x, w, dy := randoms(r, c.n*c.h*c.w*c.c), randoms(r, c.k*c.k*c.c*c.f), randoms(r, c.n*oh*ow*c.f)
		y64 := naiveConv(widen(x), widen(w), g, c.f)
		dx64, dw64 := naiveConvGrads(widen(x), widen(w), widen(dy), g, c.f)
		for _, kind := range []kernels.ConvKind{kernels.ConvForward, kernels.ConvInputGrad, kernels.ConvFilterGrad} {
			work := make([]float32, max(g.Im2ColSize(c.n)+len(w), kernels.WinogradWork(kernels.ConvWinograd, kind, g, c.f), kernels.WinogradWork(kernels.ConvWinograd4, kind, g, c.f), kernels.StemFilterWork(g, c.f)))
			want := [3][]float64{y64, dx64, dw64}[kind]
			a, b, n := convProduct(kind, x, w, dy)
			algos := kernels.ConvAlgos(kind, g, c.f)
			wg := c.k == 3 && c.s == 1
			if !slices.Contains(algos, kernels.ConvIm2col) || slices.Contains(algos, kernels.ConvWinograd) != wg || slices.Contains(algos, kernels.ConvWinograd4) != wg {
				t.Fatalf("%+v %v: algorithms %v, want im2col among them, and winograd and winograd4 for 3x3 at stride 1", c, kind, algos)
			}
			for _, algo := range algos {
				for threads := 1; threads <= 3; threads++ {
					name := fmt.Sprintf("%dx%dx%d/c%d/k%d/s%d/f%d/%v/%v/t%d", c.n, c.h, c.w, c.c, c.k, c.s, c.f, kind, algo, threads)
					p := kernels.NewPool(threads)
					got := kernels.ConvOn(p, kind, algo, make([]float32, n), a, b, work, g, c.f)
					p.Close()
					if err := closeTo(got, want, 1e-4); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
			}
		}
	}
	// the stem tiles take the filter gradients of few channels, with the
	// least workspace as with a large one, and the same bits on any
	// number of threads
	for _, c := range geoms {
		oh, ow := (c.h+2*c.pad-c.k)/c.s+1, (c.w+2*c.pad-c.k)/c.s+1
		g := kernels.ConvGeom{N: c.n, H: c.h, W: c.w, C: c.c, KH: c.k, KW: c.k, SH: c.s, SW: c.s, PadTop: c.pad, PadLeft: c.pad, OH: oh, OW: ow}
		least := kernels.StemFilterWork(g, c.f)
		if (least > 0) != (c.c%4 != 0 && kernels.HasTiles()) {
			t.Errorf("%+v: stem filter workspace %d", c, least)
		}
		if least == 0 {
			continue
		}
		x, dy := randoms(r, c.n*c.h*c.w*c.c), randoms(r, c.n*oh*ow*c.f)
		_, want := naiveConvGrads(widen(x), make([]float64, c.k*c.k*c.c*c.f), widen(dy), g, c.f)
		var first []float32
		for threads := 1; threads <= 3; threads++ {
			work := make([]float32, max(least, g.Im2ColSize(1)))
			p := kernels.NewPool(threads)
			got := kernels.ConvOn(p, kernels.ConvFilterGrad, kernels.ConvDirect, make([]float32, len(want)), x, dy, work, g, c.f)
			p.Close()
			if err := closeTo(got, want, 1e-4); err != nil {
				t.Errorf("%+v least workspace, %d threads: %v", c, threads, err)
			}
			if first == nil {
				first = got
			} else if !slices.Equal(got, first) {
				t.Errorf("%+v least workspace: %d threads give other bits than 1", c, threads)
			}
		}
	}
	// the filter gradient above the rule's area is a real choice (where
	// the direct tiles exist: AVX-512, not the purego build)
	g := kernels.ConvGeom{N: 2, H: 16, W: 16, C: 32, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: 16, OW: 16}
	want := []kernels.ConvAlgo{kernels.ConvIm2col, kernels.ConvWinograd, kernels.ConvWinograd4}
	if kernels.HasTiles() {
		want = append([]kernels.ConvAlgo{kernels.ConvDirect}, want...)
	}
	if got := kernels.ConvAlgos(kernels.ConvFilterGrad, g, 32); !slices.Equal(got, want) {
		t.Errorf("filter gradient of %+v: algorithms %v, want %v", g, got, want)
	}
}

func randoms(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return v
}

func widen(v []float32) []float64 {
	w := make([]float64, len(v))
	for i, x := range v {
		w[i] = float64(x)
	}
	return w
}

// closeTo reports the first element of got more than tol (relative to
// want's largest magnitude) from want.
func closeTo(got []float32, want []float64, tol float64) error {
	scale := 1e-30
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	for i := range want {
		if d := math.Abs(float64(got[i])-want[i]) / scale; !(d <= tol) {
			return fmt.Errorf("element %d: got %g, want %g (relative %.2g)", i, got[i], want[i], d)
		}
	}
	return nil
}

func TestParseConvAlgo(t *testing.T) {
	for _, a := range []kernels.ConvAlgo{kernels.ConvAuto, kernels.ConvDirect, kernels.ConvIm2col, kernels.ConvWinograd, kernels.ConvWinograd4} {
		if got, err := kernels.ParseConvAlgo(a.String()); err != nil || got != a {
			t.Errorf("ParseConvAlgo(%q) = %v, %v", a, got, err)
		}
	}
	if _, err := kernels.ParseConvAlgo("fft"); err == nil {
		t.Error("ParseConvAlgo(fft): no error")
	}
}

// TestConvManyRegions runs im2col's Conv2D job where its regions of one
// output row each would pass the most a job takes (65,535): an image of
// 70,000 rows, regions aimed at 4 bytes. The job takes fewer, larger
// regions.
func TestConvManyRegions(t *testing.T) {
	defer kernels.SetConvRegionBytes(4)()
	g := kernels.ConvGeom{N: 1, H: 70000, W: 2, C: 1, KH: 3, KW: 1, SH: 1, SW: 1, PadTop: 1, OH: 70000, OW: 2}
	r := rand.New(rand.NewSource(3))
	x, w := randoms(r, 140000), randoms(r, 3*16)
	p := kernels.NewPool(2)
	defer p.Close()
	got := kernels.ConvOn(p, kernels.ConvForward, kernels.ConvIm2col, make([]float32, 140000*16), x, w, make([]float32, g.Im2ColSize(1)), g, 16)
	if err := closeTo(got, naiveConv(widen(x), widen(w), g, 16), 1e-5); err != nil {
		t.Error(err)
	}
}

// convProduct returns the operands of the convolution product kind of x,
// the filter w and dy (ConvOn's a and b) and the length of its result.
func convProduct(kind kernels.ConvKind, x, w, dy []float32) (a, b []float32, n int) {
	switch kind {
	case kernels.ConvInputGrad:
		return dy, w, len(x)
	case kernels.ConvFilterGrad:
		return x, dy, len(w)
	}
	return x, w, len(dy)
}

// TestConvMoments checks ConvMomentsOn against ConvOn and MomentsOn: for
// every forward algorithm, on 1 to 3 threads, with the least workspace
// and a large one, the same output and the same moments bit for bit. With
// a large workspace Winograd sums the moments as it writes each image
// (checked: WinogradMoments reports it), with the least it splits images
// and the moments are summed after; both give the same bits.
func TestConvMoments(t *testing.T) {
	geoms := []struct{ n, h, w, c, k, s, pad, f int }{
		{4, 28, 28, 16, 3, 1, 1, 16}, // the ResNet-20's layers
		{3, 14, 14, 32, 3, 1, 1, 32},
		{5, 7, 7, 64, 3, 1, 1, 64},
		{3, 7, 9, 16, 3, 1, 1, 16},   // odd sizes
		{2, 9, 7, 16, 3, 2, 1, 32},   // stride 2
		{3, 28, 28, 1, 3, 1, 1, 16},  // a stem
		{1, 5, 5, 64, 1, 1, 0, 16},   // 1x1
		{300, 4, 4, 16, 3, 1, 1, 16}, // groups of two images (16 rows each)
		{2, 6, 7, 5, 3, 1, 1, 20},    // 5 channels, 20 filters
	}
	r := rand.New(rand.NewSource(17))
	for _, c := range geoms {
		oh, ow := (c.h+2*c.pad-c.k)/c.s+1, (c.w+2*c.pad-c.k)/c.s+1
		g := kernels.ConvGeom{N: c.n, H: c.h, W: c.w, C: c.c, KH: c.k, KW: c.k, SH: c.s, SW: c.s, PadTop: c.pad, PadLeft: c.pad, OH: oh, OW: ow}
		x, w := randoms(r, c.n*c.h*c.w*c.c), randoms(r, c.k*c.k*c.c*c.f)
		for i := range x {
			x[i] += 0.5 // a mean away from zero
		}
		rows := c.n * oh * ow
		block := kernels.MomentsBlock(rows, oh*ow)
		mwork := make([]float64, kernels.MomentsWork(rows, c.f, block))
		for _, algo := range kernels.ConvAlgos(kernels.ConvForward, g, c.f) {
			large := max(g.Im2ColSize(c.n)+len(w), 1<<20) // chunks of whole images on 3 threads
			least := max(g.Im2ColSize(1), kernels.WinogradWork(algo, kernels.ConvForward, g, c.f))
			if !algo.IsWinograd() {
				least = g.Im2ColSize(1)
			}
			for _, size := range []int{least, large} {
				work := make([]float32, size)
				for threads := 1; threads <= 3; threads++ {
					name := fmt.Sprintf("%dx%dx%d/c%d/k%d/s%d/f%d/%v/work%d/t%d", c.n, c.h, c.w, c.c, c.k, c.s, c.f, algo, size, threads)
					p := kernels.NewPool(threads)
					want := kernels.ConvOn(p, kernels.ConvForward, algo, make([]float32, rows*c.f), x, w, work, g, c.f)
					wantM := kernels.MomentsOn(p, make([]float32, 2*c.f), want, rows, c.f, block, mwork)
					y, m := make([]float32, rows*c.f), make([]float32, 2*c.f)
					for i := range mwork {
						mwork[i] = math.NaN() // nothing left from MomentsOn
					}
					kernels.ConvMomentsOn(p, algo, y, x, w, work, g, c.f, m, mwork)
					if algo.IsWinograd() && kernels.HasTiles() && size == large {
						// a large workspace: chunks of whole groups, most summed as written
						k := block / (oh * ow)
						groups := (c.n + k - 1) / k
						if ran, summed := kernels.WinogradMoments(p, algo, make([]float32, rows*c.f), x, w, work, g, c.f, make([]float64, len(mwork)), k); !ran || 2*summed < groups {
							t.Errorf("%s: Winograd ran %v, summed %d of %d groups of %d images as it wrote them: want it ran, and half at least", name, ran, summed, groups, k)
						}
					}
					p.Close()
					if !slices.Equal(y, want) {
						t.Errorf("%s: the output differs from ConvOn's", name)
					}
					if !slices.Equal(m, wantM) {
						t.Errorf("%s: moments %v, MomentsOn %v: want the same bits", name, m, wantM)
					}
					// and against the definition, in float64
					ref := make([]float64, 2*c.f)
					for ch := 0; ch < c.f; ch++ {
						var s float64
						for i := 0; i < rows; i++ {
							s += float64(want[i*c.f+ch])
						}
						mean := s / float64(rows)
						var v float64
						for i := 0; i < rows; i++ {
							d := float64(want[i*c.f+ch]) - mean
							v += d * d
						}
						ref[ch], ref[c.f+ch] = mean, v/float64(rows)
					}
					if err := closeTo(m, ref, 1e-5); err != nil {
						t.Errorf("%s: moments: %v", name, err)
					}
				}
			}
		}
	}
}
