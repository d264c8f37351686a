package kerneltest

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// transposeCases are (shape, perm) pairs: matrices large enough for a tiled
// path, every permutation of a rank-3 shape, rank 4, size-1 dimensions,
// identity and scalar.
var transposeCases = []struct {
	shape tensor.Shape
	perm  []int
}{
	{tensor.Shape{7, 33}, []int{1, 0}},
	{tensor.Shape{33, 1023}, []int{1, 0}},
	{tensor.Shape{1023, 7}, []int{1, 0}},
	{tensor.Shape{3, 5, 7}, []int{0, 1, 2}},
	{tensor.Shape{3, 5, 7}, []int{0, 2, 1}},
	{tensor.Shape{3, 5, 7}, []int{1, 0, 2}},
	{tensor.Shape{3, 5, 7}, []int{1, 2, 0}},
	{tensor.Shape{3, 5, 7}, []int{2, 0, 1}},
	{tensor.Shape{3, 5, 7}, []int{2, 1, 0}},
	{tensor.Shape{4, 33, 9}, []int{0, 2, 1}},
	{tensor.Shape{2, 3, 4, 5}, []int{3, 1, 0, 2}},
	{tensor.Shape{2, 3, 4, 5}, []int{0, 2, 1, 3}},
	{tensor.Shape{1, 7, 1}, []int{2, 0, 1}},
	{tensor.Shape{1023}, []int{0}},
	{tensor.Shape{}, []int{}},
	{tensor.Shape{0, 3}, []int{1, 0}},
}

func testTranspose(t *testing.T, f, ref TransposeFunc) {
	r := newRand(12)
	for _, c := range transposeCases {
		where := name("%v perm %v", c.shape, c.perm)
		n := c.shape.Size()
		x := uniform(r, n, -2, 2)
		want := ref(make([]float32, n), x, c.shape, c.perm)
		o, xs := newOut32(n), clone(x)
		got := f(o.dst(), x, c.shape, c.perm)
		o.check(t, where, got)
		unchanged(t, where, "x", xs, x)
		compareExact(t, where, got, want)
	}
}

// float32Inputs returns values for the narrowing conversions: special values,
// random bit patterns (every exponent, NaNs included), values whose low
// bits sit exactly halfway between two bfloat16 or float16 numbers (the
// ties that round to even), and values around the float16 range limits.
func float32Inputs() []float32 {
	r := newRand(13)
	x := clone(specials)
	for i := 0; i < 4096; i++ {
		x = append(x, math.Float32frombits(r.Uint32()))
	}
	for i := 0; i < 512; i++ {
		u := r.Uint32()
		x = append(x, math.Float32frombits(u&^0xffff|0x8000))                 // bfloat16 tie
		e := uint32(103+r.IntN(40)) << 23                                     // exponents around the float16 range
		x = append(x, math.Float32frombits(u&0x80000000|e|u&0x7fe000|0x1000)) // float16 tie
	}
	x = append(x, 65504, 65519.99, 65520, -65520, 6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8, 1e-8)
	return x
}

// sameBits16 reports whether two 16-bit results agree: identical bits, or
// both NaN (exponent all ones, mantissa non-zero) under the format's layout.
func sameBits16(got, want uint16, expMask, mantMask uint16) bool {
	isNaN := func(b uint16) bool { return b&expMask == expMask && b&mantMask != 0 }
	return got == want || (isNaN(got) && isNaN(want))
}

func testToBF16(t *testing.T, f, ref func([]tensor.BF16, []float32) []tensor.BF16) {
	x := float32Inputs()
	want := ref(make([]tensor.BF16, len(x)), x)
	o := newOut(len(x), tensor.BF16(0xdead), tensor.BF16(0xbeef))
	got := f(o.dst(), x)
	o.check(t, "Float32ToBF16", got)
	for i := range want {
		if !sameBits16(uint16(got[i]), uint16(want[i]), 0x7f80, 0x007f) {
			t.Errorf("Float32ToBF16(%v = %#08x) = %#04x, want %#04x", x[i], math.Float32bits(x[i]), got[i], want[i])
			return
		}
	}
}

func testToF16(t *testing.T, f, ref func([]tensor.F16, []float32) []tensor.F16) {
	x := float32Inputs()
	want := ref(make([]tensor.F16, len(x)), x)
	o := newOut(len(x), tensor.F16(0xdead), tensor.F16(0xbeef))
	got := f(o.dst(), x)
	o.check(t, "Float32ToF16", got)
	for i := range want {
		if !sameBits16(uint16(got[i]), uint16(want[i]), 0x7c00, 0x03ff) {
			t.Errorf("Float32ToF16(%v = %#08x) = %#04x, want %#04x", x[i], math.Float32bits(x[i]), got[i], want[i])
			return
		}
	}
}

// every16 returns all 65536 16-bit patterns.
func every16[T ~uint16]() []T {
	x := make([]T, 1<<16)
	for i := range x {
		x[i] = T(i)
	}
	return x
}

func testFromBF16(t *testing.T, f, ref func([]float32, []tensor.BF16) []float32) {
	x := every16[tensor.BF16]()
	want := ref(make([]float32, len(x)), x)
	o := newOut32(len(x))
	got := f(o.dst(), x)
	o.check(t, "BF16ToFloat32", got)
	compareExact(t, "BF16ToFloat32 of every pattern", got, want)
}

func testFromF16(t *testing.T, f, ref func([]float32, []tensor.F16) []float32) {
	x := every16[tensor.F16]()
	want := ref(make([]float32, len(x)), x)
	o := newOut32(len(x))
	got := f(o.dst(), x)
	o.check(t, "F16ToFloat32", got)
	compareExact(t, "F16ToFloat32 of every pattern", got, want)
}
