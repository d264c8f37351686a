package kernels_test

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
)

// wgGeoms are the geometries TestWinograd runs: odd sizes, every padding
// Winograd takes, channels below, at and past a block of 16, and a tile
// grid that does not divide the output.
var wgGeoms = []struct{ n, h, w, c, pad, f int }{
	{1, 3, 3, 1, 0, 1},   // one output, one channel
	{2, 5, 7, 3, 1, 5},   // odd sizes, few channels
	{1, 6, 6, 16, 1, 16}, // one block
	{2, 9, 5, 17, 1, 20}, // a block and a tail
	{1, 8, 8, 33, 0, 16}, // valid
	{1, 7, 6, 16, 2, 32}, // padding 2: outputs past the input
	{3, 10, 10, 32, 1, 48},
	{1, 64, 61, 17, 1, 16}, // past wgPadImage: edge tiles staged one at a time
}

// wgForms are Winograd's forms: F(2×2, 3×3) and F(4×4, 3×3).
var wgForms = []kernels.ConvAlgo{kernels.ConvWinograd, kernels.ConvWinograd4}

// TestWinograd checks both forms' three products against the float64
// definition on 1 to 3 threads, with the least workspace and a large one,
// with and without the assembly transforms, with the products on the
// register tiles (where they apply) and on the packed GEMM, and checks
// that the threads, the workspace's size and the assembly do not change a
// bit. It logs
// Winograd's error and the direct sum's (docs/kernels.md's table).
func TestWinograd(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for _, c := range wgGeoms {
		oh, ow := c.h+2*c.pad-2, c.w+2*c.pad-2
		g := kernels.ConvGeom{N: c.n, H: c.h, W: c.w, C: c.c, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: c.pad, PadLeft: c.pad, OH: oh, OW: ow}
		if !kernels.WinogradOK(g) {
			t.Fatalf("%+v: WinogradOK false", g)
		}
		x, w, dy := randoms(r, c.n*c.h*c.w*c.c), randoms(r, 9*c.c*c.f), randoms(r, c.n*oh*ow*c.f)
		y64 := naiveConv(widen(x), widen(w), g, c.f)
		dx64, dw64 := naiveConvGrads(widen(x), widen(w), widen(dy), g, c.f)
		for _, kind := range []kernels.ConvKind{kernels.ConvForward, kernels.ConvInputGrad, kernels.ConvFilterGrad} {
			for _, form := range wgForms {
				want := [3][]float64{y64, dx64, dw64}[kind]
				a, b, n := convProduct(kind, x, w, dy)
				least := kernels.WinogradWork(form, kind, g, c.f)
				for _, regs := range []bool{true, false} {
					restore := kernels.SetWinogradTiles(regs)
					var first []float32
					for _, size := range []int{least, least + 1<<20} {
						for _, simd := range []bool{true, false} {
							for threads := 1; threads <= 3; threads++ {
								name := fmt.Sprintf("%dx%dx%dx%d/pad%d/f%d/%v/%v/regs=%v/work%d/simd=%v/t%d", c.n, c.h, c.w, c.c, c.pad, c.f, kind, form, regs, size, simd, threads)
								old := kernels.SetSIMD(kernels.SIMD{Elementwise: true, Window: simd, ConvertLanes: 16})
								p := kernels.NewPool(threads)
								got := make([]float32, n)
								ran := kernels.Winograd(p, form, kind, got, a, b, make([]float32, size), g, c.f)
								p.Close()
								kernels.SetSIMD(old)
								if !ran {
									t.Fatalf("%s: Winograd did not run", name)
								}
								if err := closeTo(got, want, 1e-5); err != nil {
									t.Errorf("%s: %v", name, err)
								}
								if first == nil {
									first = got
								} else {
									// the filter gradient's chunks follow the workspace: only
									// the threads and the assembly keep its bits (first is
									// reset for each workspace below)
									if i := mismatch(got, first); i >= 0 {
										t.Errorf("%s: element %d is %g, %g on the first run", name, i, got[i], first[i])
									}
								}
							}
						}
						if kind == kernels.ConvFilterGrad {
							first = nil
						}
					}
					restore()
				}
			}
		}
	}
	// more chunks than a job has regions (the least workspace holds one
	// tile): each region takes several
	{
		g := kernels.ConvGeom{N: 1, H: 514, W: 514, C: 1, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: 514, OW: 514}
		x, w := randoms(r, 514*514), randoms(r, 9)
		y := make([]float32, 514*514)
		p := kernels.NewPool(2)
		defer kernels.SetWinogradPadImages(false)() // the least workspace: one tile, staged alone
		want := naiveConv(widen(x), widen(w), g, 1)
		for _, form := range wgForms {
			clear(y)
			if !kernels.Winograd(p, form, kernels.ConvForward, y, x, w, make([]float32, kernels.WinogradWork(form, kernels.ConvForward, g, 1)), g, 1) {
				t.Fatalf("514x514 %v: Winograd did not run", form)
			}
			if err := closeTo(y, want, 1e-5); err != nil {
				t.Errorf("514x514 %v, a chunk a tile: %v", form, err)
			}
		}
		p.Close()
	}
	// too little workspace, or a geometry F(2,3) does not take: false
	g := kernels.ConvGeom{N: 1, H: 4, W: 4, C: 2, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: 4, OW: 4}
	for _, form := range wgForms {
		work := make([]float32, kernels.WinogradWork(form, kernels.ConvForward, g, 2)-1)
		if kernels.Winograd(kernels.NewPool(1), form, kernels.ConvForward, make([]float32, 32), make([]float32, 32), make([]float32, 36), work, g, 2) {
			t.Errorf("%v ran with too little workspace", form)
		}
	}
	for _, bad := range []kernels.ConvGeom{
		{N: 1, H: 4, W: 4, C: 2, KH: 3, KW: 3, SH: 2, SW: 2, OH: 1, OW: 1},
		{N: 1, H: 4, W: 4, C: 2, KH: 5, KW: 5, SH: 1, SW: 1, PadTop: 2, PadLeft: 2, OH: 4, OW: 4},
		{N: 1, H: 4, W: 4, C: 2, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 3, PadLeft: 0, OH: 8, OW: 2},
	} {
		if algos := kernels.ConvAlgos(kernels.ConvForward, bad, 2); kernels.WinogradOK(bad) || slices.ContainsFunc(algos, kernels.ConvAlgo.IsWinograd) {
			t.Errorf("%+v: Winograd offered", bad)
		}
	}
}

