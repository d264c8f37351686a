package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
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

// forEachBgemmConfig runs f on every path of MatMulBF16, on 1 and 2
// threads. On 2, every product is split, however small.
func forEachBgemmConfig(t *testing.T, f func(t *testing.T)) {
	defer kernels.SplitAlways()()
	for _, p := range bgemmPaths() {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%dT", p.name, threads), func(t *testing.T) {
				defer p.use()()
				defer kernels.UseThreads(threads)()
				f(t)
			})
		}
	}
}

// bf16 returns x rounded to bfloat16, widened to float64.
func bf16(x float32) float64 { return float64(tensor.ToBFloat16(x).Float32()) }

// matMulBF16Ref returns op(a)·op(b) (+ dst0 when acc) with a and b rounded
// to bfloat16 and the sums in float64, and the bound of each sum:
// S[i,j] = Σ_p |op(a)[i,p]·op(b)[p,j]| (+ |dst0[i,j]| when acc).
func matMulBF16Ref(dst0, a, b []float32, m, n, k int, ta, tb, acc bool) (want, scale []float64) {
	// ar: op(a) rounded, [m, k]; bc: op(b) rounded and transposed, [n, k].
	ar, bc := make([]float64, m*k), make([]float64, n*k)
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			if ta {
				ar[i*k+p] = bf16(a[p*m+i])
			} else {
				ar[i*k+p] = bf16(a[i*k+p])
			}
		}
	}
	for j := 0; j < n; j++ {
		for p := 0; p < k; p++ {
			if tb {
				bc[j*k+p] = bf16(b[j*k+p])
			} else {
				bc[j*k+p] = bf16(b[p*n+j])
			}
		}
	}
	want, scale = make([]float64, m*n), make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, abs float64
			if acc {
				s, abs = float64(dst0[i*n+j]), math.Abs(float64(dst0[i*n+j]))
			}
			for p, av := range ar[i*k : i*k+k] {
				prod := av * bc[j*k+p]
				s += prod
				abs += math.Abs(prod)
			}
			want[i*n+j], scale[i*n+j] = s, abs
		}
	}
	return want, scale
}

// checkBF16 compares MatMulBF16 with matMulBF16Ref on one random problem:
// |got - want| <= 1e-5·S, the forward error bound of a float32 sum.
func checkBF16(t *testing.T, r *rand.Rand, m, n, k int, ta, tb, acc bool) {
	t.Helper()
	a, b, dst0 := randSlice(r, m*k), randSlice(r, k*n), randSlice(r, m*n)
	want, scale := matMulBF16Ref(dst0, a, b, m, n, k, ta, tb, acc)
	as, bs := append([]float32(nil), a...), append([]float32(nil), b...)
	// dst sits between guards that must stay untouched.
	const guard = 16
	buf := make([]float32, m*n+2*guard)
	for i := range buf {
		buf[i] = -7
	}
	dst := buf[guard : guard+m*n]
	copy(dst, dst0)
	got := kernels.MatMulBF16(dst, a, b, m, n, k, ta, tb, acc)
	if len(got) != len(dst) || (len(dst) > 0 && &got[0] != &dst[0]) {
		t.Errorf("m=%d n=%d k=%d: MatMulBF16 did not return dst", m, n, k)
		return
	}
	for i, v := range buf {
		if (i < guard || i >= guard+m*n) && v != -7 {
			t.Errorf("m=%d n=%d k=%d transA=%v transB=%v accumulate=%v: wrote %v at %d outside dst",
				m, n, k, ta, tb, acc, v, i-guard)
			return
		}
	}
	for i := range want {
		tol := 1e-5 * scale[i]
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol) {
			t.Errorf("m=%d n=%d k=%d transA=%v transB=%v accumulate=%v: element [%d, %d]: got %v, want %v (tolerance %.3g)",
				m, n, k, ta, tb, acc, i/n, i%n, got[i], want[i], tol)
			return
		}
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(as[i]) {
			t.Errorf("m=%d n=%d k=%d: a[%d] changed: got %v, want %v", m, n, k, i, a[i], as[i])
			return
		}
	}
	for i := range b {
		if math.Float32bits(b[i]) != math.Float32bits(bs[i]) {
			t.Errorf("m=%d n=%d k=%d: b[%d] changed: got %v, want %v", m, n, k, i, b[i], bs[i])
			return
		}
	}
}

