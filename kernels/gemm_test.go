package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
)

// forEachConfig runs f for every micro-kernel tier this CPU has, on a
// Pool of its own of 1 and of 3 threads. On 3, every product is split,
// however small.
func forEachConfig(t *testing.T, f func(t *testing.T, p *kernels.Pool)) {
	defer kernels.WithoutExternalSgemm()()
	defer kernels.SplitAlways()()
	for _, tier := range kernels.GemmTierNames() {
		for _, threads := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%dT", tier, threads), func(t *testing.T) {
				defer kernels.UseGemmTier(tier)()
				p := kernels.NewPool(threads)
				defer p.Close()
				f(t, p)
			})
		}
	}
}

// TestSgemmSuite runs the shared suite on Sgemm as MatMul, against the
// reference loops, on every tier and pools of 1 and 3 threads: odd sizes (1, 7, 33,
// 1023), all transpose variants, with and without accumulate, the IEEE
// cases the packing must not hide (0·Inf, NaN in dst, k = 0, an Inf in an
// edge tile's row), guards around dst, and no allocation.
func TestSgemmSuite(t *testing.T) {
	defer kernels.UseMatMulRef()()
	forEachConfig(t, func(t *testing.T, p *kernels.Pool) {
		kerneltest.Run(t, kerneltest.Impl{Name: "sgemm", Threads: p.Threads(), MatMul: sgemmOn(p)})
	})
}

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(2*r.Float64() - 1)
	}
	return x
}

// checkSgemm runs the shared suite's check of one product (kerneltest's sum
// rule against MatMulRef, guards, unchanged inputs) on Sgemm on p (nil: the
// default pool), with operands drawn from r.
func checkSgemm(t *testing.T, p *kernels.Pool, r *rand.Rand, m, n, k int, ta, tb, acc bool) {
	t.Helper()
	mm := kernels.Sgemm
	if p != nil {
		mm = sgemmOn(p)
	}
	kerneltest.CheckMatMul(t, mm, m, n, k, ta, tb, acc, r.Uint64())
}

// TestSgemmRandom compares Sgemm with MatMulRef on random shapes, every
// transpose variant and accumulate, with small cache blocks so that every
// loop (several A panels, K blocks and B blocks per thread, edge tiles in
// both directions) runs, and on a few shapes with the real blocking.
func TestSgemmRandom(t *testing.T) {
	forEachConfig(t, func(t *testing.T, p *kernels.Pool) {
		r := rand.New(rand.NewPCG(7, 7))
		t.Run("small blocks", func(t *testing.T) {
			defer kernels.UseGemmBlocking(16, 24, 64)()
			for range 12 {
				m, n, k := 1+r.IntN(70), 1+r.IntN(150), 1+r.IntN(50)
				for _, v := range variants {
					checkSgemm(t, p, r, m, n, k, v.ta, v.tb, v.acc)
				}
			}
		})
		t.Run("full blocks", func(t *testing.T) {
			shapes := [][3]int{{1023, 33, 65}, {7, 1023, 129}, {45, 97, 1023}, {130, 70, 400}}
			if raceEnabled {
				shapes = [][3]int{{1023, 9, 7}, {7, 300, 29}, {13, 17, 600}}
			}
			for _, s := range shapes {
				v := variants[r.IntN(len(variants))]
				checkSgemm(t, p, r, s[0], s[1], s[2], v.ta, v.tb, v.acc)
			}
		})
	})
}

var variants = func() (v []struct{ ta, tb, acc bool }) {
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			for _, acc := range []bool{false, true} {
				v = append(v, struct{ ta, tb, acc bool }{ta, tb, acc})
			}
		}
	}
	return v
}()

