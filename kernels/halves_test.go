package kernels_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// TestImageHalvesMatchOneThread runs convolution and max pooling on
// batches large enough to be split between threads (halves.go, jobs.go),
// and checks every result against the same kernels on one thread, bit for
// bit, on two and three threads, also with several goroutines calling at
// once. The cases cover a filter product whose inner size K = KH·KW·C is
// not a whole number of micro-tiles and exceeds one cache block (549), same
// padding with strides, a first layer (K = 9: one micro-tile of filter
// rows, whose chunks are summed in two groups), and a workspace of one
// image.
func TestImageHalvesMatchOneThread(t *testing.T) {
	for _, tc := range []struct {
		name       string
		g, pool    kernels.ConvGeom
		f, workImg int
	}{
		{"24x24x8", kernels.NewConvGeom(8, 24, 24, 8, 3, 3, 1, 1, false), kernels.NewConvGeom(8, 24, 24, 8, 2, 2, 2, 2, false), 16, 8},
		{"12x13x61/same/stride", kernels.NewConvGeom(9, 12, 13, 61, 3, 3, 2, 1, true), kernels.NewConvGeom(9, 12, 13, 61, 3, 3, 2, 2, true), 40, 3},
		{"28x28x1/first-layer", kernels.NewConvGeom(48, 28, 28, 1, 3, 3, 1, 1, false), kernels.NewConvGeom(48, 28, 28, 1, 2, 2, 2, 2, false), 32, 48},
		{"20x20x16/one-image-workspace", kernels.NewConvGeom(7, 20, 20, 16, 3, 3, 1, 1, false), kernels.NewConvGeom(7, 20, 20, 16, 2, 2, 2, 2, false), 32, 1},
	} {
		t.Run(tc.name, func(t *testing.T) { testHalves(t, tc.g, tc.pool, tc.f, tc.workImg) })
	}
}

func testHalves(t *testing.T, g, g2 kernels.ConvGeom, f, workImg int) {
	rng := rand.New(rand.NewPCG(5, 6))
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	x := rnd(g.N * g.H * g.W * g.C)
	filter := rnd(g.KH * g.KW * g.C * f)
	dy := rnd(g.N * g.OH * g.OW * f)
	pdy := rnd(g.N * g2.OH * g2.OW * g.C)
	work := make([]float32, g.Im2ColSize(workImg))
	run := func() [][]float32 {
		out := make([]float32, g.N*g.OH*g.OW*f)
		dx := make([]float32, len(x))
		df := make([]float32, len(filter))
		mp := make([]float32, len(pdy))
		mg := make([]float32, len(x))
		w := append([]float32(nil), work...)
		kernels.Conv2D(out, x, filter, w, g, f)
		kernels.Conv2DBackpropInput(dx, dy, filter, w, g, f)
		kernels.Conv2DBackpropFilter(df, x, dy, w, g, f)
		kernels.MaxPool2D(mp, x, g2)
		kernels.MaxPool2DGrad(mg, x, pdy, g2)
		return [][]float32{out, dx, df, mp, mg}
	}
	old := kernels.Threads()
	defer kernels.SetThreads(old)
	kernels.SetThreads(1)
	want := run()
	names := []string{"conv2d", "backprop input", "backprop filter", "max pool", "max pool grad"}
	for _, threads := range []int{2, 3} {
		kernels.SetThreads(threads)
		var wg sync.WaitGroup
		results := make([][][]float32, 3)
		for i := range results {
			wg.Add(1)
			go func() { defer wg.Done(); results[i] = run() }()
		}
		wg.Wait()
		for _, got := range results {
			for k := range want {
				for i := range want[k] {
					if math.Float32bits(got[k][i]) != math.Float32bits(want[k][i]) {
						t.Fatalf("%s [%d]: got %v on %d threads, want %v (one thread)", names[k], i, got[k][i], threads, want[k][i])
					}
				}
			}
		}
	}
	if g.N*g.H*g.W*g.C < 1<<15 {
		t.Fatal("the batch is too small to be split: the test proves nothing")
	}
}

// TestRowJobsMatchReference checks SumRows and ReluGrad in float32, which
// run in assembly and split over the pool when large, bit for bit against
// plain loops (columns summed over the rows in order from +0) on one, two
// and three threads, with column counts that are and are not multiples of
// sixteen.
func TestRowJobsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	old := kernels.Threads()
	defer kernels.SetThreads(old)
	for _, threads := range []int{1, 2, 3} {
		kernels.SetThreads(threads)
		for _, cols := range []int{8, 16, 48, 64, 70, 100} {
			rows := (1<<16)/cols + 3
			x := make([]float32, rows*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			want := make([]float32, cols)
			for r := 0; r < rows; r++ {
				for c := range want {
					want[c] += x[r*cols+c]
				}
			}
			got := kernels.SumRows(make([]float32, cols), x, rows, cols)
			for c := range want {
				if math.Float32bits(got[c]) != math.Float32bits(want[c]) {
					t.Fatalf("SumRows %dx%d on %d threads [%d]: got %v, want %v", rows, cols, threads, c, got[c], want[c])
				}
			}
		}
		const n = 1<<17 + 37
		x, g := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			g[i] = float32(rng.NormFloat64())
		}
		got := kernels.ReluGrad(make([]float32, n), x, g)
		for i := range x {
			want := float32(0)
			if x[i] > 0 {
				want = g[i]
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("ReluGrad on %d threads [%d]: got %v, want %v", threads, i, got[i], want)
			}
		}
	}
}
