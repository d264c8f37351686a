package kernels_test

import (
	"fmt"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// seq returns 0, 1, ..., n-1 as float64s: every element is distinct, so a
// misplaced element is always visible.
func seq(n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
	}
	return x
}

func TestTransposeNaive(t *testing.T) {
	cases := []struct{ shape, perm []int }{
		{[]int{2, 3}, []int{1, 0}},
		{[]int{40, 70}, []int{1, 0}}, // larger than a tile
		{[]int{3, 4, 5}, []int{0, 2, 1}},
		{[]int{3, 4, 5}, []int{2, 0, 1}},
		{[]int{3, 4, 5}, []int{1, 2, 0}},
		{[]int{3, 4, 5}, []int{2, 1, 0}},
		{[]int{2, 33, 9}, []int{0, 2, 1}},
		{[]int{2, 3, 4, 5}, []int{3, 1, 0, 2}},
		{[]int{1, 5, 1, 4}, []int{3, 2, 1, 0}},
		{[]int{2, 1, 2, 1, 2, 1, 2, 3}, []int{7, 6, 5, 4, 3, 2, 1, 0}},
		{[]int{}, []int{}},
		{[]int{6}, []int{0}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_perm%v", c.shape, c.perm), func(t *testing.T) {
			n := size(c.shape)
			x := seq(n)
			out := make([]int, len(c.shape))
			for d, p := range c.perm {
				out[d] = c.shape[p]
			}
			// dst[i] = x[j] with j[perm[d]] = i[d].
			want := make([]float64, n)
			for i := range want {
				idx := unravel(i, out)
				j := make([]int, len(idx))
				for d, p := range c.perm {
					j[p] = idx[d]
				}
				want[i] = x[ravel(j, c.shape)]
			}
			got := kernels.Transpose(make([]float64, n), x, c.shape, c.perm)
			testutil.RequireClose(t, "Transpose", got, want, 0, 0)

			inv := make([]int, len(c.perm))
			for d, p := range c.perm {
				inv[p] = d
			}
			back := kernels.Transpose(make([]float64, n), got, out, inv)
			testutil.RequireClose(t, "Transpose then inverse", back, x, 0, 0)
		})
	}
}

func TestSliceUnslice(t *testing.T) {
	cases := []struct{ shape, starts, ends []int }{
		{[]int{10}, []int{2}, []int{7}},
		{[]int{4, 5}, []int{1, 0}, []int{3, 5}},
		{[]int{4, 5}, []int{0, 1}, []int{4, 3}},
		{[]int{4, 5}, []int{1, 2}, []int{2, 3}},
		{[]int{3, 4, 5}, []int{1, 1, 1}, []int{3, 4, 4}},
		{[]int{3, 4, 5}, []int{0, 2, 0}, []int{3, 3, 5}},
		{[]int{2, 3, 4, 5}, []int{1, 0, 2, 1}, []int{2, 3, 4, 4}},
		{[]int{4, 5}, []int{2, 2}, []int{2, 5}}, // empty region
		{[]int{}, []int{}, []int{}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v[%v:%v]", c.shape, c.starts, c.ends), func(t *testing.T) {
			n := size(c.shape)
			x := seq(n)
			region := make([]int, len(c.shape))
			for d := range region {
				region[d] = c.ends[d] - c.starts[d]
			}
			want := make([]float64, size(region))
			for i := range want {
				idx := unravel(i, region)
				for d := range idx {
					idx[d] += c.starts[d]
				}
				want[i] = x[ravel(idx, c.shape)]
			}
			got := kernels.Slice(make([]float64, len(want)), x, c.shape, c.starts, c.ends)
			testutil.RequireClose(t, "Slice", got, want, 0, 0)

			// Unslice puts the slice back and zeroes everything else.
			wantBack := make([]float64, n)
			for i := range wantBack {
				idx := unravel(i, c.shape)
				inside := true
				for d := range idx {
					inside = inside && idx[d] >= c.starts[d] && idx[d] < c.ends[d]
				}
				if inside {
					wantBack[i] = x[i]
				}
			}
			back := make([]float64, n)
			for i := range back {
				back[i] = -1 // overwritten
			}
			kernels.UnsliceRegion(back, got, c.shape, c.starts, c.ends)
			testutil.RequireClose(t, "UnsliceRegion", back, wantBack, 0, 0)
			both := append(append([]int(nil), c.starts...), c.ends...)
			back = kernels.Unslice(make([]float64, n), got, c.shape, both)
			testutil.RequireClose(t, "Unslice(starts+ends)", back, wantBack, 0, 0)
		})
	}
	// With starts alone the region runs to the end of each dimension.
	got := kernels.Unslice(make([]float64, 6), []float64{7, 8}, []int{2, 3}, []int{1, 1})
	testutil.RequireClose(t, "Unslice(starts)", got, []float64{0, 0, 0, 0, 7, 8}, 0, 0)
}