// TestMatMulBF16Sizes compares MatMulBF16 with the reference on every
// combination of the sizes 1, 7 and 33, and on 1023 in each dimension,
// with every transpose variant and accumulate.
func TestMatMulBF16Sizes(t *testing.T) {
	forEachBgemmConfig(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 5))
		for _, m := range []int{1, 7, 33} {
			for _, n := range []int{1, 7, 33} {
				for _, k := range []int{1, 7, 33} {
					for _, v := range variants {
						checkBF16(t, r, m, n, k, v.ta, v.tb, v.acc)
					}
				}
			}
		}
		shapes := [][3]int{{1023, 7, 33}, {7, 1023, 33}, {33, 7, 1023}}
		if raceEnabled {
			shapes = [][3]int{{1023, 7, 7}, {7, 1023, 9}, {9, 7, 1023}}
		}
		for _, s := range shapes {
			for _, v := range variants[:4] {
				checkBF16(t, r, s[0], s[1], s[2], v.ta, v.tb, true)
			}
		}
		if !raceEnabled {
			v := variants[r.IntN(len(variants))]
			checkBF16(t, r, 1023, 33, 1023, v.ta, v.tb, v.acc)
		}
	})
}

// TestMatMulBF16Random compares MatMulBF16 with the reference on random
// shapes with small cache blocks, so that every loop (several A panels, K
// blocks, odd K blocks and B blocks per thread, edge tiles both ways) runs,
// and on a few shapes with the real blocking, several K blocks deep.
func TestMatMulBF16Random(t *testing.T) {
	forEachBgemmConfig(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 9))
		t.Run("small blocks", func(t *testing.T) {
			defer kernels.UseGemmBlocking(15, 24, 64)()
			for range 8 {
				m, n, k := 1+r.IntN(70), 1+r.IntN(150), 1+r.IntN(50)
				for _, v := range variants {
					checkBF16(t, r, m, n, k, v.ta, v.tb, v.acc)
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
				checkBF16(t, r, s[0], s[1], s[2], v.ta, v.tb, v.acc)
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

// TestMatMulBF16Rounding checks that each operand is rounded to bfloat16 as
// tensor.ToBFloat16 before it is multiplied: x·1 and 1·x must give the
// rounded x (ties to even, NaN, ±Inf, overflow to Inf), through both
// operands and every layout.
func TestMatMulBF16Rounding(t *testing.T) {
	bits := []uint32{
		0x3f808000, // 1 + 2^-8: a tie, to even (1)
		0x3f818000, // a tie, to even (up)
		0x3f808001, // just above a tie: up
		0x3f807fff, // just below a tie: down
		0xbf818000, // negative tie
		0x7f7fffff, // largest float32: rounds to +Inf
		0xff7fffff, // to -Inf
		0x7f800000, // +Inf
		0xff800000, // -Inf
		0x7fc00000, // quiet NaN
		0x7f800001, // signalling NaN: stays NaN
		0xffffffff, // NaN with every payload bit
		0x80000000, // -0
		0x00800000, // smallest normal
	}
	forEachBgemmConfig(t, func(t *testing.T) {
		for _, u := range bits {
			x := math.Float32frombits(u)
			want := tensor.ToBFloat16(x).Float32()
			for _, v := range variants[:4] {
				for side := range 2 {
					a, b := []float32{x}, []float32{1}
					if side == 1 {
						a, b = b, a
					}
					got := kernels.MatMulBF16(make([]float32, 1), a, b, 1, 1, 1, v.ta, v.tb, false)[0]
					same := got == want || (math.IsNaN(float64(got)) && math.IsNaN(float64(want)))
					if !same {
						t.Errorf("%#08x (operand %d, transA=%v transB=%v): got %v (%#08x), want %v (%#08x)",
							u, side, v.ta, v.tb, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		}
	})
}

// TestMatMulBF16SpecialValues checks IEEE behaviour the packing must not
// hide: 0·Inf is NaN, NaN in dst is dropped without accumulate and kept
// with it, k = 0 gives zeros (or leaves dst), and neither padding (odd k,
// edge tiles) nor a row outside a tile leaks an Inf into dst.
func TestMatMulBF16SpecialValues(t *testing.T) {
	forEachBgemmConfig(t, func(t *testing.T) {
		inf, nan := float32(math.Inf(1)), float32(math.NaN())
		for _, tb := range []bool{false, true} {
			got := kernels.MatMulBF16(make([]float32, 1), []float32{0, 1}, []float32{inf, 1}, 1, 1, 2, false, tb, false)
			if !math.IsNaN(float64(got[0])) {
				t.Errorf("[0 1]·[Inf 1]ᵀ (transB=%v): got %v, want NaN", tb, got[0])
			}
			// Odd k: the zero padding of the last pair meets an Inf only as 0·0.
			got = kernels.MatMulBF16(make([]float32, 1), []float32{1, 2, 3}, []float32{4, 5, inf}, 1, 1, 3, false, tb, false)
			if !math.IsInf(float64(got[0]), 1) {
				t.Errorf("[1 2 3]·[4 5 Inf]ᵀ (transB=%v): got %v, want +Inf", tb, got[0])
			}
		}
		if got := kernels.MatMulBF16([]float32{nan}, []float32{2}, []float32{3}, 1, 1, 1, false, false, false); got[0] != 6 {
			t.Errorf("overwrite NaN: got %v, want 6", got[0])
		}
		if got := kernels.MatMulBF16([]float32{nan}, []float32{2}, []float32{3}, 1, 1, 1, false, false, true); !math.IsNaN(float64(got[0])) {
			t.Errorf("accumulate into NaN: got %v, want NaN", got[0])
		}
		if got := kernels.MatMulBF16([]float32{3, 3}, nil, nil, 1, 2, 0, false, false, false); got[0] != 0 || got[1] != 0 {
			t.Errorf("k=0: got %v, want [0 0]", got)
		}
		if got := kernels.MatMulBF16([]float32{3, 3}, nil, nil, 2, 1, 0, true, true, true); got[0] != 3 || got[1] != 3 {
			t.Errorf("k=0 accumulate: got %v, want [3 3]", got)
		}
		// An Inf in a row of A or a column of B that is not in an element's
		// sum must not reach it (13 rows and 33 columns: edge tiles).
		const m, n, k = 13, 33, 5
		a, b := make([]float32, m*k), make([]float32, k*n)
		for i := range a {
			a[i] = 1
		}
		for i := range b {
			b[i] = 1
		}
		for p := 0; p < k; p++ {
			a[(m-1)*k+p] = inf // last row of A
			b[p*n+n-1] = inf   // last column of B
		}
		got := kernels.MatMulBF16(make([]float32, m*n), a, b, m, n, k, false, false, false)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				want := float32(k)
				if i == m-1 || j == n-1 {
					want = inf
				}
				if got[i*n+j] != want {
					t.Errorf("Inf in the last row and column: element [%d, %d]: got %v, want %v", i, j, got[i*n+j], want)
				}
			}
		}
	})
}

// TestMatMulBF16NoAllocs checks that a 256³ product allocates nothing
// after the first call, on 1 and 2 threads and every path.
func TestMatMulBF16NoAllocs(t *testing.T) {
	n := 256
	if raceEnabled {
		n = 64
	}
	a, b, dst := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	forEachBgemmConfig(t, func(t *testing.T) {
		for _, v := range variants[:4] {
			if allocs := testing.AllocsPerRun(2, func() { kernels.MatMulBF16(dst, a, b, n, n, n, v.ta, v.tb, v.acc) }); allocs != 0 {
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
		checkBF16(t, r, int(m%81), int(n%81), int(k%81), flags&1 != 0, flags&2 != 0, flags&4 != 0)
	})
}
