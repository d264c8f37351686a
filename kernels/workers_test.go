package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
)

// poolThreads are the thread counts of the pools every tier runs on: one,
// and three, which splits the jobs, the image halves and the elementwise
// jobs, and has more threads than some jobs have regions. Under the race
// detector, which slows the suite's reference loops many times over, only
// three: the count with concurrency to check (the tiers' arithmetic is
// checked by the runs without it).
var poolThreads = func() []int {
	if raceEnabled {
		return []int{3}
	}
	return []int{1, 3}
}()

// forEachPool runs f as subtest name/<n>T on a new Pool of each of
// poolThreads, closed after it.
func forEachPool(t *testing.T, name string, f func(t *testing.T, p *kernels.Pool)) {
	for _, threads := range poolThreads {
		t.Run(fmt.Sprintf("%s/%dT", name, threads), func(t *testing.T) {
			p := kernels.NewPool(threads)
			defer p.Close()
			f(t, p)
		})
	}
}

// onPool returns the float32 kernels that split their work over threads,
// run on p (their On versions) in the suite's signatures, with the kernels
// of the same families that use no pool (AvgPool2D, AvgPool2DGrad) as
// they are.
func onPool(p *kernels.Pool) kerneltest.Impl {
	type convOn = func(p *kernels.Pool, out, a, b, work []float32, g kernels.ConvGeom, f int) []float32
	conv := func(k convOn) kerneltest.ConvFunc {
		return func(out, a, b, work []float32, g kernels.ConvGeom, f int) []float32 {
			return k(p, out, a, b, work, g, f)
		}
	}
	return kerneltest.Impl{
		Name:    fmt.Sprintf("pool/%dT", p.Threads()),
		Threads: p.Threads(),

		ReluGrad: func(dst, x, g []float32) []float32 { return kernels.ReluGradOn(p, dst, x, g) },
		ReduceSum: func(dst, x []float32, xShape, dstStrides []int) []float32 {
			return kernels.ReduceSumOn(p, dst, x, xShape, dstStrides)
		},
		SumRows: func(dst, x []float32, rows, cols int) []float32 { return kernels.SumRowsOn(p, dst, x, rows, cols) },
		MatMul: func(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
			return kernels.MatMulOn(p, dst, a, b, m, n, k, transA, transB, accumulate)
		},
		MatMulBF16: func(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
			return kernels.MatMulBF16On(p, dst, a, b, m, n, k, transA, transB, accumulate)
		},
		AttentionForward: func(o, lse, q, k, v []float32, ap kernels.AttentionParams, work []float32) []float32 {
			return kernels.AttentionForwardOn(p, o, lse, q, k, v, ap, work)
		},
		AttentionBackward: func(dq, dk, dv, do, o, lse, q, k, v []float32, ap kernels.AttentionParams, work []float32) []float32 {
			return kernels.AttentionBackwardOn(p, dq, dk, dv, do, o, lse, q, k, v, ap, work)
		},
		MaxPool2D: func(dst, x []float32, g kernels.ConvGeom) []float32 { return kernels.MaxPool2DOn(p, dst, x, g) },
		MaxPool2DGrad: func(dx, x, dy []float32, g kernels.ConvGeom) []float32 {
			return kernels.MaxPool2DGradOn(p, dx, x, dy, g)
		},
		MaxPool2DReluGrad: func(dx, x, dy []float32, g kernels.ConvGeom) []float32 {
			return kernels.MaxPool2DReluGradOn(p, dx, x, dy, g)
		},
		AvgPool2D:                kernels.AvgPool2D[float32],
		AvgPool2DGrad:            kernels.AvgPool2DGrad[float32],
		Conv2D:                   conv(kernels.Conv2DOn[float32]),
		Conv2DBackpropInput:      conv(kernels.Conv2DBackpropInputOn[float32]),
		Conv2DBackpropFilter:     conv(kernels.Conv2DBackpropFilterOn[float32]),
		Conv2DBF16:               conv(kernels.Conv2DBF16On),
		Conv2DBackpropInputBF16:  conv(kernels.Conv2DBackpropInputBF16On),
		Conv2DBackpropFilterBF16: conv(kernels.Conv2DBackpropFilterBF16On),
	}
}

