package kernels_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// TestImageHalvesMatchOneThread runs convolution and max pooling on a batch
// large enough to be split between two goroutines, and checks every result
// against the same kernels on one thread, bit for bit, also with several
// goroutines calling at once.
func TestImageHalvesMatchOneThread(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	g := kernels.NewConvGeom(8, 24, 24, 8, 3, 3, 1, 1, false) // 8 images of 24x24x8: 36,864 elements
	g2 := kernels.NewConvGeom(8, 24, 24, 8, 2, 2, 2, 2, false)
	const f = 16
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
	work := make([]float32, g.Im2ColSize(g.N))
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
	kernels.SetThreads(2)
	var wg sync.WaitGroup
	results := make([][][]float32, 3)
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = run() }()
	}
	wg.Wait()
	names := []string{"conv2d", "backprop input", "backprop filter", "max pool", "max pool grad"}
	for _, got := range results {
		for k := range want {
			for i := range want[k] {
				if math.Float32bits(got[k][i]) != math.Float32bits(want[k][i]) {
					t.Fatalf("%s [%d]: %v split, %v on one thread", names[k], i, got[k][i], want[k][i])
				}
			}
		}
	}
	if g.N*g.H*g.W*g.C < 1<<15 {
		t.Fatal("the batch is too small to be split: the test proves nothing")
	}
}
