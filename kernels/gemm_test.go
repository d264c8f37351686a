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

// forEachConfig runs f for every micro-kernel tier this CPU has, on 1 and 2
// threads. On 2, every product is split, however small.
func forEachConfig(t *testing.T, f func(t *testing.T)) {
	defer kernels.WithoutExternalSgemm()()
	defer kernels.SplitAlways()()
	for _, tier := range kernels.GemmTierNames() {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%dT", tier, threads), func(t *testing.T) {
				defer kernels.UseGemmTier(tier)()
				defer kernels.UseThreads(threads)()
				f(t)
			})
		}
	}
}

// TestSgemmSuite runs the shared suite on Sgemm as MatMul, against the
// reference loops: odd sizes (1, 7, 33, 1023), all transpose variants, with
// and without accumulate, guards around dst, and no allocation.
func TestSgemmSuite(t *testing.T) {
	defer kernels.UseMatMulRef()()
	forEachConfig(t, func(t *testing.T) {
		kerneltest.Run(t, kerneltest.Impl{Name: "sgemm", MatMul: kernels.Sgemm})
	})
}

// sumBound returns S[i,j] = Σ_p |op(a)[i,p]·op(b)[p,j]| (+ |dst0[i,j]| when
// accumulating), the scale of kerneltest's closeness rule for sums.
func sumBound(dst0, a, b []float32, m, n, k int, ta, tb, acc bool) []float32 {
	abs := func(x []float32) []float32 {
		y := make([]float32, len(x))
		for i, v := range x {
			y[i] = float32(math.Abs(float64(v)))
		}
		return y
	}
	s := abs(dst0)
	return kernels.MatMulRef(s, abs(a), abs(b), m, n, k, ta, tb, acc)
}

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(2*r.Float64() - 1)
	}
	return x
}

// checkSgemm compares Sgemm with MatMulRef on one random problem.
func checkSgemm(t *testing.T, r *rand.Rand, m, n, k int, ta, tb, acc bool) {
	t.Helper()
	a, b, dst0 := randSlice(r, m*k), randSlice(r, k*n), randSlice(r, m*n)
	want := kernels.MatMulRef(append([]float32(nil), dst0...), a, b, m, n, k, ta, tb, acc)
	scale := sumBound(dst0, a, b, m, n, k, ta, tb, acc)
	got := kernels.Sgemm(append([]float32(nil), dst0...), a, b, m, n, k, ta, tb, acc)
	for i := range want {
		tol := 1e-5 * math.Max(1, float64(scale[i]))
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol) {
			t.Errorf("m=%d n=%d k=%d transA=%v transB=%v accumulate=%v: element [%d, %d]: got %v, want %v (tolerance %.3g)",
				m, n, k, ta, tb, acc, i/n, i%n, got[i], want[i], tol)
			return
		}
	}
}

// TestSgemmRandom compares Sgemm with MatMulRef on random shapes, every
// transpose variant and accumulate, with small cache blocks so that every
// loop (several A panels, K blocks and B blocks per thread, edge tiles in
// both directions) runs, and on a few shapes with the real blocking.
func TestSgemmRandom(t *testing.T) {
	forEachConfig(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 7))
		t.Run("small blocks", func(t *testing.T) {
			defer kernels.UseGemmBlocking(16, 24, 64)()
			for range 12 {
				m, n, k := 1+r.IntN(70), 1+r.IntN(150), 1+r.IntN(50)
				for _, v := range variants {
					checkSgemm(t, r, m, n, k, v.ta, v.tb, v.acc)
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
				checkSgemm(t, r, s[0], s[1], s[2], v.ta, v.tb, v.acc)
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

// TestSgemmSpecialValues checks IEEE behaviour the packing must not hide:
// 0·Inf is NaN, NaN in dst is dropped without accumulate and kept with it,
// k = 0 gives zeros (or leaves dst), and padding never leaks into dst.
func TestSgemmSpecialValues(t *testing.T) {
	forEachConfig(t, func(t *testing.T) {
		inf, nan := float32(math.Inf(1)), float32(math.NaN())
		for _, tb := range []bool{false, true} {
			got := kernels.Sgemm(make([]float32, 1), []float32{0, 1}, []float32{inf, 1}, 1, 1, 2, false, tb, false)
			if !math.IsNaN(float64(got[0])) {
				t.Errorf("[0 1]·[Inf 1]ᵀ (transB=%v): got %v, want NaN", tb, got[0])
			}
		}
		if got := kernels.Sgemm([]float32{nan}, []float32{2}, []float32{3}, 1, 1, 1, false, false, false); got[0] != 6 {
			t.Errorf("overwrite NaN: got %v, want 6", got[0])
		}
		if got := kernels.Sgemm([]float32{nan}, []float32{2}, []float32{3}, 1, 1, 1, false, false, true); !math.IsNaN(float64(got[0])) {
			t.Errorf("accumulate into NaN: got %v, want NaN", got[0])
		}
		if got := kernels.Sgemm([]float32{3, 3}, nil, nil, 1, 2, 0, false, false, false); got[0] != 0 || got[1] != 0 {
			t.Errorf("k=0: got %v, want [0 0]", got)
		}
		if got := kernels.Sgemm([]float32{3, 3}, nil, nil, 2, 1, 0, true, true, true); got[0] != 3 || got[1] != 3 {
			t.Errorf("k=0 accumulate: got %v, want [3 3]", got)
		}
		// An Inf in a row of A that is not in dst's tile must not reach it.
		a := []float32{1, 1, inf, inf} // [2, 2]
		b := []float32{1, 2, 3, 4}     // [2, 2]
		got := kernels.Sgemm(make([]float32, 4), a, b, 2, 2, 2, false, false, false)
		if got[0] != 4 || got[1] != 6 || !math.IsInf(float64(got[2]), 1) {
			t.Errorf("rows with Inf: got %v, want [4 6 +Inf +Inf]", got)
		}
	})
}

// TestSgemmNoAllocs checks that a 512³ product allocates nothing after the
// first call, on 1 and 2 threads and every tier.
func TestSgemmNoAllocs(t *testing.T) {
	n := 512
	if raceEnabled {
		n = 64
	}
	a, b, dst := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	forEachConfig(t, func(t *testing.T) {
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
	one := kernels.GemmWorkspaceBytes()
	if one <= 0 {
		t.Fatalf("GemmWorkspaceBytes on 1 thread: got %d, want > 0", one)
	}
	for _, n := range []int{3, 2, 1} {
		kernels.SetThreads(n)
		if got := kernels.Threads(); got != n {
			t.Errorf("Threads after SetThreads(%d): got %d, want %d", n, got, n)
		}
		if got := kernels.GemmWorkspaceBytes(); got != int64(n)*one {
			t.Errorf("GemmWorkspaceBytes on %d threads: got %d, want %d", n, got, int64(n)*one)
		}
		r := rand.New(rand.NewPCG(1, uint64(n)))
		checkSgemm(t, r, 50, 300, 20, false, false, true)
		time.Sleep(2 * time.Millisecond) // workers park
		checkSgemm(t, r, 50, 300, 20, true, false, false)
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
		checkSgemm(t, r, int(m%81), int(n%81), int(k%81), flags&1 != 0, flags&2 != 0, flags&4 != 0)
	})
}