// TestSgemmNoAllocs checks that a 512³ product allocates nothing after the
// first call, on pools of 1 and 3 threads and every tier, and on the
// default pool.
func TestSgemmNoAllocs(t *testing.T) {
	n := 512
	if raceEnabled {
		n = 64
	}
	a, b, dst := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	forEachConfig(t, func(t *testing.T, p *kernels.Pool) {
		for _, v := range variants[:4] {
			if allocs := testing.AllocsPerRun(2, func() { kernels.SgemmOn(p, dst, a, b, n, n, n, v.ta, v.tb, v.acc) }); allocs != 0 {
				t.Errorf("transA=%v transB=%v: %v allocations per call, want 0", v.ta, v.tb, allocs)
			}
		}
	})
	t.Run("default", func(t *testing.T) {
		for _, v := range variants[:4] {
			if allocs := testing.AllocsPerRun(2, func() { kernels.Sgemm(dst, a, b, n, n, n, v.ta, v.tb, v.acc) }); allocs != 0 {
				t.Errorf("transA=%v transB=%v: %v allocations per call, want 0", v.ta, v.tb, allocs)
			}
		}
	})
}

// TestSgemmConcurrent calls Sgemm from several goroutines at once (run with
// -race): the pool runs them one after another and each result is right.
func TestSgemmConcurrent(t *testing.T) {
	defer kernels.UseThreads(2)()
	defer kernels.SplitAlways()()
	const m, n, k = 40, 70, 50
	r := rand.New(rand.NewPCG(3, 3))
	a, b := randSlice(r, m*k), randSlice(r, k*n)
	want := kernels.MatMulRef(make([]float32, m*n), a, b, m, n, k, false, true, false)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Go(func() {
			dst := make([]float32, m*n)
			for range 5 {
				kernels.Sgemm(dst, a, b, m, n, k, false, true, false)
				for i := range dst {
					if d := math.Abs(float64(dst[i] - want[i])); d > 1e-4 {
						errs <- fmt.Sprintf("goroutine %d: element %d: got %v, want %v", g, i, dst[i], want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestSetThreads checks the thread count and the workspace it reports, and
// that products are right after workers were started, stopped, and left
// idle long enough to park.
func TestSetThreads(t *testing.T) {
	defer kernels.UseThreads(1)()
	defer kernels.SplitAlways()()
	one := kernels.NewPool(1).GemmWorkspaceBytes()
	if one <= 0 {
		t.Fatalf("GemmWorkspaceBytes on 1 thread: got %d, want > 0", one)
	}
	for _, n := range []int{3, 2, 1} {
		kernels.SetThreads(n)
		if got := kernels.Threads(); got != n {
			t.Errorf("Threads after SetThreads(%d): got %d, want %d", n, got, n)
		}
		if p := kernels.NewPool(n); p.GemmWorkspaceBytes() != int64(n)*one {
			t.Errorf("GemmWorkspaceBytes on %d threads: got %d, want %d", n, p.GemmWorkspaceBytes(), int64(n)*one)
			p.Close()
		} else {
			p.Close()
		}
		r := rand.New(rand.NewPCG(1, uint64(n)))
		checkSgemm(t, nil, r, 50, 300, 20, false, false, true)
		time.Sleep(2 * time.Millisecond) // workers park
		checkSgemm(t, nil, r, 50, 300, 20, true, false, false)
	}
}

func TestSgemmPanics(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	mustPanic(t, "Sgemm: len(b) = 5, want 6", func() { kernels.Sgemm(f(4), f(6), f(5), 2, 2, 3, false, false, false) })
	mustPanic(t, "Sgemm: negative size", func() { kernels.Sgemm(f(0), f(0), f(0), 0, -1, 0, false, false, false) })
	mustPanic(t, "MatMulRef: len(dst) = 3, want 4", func() { kernels.MatMulRef(f(3), f(6), f(6), 2, 2, 3, false, false, false) })
}

// FuzzSgemm compares Sgemm with MatMulRef on shapes and layouts chosen by
// the fuzzer (sizes up to 80, so every edge-tile combination of both tiles
// is reachable), on the active tier and the current thread count.
func FuzzSgemm(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint8(1), uint8(0), uint64(1))
	f.Add(uint8(13), uint8(33), uint8(17), uint8(7), uint64(2))
	f.Add(uint8(80), uint8(5), uint8(64), uint8(2), uint64(3))
	f.Fuzz(func(t *testing.T, m, n, k, flags uint8, seed uint64) {
		defer kernels.WithoutExternalSgemm()()
		r := rand.New(rand.NewPCG(seed, 0))
		checkSgemm(t, nil, r, int(m%81), int(n%81), int(k%81), flags&1 != 0, flags&2 != 0, flags&4 != 0)
	})
}
