package kerneltest

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// bf16 returns x rounded to bfloat16 (to nearest, ties to even), widened to
// float64.
func bf16(x float32) float64 { return float64(tensor.ToBFloat16(x).Float32()) }

// matMulBF16Ref returns op(a)·op(b) (+ dst0 when acc) with a and b rounded to
// bfloat16 and the sums in float64, and the scale of each sum:
// S[i,j] = Σ_p |op(a)[i,p]·op(b)[p,j]| (+ |dst0[i,j]| when acc), both of
// the rounded operands.
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

// compareBF16 fails t at the first element outside the BF16 rule:
// |got - want| <= Tol·scale (no floor of 1), got == want always passing
// and NaN matching only NaN.
func compareBF16(t *testing.T, where string, got []float32, want, scale []float64) {
	t.Helper()
	for i := range want {
		g := float64(got[i])
		if g == want[i] || (g != g && want[i] != want[i]) {
			continue
		}
		if !(math.Abs(g-want[i]) <= Tol*scale[i]) {
			t.Errorf("%s: element %d: got %v, want %v (tolerance %.3g)", where, i, got[i], want[i], Tol*scale[i])
			return
		}
	}
}

// CheckMatMulBF16 runs f (MatMulBF16) on one problem, op(a): [m, k],
// op(b): [k, n], with a, b and dst drawn from seed in [-1, 1), and checks
// it under the BF16 rule against op(a)·op(b) on operands rounded to
// bfloat16, summed in float64; that it returns dst, writes nothing outside
// it, and leaves a and b unchanged. The suite runs it on its shapes; a
// test can run it on shapes of its own (random, fuzzed).
func CheckMatMulBF16(t *testing.T, f MatMulFunc, m, n, k int, transA, transB, accumulate bool, seed uint64) {
	t.Helper()
	r := newRand(seed)
	a, b, dst0 := uniform(r, m*k, -1, 1), uniform(r, k*n, -1, 1), uniform(r, m*n, -1, 1)
	where := name("m=%d n=%d k=%d transA=%v transB=%v accumulate=%v", m, n, k, transA, transB, accumulate)
	want, scale := matMulBF16Ref(dst0, a, b, m, n, k, transA, transB, accumulate)
	o, as, bs := newOut32(m*n), clone(a), clone(b)
	copy(o.dst(), dst0)
	got := f(o.dst(), a, b, m, n, k, transA, transB, accumulate)
	o.check(t, where, got)
	unchanged(t, where, "a", as, a)
	unchanged(t, where, "b", bs, b)
	compareBF16(t, where, o.dst(), want, scale)
}

// bf16RoundingBits are float32 operands whose rounding to bfloat16 must be
// that of tensor.ToBFloat16: ties to even both ways, just off a tie,
// overflow to ±Inf, infinities, NaNs (a signalling one stays NaN), -0 and
// the smallest normal.
var bf16RoundingBits = []uint32{
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

// testMatMulBF16 runs CheckMatMulBF16 on every combination of the sizes 1,
// 7 and 33 with every transpose variant and accumulate, on 1023 in each
// dimension, on empty products, and checks the rounding of each operand
// and the IEEE cases the packing must not hide.
func testMatMulBF16(t *testing.T, f MatMulFunc) {
	seed := uint64(100)
	variants := func(fn func(ta, tb, acc bool)) {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, acc := range []bool{false, true} {
					fn(ta, tb, acc)
				}
			}
		}
	}
	var shapes [][3]int
	for _, m := range []int{1, 7, 33} {
		for _, n := range []int{1, 7, 33} {
			for _, k := range []int{1, 7, 33} {
				shapes = append(shapes, [3]int{m, n, k})
			}
		}
	}
	shapes = append(shapes, [3]int{2, 3, 0}, [3]int{0, 3, 2}, [3]int{3, 0, 2})
	for _, s := range shapes {
		variants(func(ta, tb, acc bool) {
			seed++
			CheckMatMulBF16(t, f, s[0], s[1], s[2], ta, tb, acc, seed)
		})
	}
	long := [][3]int{{1023, 7, 33}, {7, 1023, 33}, {33, 7, 1023}}
	if raceEnabled {
		long = [][3]int{{1023, 7, 7}, {7, 1023, 9}, {9, 7, 1023}}
	}
	for _, s := range long {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				seed++
				CheckMatMulBF16(t, f, s[0], s[1], s[2], ta, tb, true, seed)
			}
		}
	}
	if !raceEnabled {
		CheckMatMulBF16(t, f, 1023, 33, 1023, true, false, false, seed+1)
	}
	testBF16Rounding(t, f)
	testMatMulSpecial(t, f)
}

