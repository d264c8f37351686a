package kernels_test

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
)

// Index helpers for the naive formulas: every multi-index is computed from
// shapes with division and modulo, never from strides, so the tests do not
// share the kernels' stride arithmetic.

// unravel returns the multi-index of row-major offset i in shape.
func unravel(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
	}
	return idx
}

// ravel returns the row-major offset of idx in shape.
func ravel(idx, shape []int) int {
	off := 0
	for d := range shape {
		off = off*shape[d] + idx[d]
	}
	return off
}

// broadcastIndex returns the offset in an operand of shape in of the output
// element at idx, under NumPy's rule: align on the last dimension and read
// index 0 along dimensions of size 1.
func broadcastIndex(idx, in []int) int {
	off := len(idx) - len(in)
	j := make([]int, len(in))
	for d := range in {
		if in[d] != 1 {
			j[d] = idx[off+d]
		}
	}
	return ravel(j, in)
}

func size(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func f32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

var rng = testutil.NewRand

// mustPanic fails t unless f panics with a message that starts with
// "kernels: " and contains want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		msg, ok := r.(string)
		if !ok {
			t.Errorf("got panic %v (%T), want a string containing %q", r, r, want)
			return
		}
		if !strings.HasPrefix(msg, "kernels: ") || !strings.Contains(msg, want) {
			t.Errorf("got panic %q, want \"kernels: ...%s...\"", msg, want)
		}
	}()
	f()
}

func isNaN32(v float32) bool { return v != v }

var (
	inf32  = float32(math.Inf(1))
	nan32  = float32(math.NaN())
	nan64  = math.NaN()
	negZ64 = math.Copysign(0, -1)
)