// sgemmOn returns SgemmOn on p in MatMul's signature.
func sgemmOn(p *kernels.Pool) kerneltest.MatMulFunc {
	return func(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
		return kernels.SgemmOn(p, dst, a, b, m, n, k, transA, transB, accumulate)
	}
}

// TestNewPool checks the thread count of new pools (<= 0: GOMAXPROCS, capped
// at MaxThreads) and the heap workspace they report.
func TestNewPool(t *testing.T) {
	one := kernels.NewPool(1)
	defer one.Close()
	per := one.GemmWorkspaceBytes()
	if per <= 0 {
		t.Fatalf("GemmWorkspaceBytes on 1 thread: got %d, want > 0", per)
	}
	tests := []struct {
		threads, want int
	}{
		{1, 1},
		{3, 3},
		{0, runtime.GOMAXPROCS(0)},
		{-2, runtime.GOMAXPROCS(0)},
		{kernels.MaxThreads + 1, kernels.MaxThreads},
	}
	for _, tt := range tests {
		p := kernels.NewPool(tt.threads)
		if got := p.Threads(); got != tt.want {
			t.Errorf("NewPool(%d).Threads(): got %d, want %d", tt.threads, got, tt.want)
		}
		if got := p.GemmWorkspaceBytes(); got != int64(tt.want)*per {
			t.Errorf("NewPool(%d).GemmWorkspaceBytes(): got %d, want %d", tt.threads, got, int64(tt.want)*per)
		}
		if p.Scratch() != nil || p.ScratchMisses() != 0 {
			t.Errorf("NewPool(%d): Scratch %v, ScratchMisses %d, want nil and 0", tt.threads, p.Scratch(), p.ScratchMisses())
		}
		p.Close()
	}
}

// TestPoolProductNoAllocs checks that a pool's product allocates nothing
// after the first call, with and without a Scratch, on 1 and 3 threads,
// every product split.
func TestPoolProductNoAllocs(t *testing.T) {
	defer kernels.WithoutExternalSgemm()()
	defer kernels.SplitAlways()()
	n := 256
	if raceEnabled {
		n = 64
	}
	a, b, dst := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	forEachPool(t, "sgemm", func(t *testing.T, p *kernels.Pool) {
		per := max(kernels.PackFloats(n, n, n, false), kernels.PackFloats(n, n, n, true))
		s := kernels.NewScratch(make([]byte, kernels.ScratchBytes(per, p.Threads())), per, p.Threads())
		for _, scratch := range []*kernels.Scratch{nil, s} {
			p.SetScratch(scratch)
			products := []struct {
				name string
				call func()
			}{
				{"SgemmOn", func() { kernels.SgemmOn(p, dst, a, b, n, n, n, false, true, false) }},
				{"MatMulOn", func() { kernels.MatMulOn(p, dst, a, b, n, n, n, true, false, true) }},
				{"MatMulBF16On", func() { kernels.MatMulBF16On(p, dst, a, b, n, n, n, false, false, false) }},
			}
			for _, c := range products {
				if allocs := testing.AllocsPerRun(3, c.call); allocs != 0 {
					t.Errorf("%s, scratch %v: %v allocations per call, want 0", c.name, scratch != nil, allocs)
				}
			}
		}
		p.ReleaseScratch(s)
	})
}

