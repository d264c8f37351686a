package kerneltest

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// specials are the edge values every elementwise kernel is run on: signed
// zeros, tiny and subnormal numbers, the float32 exp overflow and underflow
// thresholds, the largest float, infinities and NaN.
var specials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 0.5, -0.5, 1e-30, -1e-30, 1e-45, -1e-45,
	20, -20, 88, 89, -87, -104, 100, -100, 1e30, -1e30, math.MaxFloat32, -math.MaxFloat32,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
}

// testUnary runs f against ref on random values in [lo, hi), on the special
// values, and in place.
func testUnary(t *testing.T, f, ref UnaryFunc, lo, hi float64) {
	r := newRand(1)
	inputs := [][]float32{clone(specials)}
	for _, n := range sizes {
		inputs = append(inputs, uniform(r, n, lo, hi))
	}
	for _, x := range inputs {
		where := name("n=%d", len(x))
		if len(x) == len(specials) {
			where = "special values"
		}
		want := ref(make([]float32, len(x)), x)
		o, xs := newOut32(len(x)), clone(x)
		got := f(o.dst(), x)
		o.check(t, where, got)
		unchanged(t, where, "x", xs, x)
		compare(t, where, got, want, nil)

		inPlace := clone(x)
		f(inPlace, inPlace)
		compare(t, where+" in place", inPlace, want, nil)
	}
}

// poolSize is a vector length above the one from which an elementwise
// kernel may split its work over the worker pool (ReluGrad on two threads).
const poolSize = 1<<16 + 33

// testUnaryGrad runs f(dst, y, g) against ref, with y = fwd(x) (for
// ReluGrad, Relu(x) has the same sign pattern as x), in place on y and on g.
func testUnaryGrad(t *testing.T, f, ref UnaryGradFunc, fwd UnaryFunc) {
	r := newRand(2)
	for _, n := range append(clone(sizes), poolSize, len(specials)) {
		where := name("n=%d", n)
		x := uniform(r, n, -4, 4)
		if n == len(specials) {
			where, x = "special values", clone(specials)
		}
		y := fwd(make([]float32, n), x)
		g := uniform(r, n, -2, 2)
		want := ref(make([]float32, n), y, g)
		o, ys, gs := newOut32(n), clone(y), clone(g)
		got := f(o.dst(), y, g)
		o.check(t, where, got)
		unchanged(t, where, "y", ys, y)
		unchanged(t, where, "g", gs, g)
		compare(t, where, got, want, nil)

		onG := clone(g)
		f(onG, y, onG)
		compare(t, where+" in place on g", onG, want, nil)
		onY := clone(y)
		f(onY, onY, g)
		compare(t, where+" in place on y", onY, want, nil)
	}
}

var binaryOps = []kernels.BinaryOp{kernels.Add, kernels.Sub, kernels.Mul, kernels.Div, kernels.Max, kernels.Min, kernels.Pow}

// specialPairs returns a and b holding every pair of special values.
func specialPairs() (a, b []float32) {
	for _, x := range specials {
		for _, y := range specials {
			a, b = append(a, x), append(b, y)
		}
	}
	return a, b
}

func testBinary(t *testing.T, f, ref BinaryFunc) {
	r := newRand(3)
	sa, sb := specialPairs()
	for _, op := range binaryOps {
		for _, n := range append(clone(sizes), len(sa)) {
			where := name("%v n=%d", op, n)
			a, b := uniform(r, n, -2, 2), uniform(r, n, -2, 2)
			if n == len(sa) {
				where, a, b = name("%v special values", op), sa, sb
			}
			want := ref(op, make([]float32, n), a, b)
			o, as, bs := newOut32(n), clone(a), clone(b)
			got := f(op, o.dst(), a, b)
			o.check(t, where, got)
			unchanged(t, where, "a", as, a)
			unchanged(t, where, "b", bs, b)
			compare(t, where, got, want, nil)

			onA := clone(a)
			f(op, onA, onA, b)
			compare(t, where+" in place on a", onA, want, nil)
			onB := clone(b)
			f(op, onB, a, onB)
			compare(t, where+" in place on b", onB, want, nil)
		}
	}
}

var scalars = []float32{0.75, -1.5, 2, 0, float32(math.Inf(1)), float32(math.NaN())}

func testBinaryScalar(t *testing.T, f, ref BinaryScalarFunc) {
	r := newRand(4)
	for _, op := range binaryOps {
		for _, s := range scalars {
			for _, n := range append(clone(sizes), len(specials)) {
				where := name("%v s=%v n=%d", op, s, n)
				a := uniform(r, n, -2, 2)
				if n == len(specials) {
					a = clone(specials)
				}
				want := ref(op, make([]float32, n), a, s)
				o := newOut32(n)
				got := f(op, o.dst(), a, s)
				o.check(t, where, got)
				compare(t, where, got, want, nil)
				f(op, a, a, s)
				compare(t, where+" in place", a, want, nil)
			}
		}
	}
}

func testScalarBinary(t *testing.T, f, ref ScalarBinaryFunc) {
	r := newRand(5)
	for _, op := range binaryOps {
		for _, s := range scalars {
			for _, n := range append(clone(sizes), len(specials)) {
				where := name("%v s=%v n=%d", op, s, n)
				b := uniform(r, n, -2, 2)
				if n == len(specials) {
					b = clone(specials)
				}
				want := ref(op, make([]float32, n), s, b)
				o := newOut32(n)
				got := f(op, o.dst(), s, b)
				o.check(t, where, got)
				compare(t, where, got, want, nil)
				f(op, b, s, b)
				compare(t, where+" in place", b, want, nil)
			}
		}
	}
}
