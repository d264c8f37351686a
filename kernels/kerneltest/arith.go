package kerneltest

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// broadcastCases are operand shape pairs for BinaryBroadcast: equal shapes,
// the bias add [B, D] + [D] and its mirror, column and row broadcasts,
// scalars, interior size-1 dimensions, rank 8, and empty results.
var broadcastCases = []struct{ a, b tensor.Shape }{
	{tensor.Shape{1023}, tensor.Shape{1023}},
	{tensor.Shape{7, 33}, tensor.Shape{7, 33}},
	{tensor.Shape{7, 33}, tensor.Shape{33}},
	{tensor.Shape{33}, tensor.Shape{7, 33}},
	{tensor.Shape{33, 1023}, tensor.Shape{1023}},
	{tensor.Shape{7, 33}, tensor.Shape{7, 1}},
	{tensor.Shape{7, 1}, tensor.Shape{1, 33}},
	{tensor.Shape{}, tensor.Shape{7, 33}},
	{tensor.Shape{7, 33}, tensor.Shape{}},
	{tensor.Shape{}, tensor.Shape{}},
	{tensor.Shape{3, 1, 5}, tensor.Shape{4, 1}},
	{tensor.Shape{2, 3, 4, 5}, tensor.Shape{3, 1, 5}},
	{tensor.Shape{2, 1, 4, 1, 3}, tensor.Shape{5, 1, 1, 1}},
	{tensor.Shape{2, 1, 2, 1, 2, 1, 2, 3}, tensor.Shape{2, 1, 2, 1, 2, 3}},
	{tensor.Shape{1, 1}, tensor.Shape{1}},
	{tensor.Shape{0, 3}, tensor.Shape{3}},
	{tensor.Shape{4, 0}, tensor.Shape{1}},
}

func testBinaryBroadcast(t *testing.T, f, ref BinaryBroadcastFunc) {
	r := newRand(6)
	for _, c := range broadcastCases {
		shape, err := tensor.Broadcast(c.a, c.b)
		if err != nil {
			t.Fatalf("case %v %v: %v", c.a, c.b, err)
		}
		as, bs := tensor.BroadcastStrides(c.a, shape), tensor.BroadcastStrides(c.b, shape)
		n := shape.Size()
		for _, op := range binaryOps {
			where := name("%v %v %v -> %v", op, c.a, c.b, shape)
			a, b := uniform(r, c.a.Size(), -2, 2), uniform(r, c.b.Size(), -2, 2)
			want := ref(op, make([]float32, n), a, b, shape, as, bs)
			o, ac, bc := newOut32(n), clone(a), clone(b)
			got := f(op, o.dst(), a, b, shape, as, bs)
			o.check(t, where, got)
			unchanged(t, where, "a", ac, a)
			unchanged(t, where, "b", bc, b)
			compare(t, where, got, want, nil)
			if c.a.Equal(shape) {
				f(op, a, a, b, shape, as, bs)
				compare(t, where+" in place on a", a, want, nil)
			}
		}
	}
}

// reduceCases are (shape, reduced axes) pairs.
var reduceCases = []struct {
	shape tensor.Shape
	axes  []int
}{
	{tensor.Shape{1023}, []int{0}},
	{tensor.Shape{1}, []int{0}},
	{tensor.Shape{7, 33}, []int{0}},
	{tensor.Shape{7, 33}, []int{1}},
	{tensor.Shape{7, 33}, []int{0, 1}},
	{tensor.Shape{1023, 7}, []int{0}},
	{tensor.Shape{33, 1023}, []int{0}},
	{tensor.Shape{33, 1023}, []int{1}},
	{tensor.Shape{3, 5, 7}, nil},
	{tensor.Shape{3, 5, 7}, []int{0}},
	{tensor.Shape{3, 5, 7}, []int{1}},
	{tensor.Shape{3, 5, 7}, []int{2}},
	{tensor.Shape{3, 5, 7}, []int{0, 2}},
	{tensor.Shape{3, 5, 7}, []int{1, 2}},
	{tensor.Shape{2, 3, 4, 5}, []int{0, 2}},
	{tensor.Shape{2, 3, 4, 5}, []int{1, 3}},
	{tensor.Shape{2, 3, 4, 5}, []int{0, 1, 2, 3}},
	{tensor.Shape{2, 1, 3}, []int{1}},
	{tensor.Shape{0, 5}, []int{0}},
	{tensor.Shape{5, 0}, []int{1}},
	{tensor.Shape{0, 5}, []int{1}},
}

