package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

func TestReduceHand(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5, 6} // [2, 3]
	shape := tensor.Shape{2, 3}
	tests := []struct {
		keep     tensor.Shape
		sum, max []float64
	}{
		{tensor.Shape{1, 3}, []float64{5, 7, 9}, []float64{4, 5, 6}},
		{tensor.Shape{2, 1}, []float64{6, 15}, []float64{3, 6}},
		{tensor.Shape{1, 1}, []float64{21}, []float64{6}},
		{tensor.Shape{2, 3}, x, x},
	}
	for _, tc := range tests {
		t.Run(tc.keep.String(), func(t *testing.T) {
			st := tensor.BroadcastStrides(tc.keep, shape)
			dst := []float64{99, 99, 99, 99, 99, 99}[:tc.keep.Size()] // overwritten, not accumulated
			testutil.RequireClose(t, "ReduceSum", kernels.ReduceSum(dst, x, shape, st), tc.sum, 0, 0)
			testutil.RequireClose(t, "ReduceMax", kernels.ReduceMax(dst, x, shape, st), tc.max, 0, 0)
		})
	}
	got := kernels.SumRows(make([]float64, 3), x, 2, 3)
	testutil.RequireClose(t, "SumRows", got, []float64{5, 7, 9}, 0, 0)
}

// naiveReduce reduces x [shape] over axes with one loop over x: each
// element's dst index is its multi-index with the reduced axes zeroed,
// raveled in the keepdims shape.
func naiveReduce(x []float64, shape []int, axes []int, init float64, f func(acc, v float64) float64) []float64 {
	keep := append([]int(nil), shape...)
	for _, a := range axes {
		keep[a] = 1
	}
	dst := make([]float64, size(keep))
	for i := range dst {
		dst[i] = init
	}
	for i, v := range x {
		idx := unravel(i, shape)
		for _, a := range axes {
			idx[a] = 0
		}
		j := ravel(idx, keep)
		dst[j] = f(dst[j], v)
	}
	return dst
}

func TestReduceNaive(t *testing.T) {
	cases := []struct {
		shape []int
		axes  []int
	}{
		{[]int{17}, []int{0}},
		{[]int{5, 7}, []int{0}},
		{[]int{5, 7}, []int{1}},
		{[]int{3, 4, 5}, []int{1}},
		{[]int{3, 4, 5}, []int{0, 2}},
		{[]int{3, 4, 5}, []int{1, 2}},
		{[]int{3, 4, 5}, nil},
		{[]int{2, 3, 4, 5}, []int{0, 3}},
		{[]int{2, 3, 1, 5}, []int{1, 2}},
		{[]int{2, 1, 2, 1, 2, 1, 2, 3}, []int{0, 4, 7}},
		{[]int{0, 4}, []int{0}},
		{[]int{4, 0}, []int{1}},
	}
	r := rng(4)
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_axes%v", c.shape, c.axes), func(t *testing.T) {
			x := testutil.RandFloats(r, size(c.shape))
			keep := append(tensor.Shape(nil), c.shape...)
			for _, a := range c.axes {
				keep[a] = 1
			}
			st := tensor.BroadcastStrides(keep, c.shape)
			sum := kernels.ReduceSum(make([]float64, keep.Size()), x, c.shape, st)
			testutil.RequireClose(t, "ReduceSum", sum, naiveReduce(x, c.shape, c.axes, 0, func(a, v float64) float64 { return a + v }), 1e-13, 1e-15)
			mx := kernels.ReduceMax(make([]float64, keep.Size()), x, c.shape, st)
			testutil.RequireClose(t, "ReduceMax", mx, naiveReduce(x, c.shape, c.axes, math.Inf(-1), math.Max), 0, 0)

			x32 := f32(x)
			sum32 := kernels.ReduceSum(make([]float32, keep.Size()), x32, c.shape, st)
			want32 := naiveReduce(testutil.ToFloat64s(x32), c.shape, c.axes, 0, func(a, v float64) float64 { return a + v })
			testutil.RequireClose(t, "ReduceSum float32", testutil.ToFloat64s(sum32), want32, 1e-5, 1e-5)
		})
	}
}

func TestReduceSpecial(t *testing.T) {
	// NaN propagates through max; -Inf is the identity of an empty max; the
	// empty sum is 0.
	x := []float64{1, nan64, 3, 4, 5, 6}
	got := kernels.ReduceMax(make([]float64, 3), x, []int{2, 3}, []int{0, 1})
	testutil.RequireClose(t, "NaN column", got, []float64{4, nan64, 6}, 0, 0)
	got = kernels.ReduceMax(make([]float64, 2), x, []int{2, 3}, []int{1, 0})
	testutil.RequireClose(t, "NaN row", got, []float64{nan64, 6}, 0, 0)
	got = kernels.ReduceMax(make([]float64, 2), nil, []int{2, 0}, []int{1, 0})
	testutil.RequireClose(t, "empty max", got, []float64{math.Inf(-1), math.Inf(-1)}, 0, 0)
	got = kernels.ReduceSum([]float64{7, 7}, nil, []int{2, 0}, []int{1, 0})
	testutil.RequireClose(t, "empty sum", got, []float64{0, 0}, 0, 0)
	allNeg := kernels.ReduceMax(make([]float64, 1), []float64{-5, -3, -9}, []int{3}, []int{0})
	testutil.RequireClose(t, "negative max", allNeg, []float64{-3}, 0, 0)
}

// TestReduceSumIsBroadcastTranspose checks the defining identity of the
// gradient of broadcasting: <BroadcastTo(v), g> = <v, ReduceSum(g)> for
// every v and g.
func TestReduceSumIsBroadcastTranspose(t *testing.T) {
	r := rng(5)
	for _, p := range [][2][]int{{{4, 5}, {5}}, {{3, 4, 5}, {4, 1}}, {{2, 3, 4}, {}}, {{2, 3, 4}, {2, 1, 4}}} {
		out, in := tensor.Shape(p[0]), tensor.Shape(p[1])
		keep := make(tensor.Shape, len(out)) // in, padded to out's rank
		for i := range keep {
			keep[i] = 1
		}
		copy(keep[len(out)-len(in):], in)
		v, g := testutil.RandFloats(r, in.Size()), testutil.RandFloats(r, out.Size())
		bv := kernels.BroadcastTo(make([]float64, out.Size()), v, out, tensor.BroadcastStrides(in, out))
		rg := kernels.ReduceSum(make([]float64, in.Size()), g, out, tensor.BroadcastStrides(keep, out))
		var lhs, rhs float64
		for i := range g {
			lhs += bv[i] * g[i]
		}
		for i := range v {
			rhs += v[i] * rg[i]
		}
		if math.Abs(lhs-rhs) > 1e-12 {
			t.Errorf("%v -> %v: <BroadcastTo(v), g> = %v, <v, ReduceSum(g)> = %v", in, out, lhs, rhs)
		}
	}
}
