package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

var allBinaryOps = []kernels.BinaryOp{kernels.Add, kernels.Sub, kernels.Mul, kernels.Div, kernels.Max, kernels.Min, kernels.Pow}

func TestBinaryHand(t *testing.T) {
	a := []float64{6, -2, 0.5, 2}
	b := []float64{3, 4, -2, 0.5}
	want := map[kernels.BinaryOp][]float64{
		kernels.Add: {9, 2, -1.5, 2.5},
		kernels.Sub: {3, -6, 2.5, 1.5},
		kernels.Mul: {18, -8, -1, 1},
		kernels.Div: {2, -0.5, -0.25, 4},
		kernels.Max: {6, 4, 0.5, 2},
		kernels.Min: {3, -2, -2, 0.5},
		kernels.Pow: {216, 16, 4, math.Sqrt2},
	}
	for _, op := range allBinaryOps {
		t.Run(op.String(), func(t *testing.T) {
			got := kernels.Binary(op, make([]float64, 4), a, b)
			testutil.RequireClose(t, "Binary", got, want[op], 1e-15, 0)
			// The scalar forms agree with Binary on a filled operand.
			for i, s := range b {
				fill := []float64{s, s, s, s}
				vs := kernels.BinaryScalar(op, make([]float64, 4), a, s)
				testutil.RequireClose(t, fmt.Sprintf("BinaryScalar s=%v", s), vs, kernels.Binary(op, make([]float64, 4), a, fill), 0, 0)
				sv := kernels.ScalarBinary(op, make([]float64, 4), a[i], b)
				fill = []float64{a[i], a[i], a[i], a[i]}
				testutil.RequireClose(t, fmt.Sprintf("ScalarBinary s=%v", a[i]), sv, kernels.Binary(op, make([]float64, 4), fill, b), 0, 0)
			}
		})
	}
}

func TestBinaryIEEE(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		op         kernels.BinaryOp
		a, b, want float64
	}{
		{kernels.Max, nan64, 1, nan64},
		{kernels.Max, 1, nan64, nan64},
		{kernels.Min, nan64, 1, nan64},
		{kernels.Min, -inf, nan64, nan64},
		{kernels.Max, negZ64, 0, 0},
		{kernels.Min, 0, negZ64, negZ64},
		{kernels.Div, 1, 0, inf},
		{kernels.Div, 0, 0, nan64},
		{kernels.Pow, -8, 1.0 / 3, nan64},
		{kernels.Pow, -2, 3, -8},
		{kernels.Pow, 0, 0, 1},
		{kernels.Add, inf, -inf, nan64},
	}
	for _, tc := range tests {
		got := kernels.Binary(tc.op, make([]float64, 1), []float64{tc.a}, []float64{tc.b})[0]
		if !(got == tc.want && math.Signbit(got) == math.Signbit(tc.want)) && !(got != got && tc.want != tc.want) {
			t.Errorf("%v(%v, %v) = %v, want %v", tc.op, tc.a, tc.b, got, tc.want)
		}
	}
}

// broadcastPairs are operand shapes for the broadcasting tests.
var broadcastPairs = [][2][]int{
	{{4, 5}, {4, 5}},
	{{4, 5}, {5}},
	{{5}, {4, 5}},
	{{4, 5}, {4, 1}},
	{{4, 1}, {1, 5}},
	{{}, {3, 2}},
	{{3, 2}, {}},
	{{}, {}},
	{{3, 1, 5}, {4, 1}},
	{{2, 3, 4, 5}, {3, 1, 5}},
	{{2, 1, 4, 1, 3}, {5, 1, 1, 1}},
	{{1, 2, 1, 2, 1, 2, 1, 2}, {2, 1, 2, 1, 2, 1, 2, 1}},
	{{1, 1}, {1}},
	{{0, 3}, {3}},
}

// TestBinaryBroadcastNaive compares BinaryBroadcast with a per-element
// formula that finds each operand's element from the shapes alone, and with
// BroadcastTo of both operands followed by Binary.
func TestBinaryBroadcastNaive(t *testing.T) {
	r := rng(3)
	for _, p := range broadcastPairs {
		as, bs := tensor.Shape(p[0]), tensor.Shape(p[1])
		out, err := tensor.Broadcast(as, bs)
		if err != nil {
			t.Fatal(err)
		}
		a, b := testutil.RandFloats(r, as.Size()), testutil.RandFloats(r, bs.Size())
		ast, bst := tensor.BroadcastStrides(as, out), tensor.BroadcastStrides(bs, out)
		for _, op := range allBinaryOps {
			t.Run(fmt.Sprintf("%v/%v_%v", op, as, bs), func(t *testing.T) {
				n := out.Size()
				want := make([]float64, n)
				for i := range want {
					idx := unravel(i, out)
					x, y := a[broadcastIndex(idx, as)], b[broadcastIndex(idx, bs)]
					want[i] = kernels.Binary(op, make([]float64, 1), []float64{x}, []float64{y})[0]
				}
				got := kernels.BinaryBroadcast(op, make([]float64, n), a, b, out, ast, bst)
				testutil.RequireClose(t, "vs naive", got, want, 0, 0)

				fa := kernels.BroadcastTo(make([]float64, n), a, out, ast)
				fb := kernels.BroadcastTo(make([]float64, n), b, out, bst)
				testutil.RequireClose(t, "vs BroadcastTo+Binary", got, kernels.Binary(op, make([]float64, n), fa, fb), 0, 0)
			})
		}
	}
}