// keepdims returns shape with the axes set to 1 and dst's strides over shape.
func keepdims(shape tensor.Shape, axes []int) (tensor.Shape, []int) {
	keep := shape.Clone()
	for _, a := range axes {
		keep[a] = 1
	}
	return keep, tensor.BroadcastStrides(keep, shape)
}

func testReduce(t *testing.T, f, ref ReduceFunc, refs Impl, isMax bool) {
	r := newRand(7)
	for i, c := range reduceCases {
		keep, st := keepdims(c.shape, c.axes)
		where := name("%v axes %v", c.shape, c.axes)
		x := uniform(r, c.shape.Size(), -2, 2)
		if isMax && i%3 == 0 && len(x) > 2 {
			x[len(x)/2] = float32(math.NaN()) // NaN propagates to its group
		}
		want := ref(make([]float32, keep.Size()), x, c.shape, st)
		o, xs := newOut32(keep.Size()), clone(x)
		got := f(o.dst(), x, c.shape, st)
		o.check(t, where, got)
		unchanged(t, where, "x", xs, x)
		if isMax {
			compareExact(t, where, got, want)
			continue
		}
		scale := refs.ReduceSum(make([]float32, keep.Size()), abs(x), c.shape, st)
		compare(t, where, got, want, widen(scale))
	}
}

// testSumRows runs f on matrices with 1, 7, 33 and 1023 columns (whole
// and partial blocks of sixteen), 67×1023 large enough to split over the
// worker pool, and empty ones.
func testSumRows(t *testing.T, f, ref RowsFunc) {
	r := newRand(8)
	for _, c := range [][2]int{{1, 1}, {7, 33}, {33, 7}, {1023, 7}, {33, 1023}, {67, 1023}, {0, 5}, {5, 0}} {
		rows, cols := c[0], c[1]
		where := name("%dx%d", rows, cols)
		x := uniform(r, rows*cols, -2, 2)
		want := ref(make([]float32, cols), x, rows, cols)
		scale := ref(make([]float32, cols), abs(x), rows, cols)
		o := newOut32(cols)
		got := f(o.dst(), x, rows, cols)
		o.check(t, where, got)
		compare(t, where, got, want, widen(scale))
	}
}

// matMulShapes are (m, n, k) triples: ones, odd sizes, a long k, and empty
// products.
var matMulShapes = [][3]int{
	{1, 1, 1}, {1, 7, 33}, {7, 1, 33}, {33, 7, 1}, {7, 33, 1023}, {33, 33, 33},
	{1023, 7, 7}, {1, 1023, 7}, {5, 9, 17}, {2, 3, 0}, {0, 3, 2}, {3, 0, 2},
}

func testMatMul(t *testing.T, f MatMulFunc) {
	seed := uint64(900)
	for _, s := range matMulShapes {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, acc := range []bool{false, true} {
					seed++
					CheckMatMul(t, f, s[0], s[1], s[2], ta, tb, acc, seed)
				}
			}
		}
	}
	testMatMulSpecial(t, f)
}

// CheckMatMul runs f (MatMul) on one problem, op(a): [m, k], op(b): [k, n],
// with a, b and dst drawn from seed in [-1, 1), and checks it under the sum
// rule against the reference loops (kernels.MatMulRef); that it returns
// dst, writes nothing outside it, and leaves a and b unchanged. The suite
// runs it on its shapes; a test can run it on shapes of its own (random,
// fuzzed).
func CheckMatMul(t *testing.T, f MatMulFunc, m, n, k int, transA, transB, accumulate bool, seed uint64) {
	t.Helper()
	ref := kernels.MatMulRef[float32]
	r := newRand(seed)
	where := name("m=%d n=%d k=%d transA=%v transB=%v accumulate=%v", m, n, k, transA, transB, accumulate)
	a, b := uniform(r, m*k, -1, 1), uniform(r, k*n, -1, 1)
	dst0 := uniform(r, m*n, -1, 1)
	want := clone(dst0)
	ref(want, a, b, m, n, k, transA, transB, accumulate)
	scale := abs(dst0)
	ref(scale, abs(a), abs(b), m, n, k, transA, transB, accumulate)

	o, as, bs := newOut32(m*n), clone(a), clone(b)
	copy(o.dst(), dst0)
	got := f(o.dst(), a, b, m, n, k, transA, transB, accumulate)
	o.check(t, where, got)
	unchanged(t, where, "a", as, a)
	unchanged(t, where, "b", bs, b)
	compare(t, where, got, want, widen(scale))
}