func TestConcatSplit(t *testing.T) {
	// Two rows: [a0 a1 | b0 | c0 c1 c2].
	a, b, c := []float64{1, 2, 3, 4}, []float64{5, 6}, []float64{7, 8, 9, 10, 11, 12}
	inners := []int{2, 1, 3}
	got := kernels.Concat(make([]float64, 12), [][]float64{a, b, c}, 2, inners)
	want := []float64{1, 2, 5, 7, 8, 9, 3, 4, 6, 10, 11, 12}
	testutil.RequireClose(t, "Concat", got, want, 0, 0)
	parts := [][]float64{make([]float64, 4), make([]float64, 2), make([]float64, 6)}
	kernels.Split(parts, got, 2, inners)
	for i, p := range [][]float64{a, b, c} {
		testutil.RequireClose(t, fmt.Sprintf("Split part %d", i), parts[i], p, 0, 0)
	}
	// An empty part is allowed.
	got = kernels.Concat(make([]float64, 2), [][]float64{{1}, {}, {2}}, 1, []int{1, 0, 1})
	testutil.RequireClose(t, "Concat with an empty part", got, []float64{1, 2}, 0, 0)
}

func TestGatherScatterAdd(t *testing.T) {
	params := []float64{0, 1, 10, 11, 20, 21, 30, 31} // [4, 2]
	idx := []int32{2, 0, 2, 3}
	got := make([]float64, 8)
	if bad := kernels.Gather(got, params, idx, 2); bad != -1 {
		t.Fatalf("Gather bad = %d, want -1", bad)
	}
	testutil.RequireClose(t, "Gather", got, []float64{20, 21, 0, 1, 20, 21, 30, 31}, 0, 0)

	// ScatterAdd is Gather's transpose: <Gather(p), g> = <p, ScatterAdd(g)>.
	g := testutil.RandFloats(rng(10), 8)
	sc := make([]float64, 8)
	if bad := kernels.ScatterAdd(sc, idx, g, 2); bad != -1 {
		t.Fatalf("ScatterAdd bad = %d, want -1", bad)
	}
	wantSc := []float64{g[2], g[3], 0, 0, g[0] + g[4], g[1] + g[5], g[6], g[7]} // row 2 twice
	testutil.RequireClose(t, "ScatterAdd", sc, wantSc, 1e-15, 0)
	var lhs, rhs float64
	for i := range g {
		lhs += got[i] * g[i]
		rhs += params[i] * sc[i]
	}
	if d := lhs - rhs; d > 1e-12 || d < -1e-12 {
		t.Errorf("<Gather(p), g> = %v, <p, ScatterAdd(g)> = %v", lhs, rhs)
	}

	// Bad indices: Gather zero-fills the row, ScatterAdd skips it, both
	// report the first.
	bad := []int32{1, 4, -1, 0}
	got = []float64{9, 9, 9, 9, 9, 9, 9, 9}
	if b := kernels.Gather(got, params, bad, 2); b != 1 {
		t.Errorf("Gather bad = %d, want 1", b)
	}
	testutil.RequireClose(t, "Gather with bad indices", got, []float64{10, 11, 0, 0, 0, 0, 0, 1}, 0, 0)
	sc = make([]float64, 8)
	if b := kernels.ScatterAdd(sc, bad, []float64{1, 2, 3, 4, 5, 6, 7, 8}, 2); b != 1 {
		t.Errorf("ScatterAdd bad = %d, want 1", b)
	}
	testutil.RequireClose(t, "ScatterAdd with bad indices", sc, []float64{7, 8, 1, 2, 0, 0, 0, 0}, 0, 0)

	// Any element type gathers.
	words := make([]string, 2)
	kernels.Gather(words, []string{"a", "b", "c"}, []int32{2, 0}, 1)
	if words[0] != "c" || words[1] != "a" {
		t.Errorf("Gather of strings = %v, want [c a]", words)
	}
	// Row size 0: nothing to move, no index is checked.
	if b := kernels.Gather[float32](nil, nil, []int32{5}, 0); b != -1 {
		t.Errorf("Gather with row size 0: bad = %d, want -1", b)
	}
}

func TestOneHot(t *testing.T) {
	got := kernels.OneHot(make([]float32, 12), []int32{2, 0, 3, -1}, 3)
	want := []float64{0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0} // 3 and -1 are out of range
	testutil.RequireClose(t, "OneHot", testutil.ToFloat64s(got), want, 0, 0)
}