func mismatch(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestWinogradError measures both forms' error and the direct sum's
// against the float64 definition on the ResNet-20's 3×3 stride-1 layer
// shapes (inputs uniform in [-1, 1], the batch cut to 4) and logs them for
// docs/kernels.md. Winograd's largest error must stay within the kernel
// suite's float32 tolerance (1e-5 of the output's scale), and within 8
// times the direct sum's for F(2×2, 3×3), 32 times for F(4×4, 3×3) (48
// times im2col's where the direct tiles do not run).
func TestWinogradError(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, c := range []struct{ hw, c int }{{32, 16}, {16, 32}, {8, 64}} {
		g := kernels.ConvGeom{N: 4, H: c.hw, W: c.hw, C: c.c, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: c.hw, OW: c.hw}
		f := c.c
		x, w, dy := randoms(r, 4*c.hw*c.hw*c.c), randoms(r, 9*c.c*f), randoms(r, 4*c.hw*c.hw*f)
		y64 := naiveConv(widen(x), widen(w), g, f)
		dx64, dw64 := naiveConvGrads(widen(x), widen(w), widen(dy), g, f)
		p := kernels.NewPool(2)
		for _, kind := range []kernels.ConvKind{kernels.ConvForward, kernels.ConvInputGrad, kernels.ConvFilterGrad} {
			want := [3][]float64{y64, dx64, dw64}[kind]
			a, b, n := convProduct(kind, x, w, dy)
			work := make([]float32, max(g.Im2ColSize(4), kernels.WinogradWork(kernels.ConvWinograd4, kind, g, f), kernels.WinogradWork(kernels.ConvWinograd, kind, g, f)))
			var errs [3][2]float64 // [winograd, winograd4, direct][max, rms]
			for i, algo := range []kernels.ConvAlgo{kernels.ConvWinograd, kernels.ConvWinograd4, kernels.ConvDirect} {
				got := kernels.ConvOn(p, kind, algo, make([]float32, n), a, b, work, g, f)
				errs[i][0], errs[i][1] = relErrors(got, want)
			}
			t.Logf("%dx%dx%d, %d filters, %v: winograd max %.2e rms %.2e; winograd4 max %.2e rms %.2e; direct max %.2e rms %.2e",
				c.hw, c.hw, c.c, f, kind, errs[0][0], errs[0][1], errs[1][0], errs[1][1], errs[2][0], errs[2][1])
			// the direct sum is the direct tiles' where they run; without
			// them (no AVX-512, the purego build) ConvDirect runs the
			// rule's im2col, whose blocked sums round less (its largest
			// error 1.6e-7 on the 8×8×64 input gradient, against the
			// tiles' 7.4e-7), so F(4×4, 3×3)'s bound is 48 times that
			bounds := []float64{8, 32}
			if !kernels.HasTiles() {
				bounds[1] = 48
			}
			for i, times := range bounds {
				if errs[i][0] > 1e-5 || errs[i][0] > times*errs[2][0] {
					t.Errorf("%dx%dx%d %v: %v's largest error %.2e, want within 1e-5 and %gx the direct sum's %.2e", c.hw, c.hw, c.c, kind, wgForms[i], errs[i][0], times, errs[2][0])
				}
			}
		}
		p.Close()
	}
}

// relErrors returns the largest and the root-mean-square difference of
// got from want, relative to want's largest magnitude.
func relErrors(got []float32, want []float64) (maxErr, rms float64) {
	scale := 1e-30
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	sum := 0.0
	for i, w := range want {
		d := math.Abs(float64(got[i])-w) / scale
		maxErr, sum = max(maxErr, d), sum+d*d
	}
	return maxErr, math.Sqrt(sum / float64(len(want)))
}

// BenchmarkConvAlgos times each algorithm of the ResNet-20's 3×3 stride-1
// products (on 28×28 Fashion-MNIST images) at batch 128 on 2 threads.
func BenchmarkConvAlgos(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	// the ResNet-20's 3×3 stride-1 layers and its stem (1 channel, whose
	// filter gradient the stem tiles run as direct)
	for _, c := range []struct{ hw, c, f int }{{28, 16, 16}, {14, 32, 32}, {7, 64, 64}, {28, 1, 16}} {
		g := kernels.ConvGeom{N: 128, H: c.hw, W: c.hw, C: c.c, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: c.hw, OW: c.hw}
		f := c.f
		x, w, dy := randoms(r, 128*c.hw*c.hw*c.c), randoms(r, 9*c.c*f), randoms(r, 128*c.hw*c.hw*f)
		p := kernels.NewPool(2)
		for _, kind := range []kernels.ConvKind{kernels.ConvForward, kernels.ConvInputGrad, kernels.ConvFilterGrad} {
			a, bb, n := convProduct(kind, x, w, dy)
			per := min(128, max(1, (8<<20)/(4*g.Im2ColSize(1))))
			work := make([]float32, max(g.Im2ColSize(per), kernels.WinogradWork(kernels.ConvWinograd, kind, g, f), kernels.WinogradWork(kernels.ConvWinograd4, kind, g, f), kernels.StemFilterWork(g, f)))
			dst := make([]float32, n)
			for _, algo := range kernels.ConvAlgos(kind, g, f) {
				b.Run(fmt.Sprintf("%dx%dx%d/%v/%v", c.hw, c.hw, c.c, kind, algo), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						kernels.ConvOn(p, kind, algo, dst, a, bb, work, g, f)
					}
					flops := 2 * 9 * float64(128*c.hw*c.hw*c.c*f)
					b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
		p.Close()
	}
}

// TestWinogradSuite runs the kernel suite's convolution cases on Winograd:
// each case it takes (3×3 at stride 1) runs each form, in the suite's
// workspace where that holds what Winograd needs, else in the test's own;
// the others run the rule. It runs on pools of 1 and 3 threads, with the
// assembly transforms on and off, with the products on the register tiles
// and on the packed GEMM, and with small images staged whole and not.
func TestWinogradSuite(t *testing.T) {
	defer kernels.WithoutExternalSgemm()()
	top := kernels.MaxSIMD()
	windows := []bool{false}
	if top.Window {
		windows = append(windows, true)
	}
	type variant struct{ window, regs, padImages bool }
	var variants []variant
	for _, w := range windows {
		variants = append(variants, variant{w, true, true})
	}
	last := windows[len(windows)-1]
	variants = append(variants, variant{last, false, true}, variant{last, true, false}) // the packed products; edge tiles staged alone
	for _, form := range wgForms {
		for _, v := range variants {
			window := v.window
			forEachPool(t, fmt.Sprintf("%v/%+v", form, v), func(t *testing.T, p *kernels.Pool) {
				defer kernels.SetSIMD(kernels.SetSIMD(kernels.SIMD{Elementwise: top.Elementwise, Window: window, ConvertLanes: top.ConvertLanes}))
				defer kernels.SetWinogradTiles(v.regs)()
				defer kernels.SetWinogradPadImages(v.padImages)()
				own := make([]float32, 1<<22)
				ran := 0
				conv := func(kind kernels.ConvKind) kerneltest.ConvFunc {
					return func(out, a, b, work []float32, g kernels.ConvGeom, f int) []float32 {
						if !kernels.WinogradOK(g) || f < 1 {
							return kernels.ConvOn(p, kind, kernels.ConvAuto, out, a, b, work, g, f)
						}
						if need := kernels.WinogradWork(form, kind, g, f); len(work) < need {
							work = own[:need]
						}
						if !kernels.Winograd(p, form, kind, out, a, b, work, g, f) {
							t.Errorf("%v %+v: Winograd did not run", kind, g)
						}
						ran++
						return out
					}
				}
				kerneltest.Run(t, kerneltest.Impl{Name: "winograd", Threads: p.Threads(),
					Conv2D: conv(kernels.ConvForward), Conv2DBackpropInput: conv(kernels.ConvInputGrad), Conv2DBackpropFilter: conv(kernels.ConvFilterGrad)})
				if ran == 0 {
					t.Error("no case of the suite ran Winograd")
				}
			})
		}
	}
}
