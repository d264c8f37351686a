package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
	"github.com/headroom-ml/headroom/tensor"
)

// bgemmPath is one implementation of MatMulBF16: the AVX512_BF16 tier, or
// the fallback on one float32 tier.
type bgemmPath struct {
	name string
	asm  bool
	tier string // float32 tier of the fallback
}

// bgemmPaths lists the AVX512_BF16 tier where this CPU has it, then the
// fallback on every float32 tier.
func bgemmPaths() []bgemmPath {
	var ps []bgemmPath
	if kernels.BgemmHasAsm() {
		ps = append(ps, bgemmPath{name: "avx512bf16", asm: true})
	}
	for _, tier := range kernels.GemmTierNames() {
		ps = append(ps, bgemmPath{name: "fallback-" + tier, tier: tier})
	}
	return ps
}

// use selects p and returns a function that restores the previous paths.
func (p bgemmPath) use() (restore func()) {
	r1 := kernels.UseBgemmAsm(p.asm)
	r2 := func() {}
	if p.tier != "" {
		r2 = kernels.UseGemmTier(p.tier)
	}
	return func() { r2(); r1() }
}

// forEachBgemmConfig runs f on every path of MatMulBF16, on a Pool of its
// own of 1 and of 3 threads. On 3, every product is split, however small.
func forEachBgemmConfig(t *testing.T, f func(t *testing.T, p *kernels.Pool)) {
	defer kernels.SplitAlways()()
	for _, path := range bgemmPaths() {
		for _, threads := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%dT", path.name, threads), func(t *testing.T) {
				defer path.use()()
				p := kernels.NewPool(threads)
				defer p.Close()
				f(t, p)
			})
		}
	}
}

// matMulBF16On returns MatMulBF16On on p in MatMul's signature.
func matMulBF16On(p *kernels.Pool) kerneltest.MatMulFunc {
	return func(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
		return kernels.MatMulBF16On(p, dst, a, b, m, n, k, transA, transB, accumulate)
	}
}

// checkBF16 runs the shared suite's check of one product (kerneltest's
// BF16 rule against the bfloat16-rounded float64 product, guards, unchanged
// inputs) on MatMulBF16 on p (nil: the default pool), with operands drawn
// from r.
func checkBF16(t *testing.T, p *kernels.Pool, r *rand.Rand, m, n, k int, ta, tb, acc bool) {
	t.Helper()
	mm := kernels.MatMulBF16
	if p != nil {
		mm = matMulBF16On(p)
	}
	kerneltest.CheckMatMulBF16(t, mm, m, n, k, ta, tb, acc, r.Uint64())
}

// TestMatMulBF16Suite runs the shared suite on MatMulBF16 on every path and
// pools of 1 and 3 threads: every combination of the sizes 1, 7 and 33 and 1023 in
// each dimension, every transpose variant and accumulate, the rounding of
// each operand (ties, overflow, NaN), the IEEE cases the packing must not
// hide, guards around dst, and no allocation.
func TestMatMulBF16Suite(t *testing.T) {
	forEachBgemmConfig(t, func(t *testing.T, p *kernels.Pool) {
		kerneltest.Run(t, kerneltest.Impl{Name: "bgemm", Threads: p.Threads(), MatMulBF16: matMulBF16On(p)})
	})
}

// TestMatMulBF16Random compares MatMulBF16 with the reference on random
// shapes with small cache blocks, so that every loop (several A panels, K
// blocks, odd K blocks and B blocks per thread, edge tiles both ways) runs,
// and on a few shapes with the real blocking, several K blocks deep.
func TestMatMulBF16Random(t *testing.T) {
	forEachBgemmConfig(t, func(t *testing.T, p *kernels.Pool) {
		r := rand.New(rand.NewPCG(9, 9))
		t.Run("small blocks", func(t *testing.T) {
			defer kernels.UseGemmBlocking(15, 24, 64)()
			for range 8 {
				m, n, k := 1+r.IntN(70), 1+r.IntN(150), 1+r.IntN(50)
				for _, v := range variants {
					checkBF16(t, p, r, m, n, k, v.ta, v.tb, v.acc)
				}
			}
		})
		t.Run("full blocks", func(t *testing.T) {
			shapes := [][3]int{{40, 90, 2500}, {130, 17, 600}, {13, 16, 77}}
			if raceEnabled {
				shapes = [][3]int{{13, 40, 1100}, {13, 16, 77}}
			}
			for _, s := range shapes {
				v := variants[r.IntN(len(variants))]
				checkBF16(t, p, r, s[0], s[1], s[2], v.ta, v.tb, v.acc)
			}
		})
	})
}