// testBF16Rounding checks that each operand is rounded as
// tensor.ToBFloat16 before it is multiplied: x·1 and 1·x must give the
// rounded x exactly, through both operands and every layout.
func testBF16Rounding(t *testing.T, f MatMulFunc) {
	for _, u := range bf16RoundingBits {
		x := math.Float32frombits(u)
		want := tensor.ToBFloat16(x).Float32()
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for side := range 2 {
					a, b := []float32{x}, []float32{1}
					if side == 1 {
						a, b = b, a
					}
					got := f(make([]float32, 1), a, b, 1, 1, 1, ta, tb, false)[0]
					if got != want && !(got != got && want != want) {
						t.Errorf("rounding %#08x (operand %d, transA=%v transB=%v): got %v (%#08x), want %v (%#08x)",
							u, side, ta, tb, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		}
	}
}

// testMatMulSpecial (for MatMul and MatMulBF16: every value here is a
// bfloat16) checks IEEE behaviour the packing must not hide: 0·Inf is NaN, the zero padding of an odd k meets an Inf only as 0·0, NaN in dst
// is dropped without accumulate and kept with it, k = 0 gives zeros (or
// leaves dst), and an Inf in a row of A or a column of B reaches only the
// elements whose sums hold it (13 rows, 33 columns: edge tiles).
func testMatMulSpecial(t *testing.T, f MatMulFunc) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, tb := range []bool{false, true} {
		if got := f(make([]float32, 1), []float32{0, 1}, []float32{inf, 1}, 1, 1, 2, false, tb, false); got[0] == got[0] {
			t.Errorf("[0 1]·[Inf 1]ᵀ (transB=%v): got %v, want NaN", tb, got[0])
		}
		if got := f(make([]float32, 1), []float32{1, 2, 3}, []float32{4, 5, inf}, 1, 1, 3, false, tb, false); got[0] != inf {
			t.Errorf("[1 2 3]·[4 5 Inf]ᵀ (transB=%v): got %v, want +Inf", tb, got[0])
		}
	}
	if got := f([]float32{nan}, []float32{2}, []float32{3}, 1, 1, 1, false, false, false); got[0] != 6 {
		t.Errorf("overwriting NaN: got %v, want 6", got[0])
	}
	if got := f([]float32{nan}, []float32{2}, []float32{3}, 1, 1, 1, false, false, true); got[0] == got[0] {
		t.Errorf("accumulating into NaN: got %v, want NaN", got[0])
	}
	if got := f([]float32{3, 3}, nil, nil, 1, 2, 0, false, false, false); got[0] != 0 || got[1] != 0 {
		t.Errorf("k=0: got %v, want [0 0]", got)
	}
	if got := f([]float32{3, 3}, nil, nil, 2, 1, 0, true, true, true); got[0] != 3 || got[1] != 3 {
		t.Errorf("k=0 accumulate: got %v, want [3 3]", got)
	}
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
	got := f(make([]float32, m*n), a, b, m, n, k, false, false, false)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			want := float32(k)
			if i == m-1 || j == n-1 {
				want = inf
			}
			if got[i*n+j] != want {
				t.Errorf("Inf in the last row and column: element [%d, %d]: got %v, want %v", i, j, got[i*n+j], want)
				return
			}
		}
	}
}