// countGoroutines returns runtime.NumGoroutine once it has stopped falling
// (goroutines of earlier tests may still be returning), within a second.
func countGoroutines() int {
	n := runtime.NumGoroutine()
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// goroutinesDownTo returns runtime.NumGoroutine once it is at most want,
// or after a second: a worker that has returned from its loop may still be
// counted for a moment while its goroutine exits.
func goroutinesDownTo(want int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 1000 && n > want; i++ {
		time.Sleep(time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// TestPoolClose checks that NewPool starts threads-1 workers and Close
// stops them all before it returns (no goroutine is left), with workers
// spinning, parked and never used; that a second Close does nothing; and
// that using a closed pool panics.
func TestPoolClose(t *testing.T) {
	defer kernels.SplitAlways()()
	a, b := make([]float32, 64*64), make([]float32, 64*64)
	tests := []struct {
		name string
		use  func(p *kernels.Pool)
	}{
		{"unused", func(*kernels.Pool) {}},
		{"spinning", func(p *kernels.Pool) {
			kernels.SgemmOn(p, make([]float32, 64*64), a, b, 64, 64, 64, false, false, false)
		}},
		{"parked", func(p *kernels.Pool) {
			kernels.SgemmOn(p, make([]float32, 64*64), a, b, 64, 64, 64, false, false, false)
			time.Sleep(5 * time.Millisecond) // longer than the spin
		}},
	}
	for _, tt := range tests {
		for _, threads := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/%dT", tt.name, threads), func(t *testing.T) {
				before := countGoroutines()
				p := kernels.NewPool(threads)
				if got := runtime.NumGoroutine() - before; got != threads-1 {
					t.Errorf("NewPool(%d) started %d goroutines, want %d", threads, got, threads-1)
				}
				tt.use(p)
				p.Close()
				if got := goroutinesDownTo(before); got != before {
					t.Errorf("after Close: %d goroutines, want %d (as before NewPool)", got, before)
				}
				p.Close() // does nothing
				mustPanic(t, "Pool used after Close", func() {
					kernels.SgemmOn(p, make([]float32, 64*64), a, b, 64, 64, 64, false, false, false)
				})
				mustPanic(t, "Pool used after Close", func() { p.Threads() })
			})
		}
	}
}

// poolRun is one goroutine of TestPoolsConcurrent: its pool, the pool's
// Scratch memory (NaN until a product packs into it), the counts of its
// Parallel parts and what went wrong.
type poolRun struct {
	pool    *kernels.Pool
	scratch []byte
	parts   [64]atomic.Int32
	errs    []string
}

// markPart counts part p of a Parallel job.
func markPart(arg any, p int) { arg.(*poolRun).parts[p].Add(1) }

// TestPoolsConcurrent runs two pools of different thread counts at once
// from two goroutines (run with -race): on each, products (float32 and
// bfloat16), the three convolution passes as jobs, a convolution as
// direct tiles (ParallelOn with the pool's own call state) and a Parallel
// job of the test's, again and again. Every result must equal, bit for
// bit, the same kernels on a pool of one thread (the results do not depend
// on the threads), and each pool must pack only into its own Scratch:
// ScratchMisses stays 0 on each, and its memory is written.
func TestPoolsConcurrent(t *testing.T) {
	defer kernels.WithoutExternalSgemm()()
	defer kernels.SplitAlways()()
	const m, n, k = 70, 90, 60
	// f = 24 (not a multiple of 16): the im2col jobs, packing into the
	// Scratch; g1 with 16 filters: the direct tiles where the CPU has them
	g, g1 := kernels.NewConvGeom(4, 13, 11, 8, 3, 3, 1, 2, true), kernels.NewConvGeom(3, 10, 12, 8, 3, 3, 1, 1, true)
	const f, f1 = 24, 16
	rounds := 100
	if raceEnabled {
		rounds = 5
	}
	r := rand.New(rand.NewPCG(11, 11))
	a, b := randSlice(r, m*k), randSlice(r, k*n)
	x, w, dy := randSlice(r, g.N*g.H*g.W*g.C), randSlice(r, g.KH*g.KW*g.C*f), randSlice(r, g.N*g.OH*g.OW*f)
	x1, w1 := randSlice(r, g1.N*g1.H*g1.W*g1.C), randSlice(r, g1.KH*g1.KW*g1.C*f1)
	per := max(kernels.PackFloats(m, n, k, false), kernels.PackFloats(m, n, k, true),
		kernels.ConvPackFloats(g, f, false), kernels.ConvPackFloats(g1, f1, false))
	work := func() []float32 { return make([]float32, max(g.Im2ColSize(2), g1.Im2ColSize(2))) } // two images a chunk

	// compute runs every kernel of the test on p into out (allocated when
	// nil) and returns out.
	compute := func(p *kernels.Pool, out [6][]float32, work []float32) [6][]float32 {
		if out[0] == nil {
			out = [6][]float32{make([]float32, m*n), make([]float32, len(dy)), make([]float32, len(x)),
				make([]float32, len(w)), make([]float32, m*n), make([]float32, g1.N*g1.OH*g1.OW*f1)}
		}
		kernels.SgemmOn(p, out[0], a, b, m, n, k, false, false, false)
		kernels.Conv2DOn(p, out[1], x, w, work, g, f)
		kernels.Conv2DBackpropInputOn(p, out[2], dy, w, work, g, f)
		kernels.Conv2DBackpropFilterOn(p, out[3], x, dy, work, g, f)
		kernels.MatMulBF16On(p, out[4], a, b, m, n, k, true, true, false)
		kernels.Conv2DOn(p, out[5], x1, w1, work, g1, f1)
		return out
	}
	ref := kernels.NewPool(1)
	defer ref.Close()
	want := compute(ref, [6][]float32{}, work())

	runs := []*poolRun{{pool: kernels.NewPool(2)}, {pool: kernels.NewPool(3)}}
	for _, run := range runs {
		defer run.pool.Close()
		threads := run.pool.Threads()
		run.scratch = make([]byte, kernels.ScratchBytes(per, threads))
		poison(run.scratch)
		run.pool.SetScratch(kernels.NewScratch(run.scratch, per, threads))
	}
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() {
			p, work := run.pool, work()
			var out [6][]float32
			for i := range rounds {
				out = compute(p, out, work)
				for o := range out {
					for j := range out[o] {
						if math.Float32bits(out[o][j]) != math.Float32bits(want[o][j]) {
							run.errs = append(run.errs, fmt.Sprintf("round %d, output %d, element %d: got %v, want %v", i, o, j, out[o][j], want[o][j]))
							break
						}
					}
				}
				kernels.ParallelOn(p, len(run.parts), markPart, run)
			}
			for i := range run.parts {
				if got := run.parts[i].Load(); got != int32(rounds) {
					run.errs = append(run.errs, fmt.Sprintf("Parallel part %d ran %d times, want %d", i, got, rounds))
				}
			}
		})
	}
	wg.Wait()
	for _, run := range runs {
		name := fmt.Sprintf("pool of %d threads", run.pool.Threads())
		for _, e := range run.errs {
			t.Errorf("%s: %s", name, e)
		}
		if d := run.pool.ScratchMisses(); d != 0 {
			t.Errorf("%s: %d scratch misses, want 0 (every product in its own Scratch)", name, d)
		}
		if !touched(run.scratch) {
			t.Errorf("%s: its Scratch was never packed into", name)
		}
	}
}