// TestMatMulBF16FallbackIsSgemm checks that the fallback is Sgemm on the
// rounded operands, bit for bit, on every float32 tier: the same tile, the
// same sums, only the packing rounds.
func TestMatMulBF16FallbackIsSgemm(t *testing.T) {
	defer kernels.UseBgemmAsm(false)()
	round := func(x []float32) []float32 {
		y := make([]float32, len(x))
		for i, v := range x {
			y[i] = tensor.ToBFloat16(v).Float32()
		}
		return y
	}
	for _, tier := range kernels.GemmTierNames() {
		t.Run(tier, func(t *testing.T) {
			defer kernels.WithoutExternalSgemm()()
			defer kernels.UseGemmTier(tier)()
			r := rand.New(rand.NewPCG(8, 8))
			for _, s := range [][3]int{{1, 1, 1}, {13, 33, 7}, {70, 9, 130}, {40, 100, 600}} {
				m, n, k := s[0], s[1], s[2]
				for _, v := range variants {
					a, b, dst0 := randSlice(r, m*k), randSlice(r, k*n), randSlice(r, m*n)
					want := kernels.Sgemm(append([]float32(nil), dst0...), round(a), round(b), m, n, k, v.ta, v.tb, v.acc)
					got := kernels.MatMulBF16(append([]float32(nil), dst0...), a, b, m, n, k, v.ta, v.tb, v.acc)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Errorf("m=%d n=%d k=%d transA=%v transB=%v accumulate=%v: element %d: got %v, want %v (Sgemm of the rounded operands)",
								m, n, k, v.ta, v.tb, v.acc, i, got[i], want[i])
							break
						}
					}
				}
			}
		})
	}
}

// TestMatMulBF16Threads checks that results are bit-identical on 1, 2 and 3
// threads, every product split as far as it goes, on each path.
func TestMatMulBF16Threads(t *testing.T) {
	defer kernels.SplitAlways()()
	shapes := [][3]int{{100, 70, 301}, {37, 260, 64}, {300, 9, 1025}}
	if raceEnabled {
		shapes = [][3]int{{50, 70, 31}, {13, 100, 20}}
	}
	for _, p := range bgemmPaths() {
		t.Run(p.name, func(t *testing.T) {
			defer p.use()()
			r := rand.New(rand.NewPCG(2, 2))
			for _, s := range shapes {
				m, n, k := s[0], s[1], s[2]
				for _, v := range variants {
					a, b, dst0 := randSlice(r, m*k), randSlice(r, k*n), randSlice(r, m*n)
					var first []float32
					for _, threads := range []int{1, 2, 3} {
						restore := kernels.UseThreads(threads)
						got := kernels.MatMulBF16(append([]float32(nil), dst0...), a, b, m, n, k, v.ta, v.tb, v.acc)
						restore()
						if first == nil {
							first = got
							continue
						}
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
								t.Errorf("m=%d n=%d k=%d transA=%v transB=%v accumulate=%v: element %d on %d threads: got %v, want %v (1 thread)",
									m, n, k, v.ta, v.tb, v.acc, i, threads, got[i], first[i])
								break
							}
						}
					}
				}
			}
		})
	}
}

// TestMatMulBF16NoAllocs checks that a 256³ product allocates nothing
// after the first call, on pools of 1 and 3 threads and every path.
func TestMatMulBF16NoAllocs(t *testing.T) {
	n := 256
	if raceEnabled {
		n = 64
	}
	a, b, dst := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	forEachBgemmConfig(t, func(t *testing.T, p *kernels.Pool) {
		for _, v := range variants[:4] {
			if allocs := testing.AllocsPerRun(2, func() { kernels.MatMulBF16On(p, dst, a, b, n, n, n, v.ta, v.tb, v.acc) }); allocs != 0 {
				t.Errorf("transA=%v transB=%v: %v allocations per call, want 0", v.ta, v.tb, allocs)
			}
		}
	})
}