func TestBroadcastToHand(t *testing.T) {
	x := []float32{1, 2, 3}
	shape := []int{2, 3}
	got := kernels.BroadcastTo(make([]float32, 6), x, shape, tensor.BroadcastStrides(tensor.Shape{3}, shape))
	want := []float64{1, 2, 3, 1, 2, 3}
	testutil.RequireClose(t, "row", testutil.ToFloat64s(got), want, 0, 0)
	got = kernels.BroadcastTo(make([]float32, 6), x[:2], []int{2, 3}, tensor.BroadcastStrides(tensor.Shape{2, 1}, shape))
	want = []float64{1, 1, 1, 2, 2, 2}
	testutil.RequireClose(t, "column", testutil.ToFloat64s(got), want, 0, 0)
}

func TestCompare(t *testing.T) {
	ops := []struct {
		op kernels.CompareOp
		f  func(x, y float64) bool
	}{
		{kernels.Equal, func(x, y float64) bool { return x == y }},
		{kernels.NotEqual, func(x, y float64) bool { return !(x == y) }},
		{kernels.Less, func(x, y float64) bool { return y > x }},
		{kernels.LessEqual, func(x, y float64) bool { return y >= x }},
		{kernels.Greater, func(x, y float64) bool { return y < x }},
		{kernels.GreaterEqual, func(x, y float64) bool { return y <= x }},
	}
	as, bs := tensor.Shape{3, 1, 4}, tensor.Shape{2, 1}
	out, _ := tensor.Broadcast(as, bs)
	a := []float32{0, 1, 2, nan32, -1, 1, 1, 3, inf32, 2, 0, 1}
	b := []float32{1, nan32}
	ai := []int32{0, 1, 2, 5, -1, 1, 1, 3, 7, 2, 0, 1}
	bi := []int32{1, 2}
	au := []uint8{0, 1, 2, 255, 9, 1, 1, 3, 7, 2, 0, 1}
	bu := []uint8{1, 2}
	ast, bst := tensor.BroadcastStrides(as, out), tensor.BroadcastStrides(bs, out)
	for _, o := range ops {
		t.Run(o.op.String(), func(t *testing.T) {
			got := kernels.Compare(o.op, make([]uint8, out.Size()), a, b, out, ast, bst)
			goti := kernels.Compare(o.op, make([]uint8, out.Size()), ai, bi, out, ast, bst)
			gotu := kernels.Compare(o.op, make([]uint8, out.Size()), au, bu, out, ast, bst)
			for i := range got {
				idx := unravel(i, out)
				ia, ib := broadcastIndex(idx, as), broadcastIndex(idx, bs)
				check := func(kind string, got uint8, x, y float64) {
					want := uint8(0)
					if o.f(x, y) {
						want = 1
					}
					if got != want {
						t.Errorf("%s %v %v %v: got %d, want %d", kind, x, o.op, y, got, want)
					}
				}
				check("float32", got[i], float64(a[ia]), float64(b[ib]))
				check("int32", goti[i], float64(ai[ia]), float64(bi[ib]))
				check("uint8", gotu[i], float64(au[ia]), float64(bu[ib]))
			}
		})
	}
}

func TestWhere(t *testing.T) {
	// cond [3, 1] picks between a [1, 4] and the scalar b.
	cond := []uint8{1, 0, 7}
	a := []float64{1, 2, 3, 4}
	b := []float64{-1}
	out := tensor.Shape{3, 4}
	got := kernels.Where(make([]float64, 12), cond, a, b, out,
		tensor.BroadcastStrides(tensor.Shape{3, 1}, out), tensor.BroadcastStrides(tensor.Shape{1, 4}, out), tensor.BroadcastStrides(tensor.Shape{}, out))
	want := []float64{1, 2, 3, 4, -1, -1, -1, -1, 1, 2, 3, 4}
	testutil.RequireClose(t, "Where", got, want, 0, 0)

	// One condition for every element (a step guard), including in place
	// and through strides that are not row-major.
	x, y := []float64{1, 2, 3, 4, 5, 6}, []float64{-1, -2, -3, -4, -5, -6}
	sq, rm, tr := []int{2, 3}, []int{3, 1}, []int{1, 2}
	for _, c := range []uint8{0, 1} {
		want := y
		if c != 0 {
			want = x
		}
		got := kernels.Where(make([]float64, 6), []uint8{c}, x, y, sq, []int{0, 0}, rm, rm)
		testutil.RequireClose(t, "Where guard", got, want, 0, 0)
		inPlace := append([]float64(nil), y...)
		got = kernels.Where(inPlace, []uint8{c}, x, inPlace, sq, []int{0, 0}, rm, rm)
		testutil.RequireClose(t, "Where guard in place", got, want, 0, 0)
	}
	got = kernels.Where(make([]float64, 6), []uint8{1}, x, y, sq, []int{0, 0}, tr, rm) // a read transposed
	testutil.RequireClose(t, "Where guard transposed", got, []float64{1, 3, 5, 2, 4, 6}, 0, 0)

	// Elementwise on strings: any element type works.
	s := kernels.Where(make([]string, 2), []uint8{0, 1}, []string{"a", "b"}, []string{"x", "y"}, []int{2}, []int{1}, []int{1}, []int{1})
	if s[0] != "x" || s[1] != "b" {
		t.Errorf("Where on strings = %v, want [x b]", s)
	}
}

func TestOpStrings(t *testing.T) {
	if got := kernels.Pow.String(); got != "Pow" {
		t.Errorf("Pow.String() = %q, want Pow", got)
	}
	if got := kernels.BinaryOp(42).String(); got != "BinaryOp(42)" {
		t.Errorf("BinaryOp(42).String() = %q", got)
	}
	if got := kernels.GreaterEqual.String(); got != "GreaterEqual" {
		t.Errorf("GreaterEqual.String() = %q", got)
	}
	if got := kernels.CompareOp(9).String(); got != "CompareOp(9)" {
		t.Errorf("CompareOp(9).String() = %q", got)
	}
}