// TestPoolScratchIsItsOwn checks that a Scratch given to one pool is used
// by that pool only: products on another pool, and on the default pool,
// leave its memory untouched and count their own misses.
func TestPoolScratchIsItsOwn(t *testing.T) {
	defer kernels.WithoutExternalSgemm()()
	const m, n, k = 64, 96, 80
	r := rand.New(rand.NewPCG(12, 12))
	a, b := randSlice(r, m*k), randSlice(r, k*n)
	per := kernels.PackFloats(m, n, k, false)
	mine, other := kernels.NewPool(2), kernels.NewPool(2)
	defer mine.Close()
	defer other.Close()
	buf := make([]byte, kernels.ScratchBytes(per, 2))
	poison(buf)
	s := kernels.NewScratch(buf, per, 2)
	mine.SetScratch(s)
	defer mine.ReleaseScratch(s)

	dst := make([]float32, m*n)
	kernels.SgemmOn(other, dst, a, b, m, n, k, false, false, false)
	kernels.Sgemm(dst, a, b, m, n, k, false, false, false) // the default pool
	if touched(buf) {
		t.Fatalf("a product on another pool packed into this pool's Scratch")
	}
	if got := other.ScratchMisses(); got != 1 {
		t.Errorf("other pool: ScratchMisses %d, want 1 (no Scratch of its own)", got)
	}
	kernels.SgemmOn(mine, dst, a, b, m, n, k, false, false, false)
	if !touched(buf) || mine.ScratchMisses() != 0 {
		t.Errorf("this pool: Scratch used %v, ScratchMisses %d; want true, 0", touched(buf), mine.ScratchMisses())
	}
	if mine.Scratch() != s {
		t.Errorf("Scratch(): got %v, want %v", mine.Scratch(), s)
	}
	other.ReleaseScratch(s) // not other's: does nothing
	if mine.Scratch() != s {
		t.Errorf("after another pool's ReleaseScratch: Scratch() = %v, want %v", mine.Scratch(), s)
	}
}