// TestMatMulBF16Concurrent calls MatMulBF16 and Sgemm from several
// goroutines at once (run with -race): the pool runs them one after another
// and each result is right.
func TestMatMulBF16Concurrent(t *testing.T) {
	defer kernels.WithoutExternalSgemm()()
	defer kernels.UseThreads(2)()
	defer kernels.SplitAlways()()
	const m, n, k = 40, 70, 51
	r := rand.New(rand.NewPCG(4, 4))
	a, b := randSlice(r, m*k), randSlice(r, k*n)
	wantBF16 := kernels.MatMulBF16(make([]float32, m*n), a, b, m, n, k, true, false, false)
	wantF32 := kernels.Sgemm(make([]float32, m*n), a, b, m, n, k, true, false, false)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Go(func() {
			dst := make([]float32, m*n)
			for range 5 {
				want := wantBF16
				if g%2 == 0 {
					kernels.MatMulBF16(dst, a, b, m, n, k, true, false, false)
				} else {
					kernels.Sgemm(dst, a, b, m, n, k, true, false, false)
					want = wantF32
				}
				for i := range dst {
					if dst[i] != want[i] {
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

// TestMatMulBF16Subnormals pins down where the two paths differ: the
// fallback keeps subnormal operands and sums, as float32 arithmetic does;
// VDPBF16PS treats subnormal bfloat16 inputs as zero and flushes subnormal
// results to zero (Intel SDM Vol. 2C, VDPBF16PS: "DAZ, FTZ"; so on Zen 4).
func TestMatMulBF16Subnormals(t *testing.T) {
	sub := math.Float32frombits(0x00010000) // bfloat16 0x0001, the smallest subnormal
	big := float32(math.Ldexp(1, 100))
	tiny, small := float32(math.Ldexp(1, -100)), float32(math.Ldexp(1, -30)) // product 2^-130
	for _, p := range bgemmPaths() {
		t.Run(p.name, func(t *testing.T) {
			defer p.use()()
			wantSub, wantTiny := float32(math.Ldexp(1, -133)*math.Ldexp(1, 100)), float32(math.Ldexp(1, -130))
			if p.asm {
				wantSub, wantTiny = 0, 0
			}
			if got := kernels.MatMulBF16(make([]float32, 1), []float32{sub}, []float32{big}, 1, 1, 1, false, false, false)[0]; got != wantSub {
				t.Errorf("subnormal·2^100: got %v, want %v", got, wantSub)
			}
			if got := kernels.MatMulBF16(make([]float32, 1), []float32{tiny}, []float32{small}, 1, 1, 1, false, false, false)[0]; got != wantTiny {
				t.Errorf("2^-100·2^-30: got %v, want %v", got, wantTiny)
			}
		})
	}
}

func TestMatMulBF16Panics(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	mustPanic(t, "MatMulBF16: len(b) = 5, want 6", func() { kernels.MatMulBF16(f(4), f(6), f(5), 2, 2, 3, false, false, false) })
	mustPanic(t, "MatMulBF16: negative size", func() { kernels.MatMulBF16(f(0), f(0), f(0), -1, 0, 0, false, false, false) })
}

// FuzzMatMulBF16 compares MatMulBF16 with the reference on shapes and
// layouts chosen by the fuzzer (sizes up to 80, so every edge-tile
// combination and odd k is reachable), on the default path and thread count.
func FuzzMatMulBF16(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint8(1), uint8(0), uint64(1))
	f.Add(uint8(13), uint8(33), uint8(17), uint8(7), uint64(2))
	f.Add(uint8(80), uint8(5), uint8(65), uint8(2), uint64(3))
	f.Fuzz(func(t *testing.T, m, n, k, flags uint8, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 1))
		checkBF16(t, nil, r, int(m%81), int(n%81), int(k%81), flags&1 != 0, flags&2 != 0, flags&4 != 0)
	})
}
