package kernels

import (
	"fmt"
	"strconv"

	"github.com/headroom-ml/headroom/tensor"
)

// Float is the set of floating-point element types kernels compute in.
type Float interface{ ~float32 | ~float64 }

// Number is the set of element types that can be compared and converted.
type Number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint8
}

// panicf panics with a message that starts with "kernels: ". It is only
// reached on a programmer error, so the boxing of args costs nothing on the
// normal path.
func panicf(format string, args ...any) {
	panic(fmt.Sprintf("kernels: "+format, args...))
}

// dims formats s as "[2 3]" without retaining it: slices named in a panic
// message must not be passed to fmt, or escape analysis moves every caller's
// shape slices to the heap.
func dims(s []int) string {
	b := append(make([]byte, 0, 32), '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return string(append(b, ']'))
}

// checkLen panics unless got == want.
func checkLen(fn, what string, got, want int) {
	if got != want {
		panicf("%s: len(%s) = %d, want %d", fn, what, got, want)
	}
}

// shapeSize returns the number of elements of shape, panicking on a negative
// dimension or a rank above tensor.MaxRank.
func shapeSize(fn string, shape []int) int {
	if len(shape) > tensor.MaxRank {
		panicf("%s: rank %d exceeds tensor.MaxRank (%d)", fn, len(shape), tensor.MaxRank)
	}
	n := 1
	for _, d := range shape {
		if d < 0 {
			panicf("%s: negative dimension in shape %s", fn, dims(shape))
		}
		n *= d
	}
	return n
}

// span returns 1 + the largest offset that strides st reach over shape, or 0
// when shape has no elements.
func span(shape, st []int) int {
	s := 1
	for d, n := range shape {
		if n == 0 {
			return 0
		}
		s += (n - 1) * st[d]
	}
	return s
}

// checkStrides panics unless st has one non-negative stride per dimension of
// shape and an operand of length n, viewed through st, covers exactly n
// elements (which BroadcastStrides guarantees). When shape has no elements
// only the stride count and signs are checked.
func checkStrides(fn, what string, shape, st []int, n int) {
	if len(st) != len(shape) {
		panicf("%s: %d strides for %s, shape %s has rank %d", fn, len(st), what, dims(shape), len(shape))
	}
	for _, s := range st {
		if s < 0 {
			panicf("%s: negative stride in %s strides %s", fn, what, dims(st))
		}
	}
	if sp := span(shape, st); sp != 0 && sp != n {
		panicf("%s: %s has %d elements, strides %s over shape %s cover %d", fn, what, n, dims(st), dims(shape), sp)
	}
}

// maxOps is the most operands (dst included) one walk iterates.
const maxOps = 4

// walk is an iteration plan over an index space of rank <= tensor.MaxRank for
// up to maxOps operands, each with its own element strides. Dimensions of
// size 1 are dropped and adjacent dimensions that are contiguous for every
// operand are merged, so the innermost run is as long as possible:
// [B, D] + [B, D] becomes one run of B*D, [B, D] + [D] stays [B] outer by [D]
// inner, and reducing [B, D] over B becomes D-long vector adds.
type walk struct {
	nd    int // dimensions after merging, >= 1
	shape [tensor.MaxRank]int
	st    [maxOps][tensor.MaxRank]int
}

// newWalk plans the iteration of shape for nops operands; st[k] == nil means
// operand k is contiguous row-major over shape. The caller has validated the
// shape and strides, and shape has at least one element.
func newWalk(shape []int, nops int, st [maxOps][]int) walk {
	var w walk
	var full [maxOps][tensor.MaxRank]int
	r := len(shape)
	for k := 0; k < nops; k++ {
		if st[k] == nil {
			n := 1
			for d := r - 1; d >= 0; d-- {
				full[k][d] = n
				n *= shape[d]
			}
		} else {
			copy(full[k][:r], st[k])
		}
	}
	for d := 0; d < r; d++ {
		if shape[d] == 1 {
			continue
		}
		merge := w.nd > 0
		for k := 0; k < nops && merge; k++ {
			merge = w.st[k][w.nd-1] == full[k][d]*shape[d]
		}
		if merge {
			w.shape[w.nd-1] *= shape[d]
			for k := 0; k < nops; k++ {
				w.st[k][w.nd-1] = full[k][d]
			}
			continue
		}
		w.shape[w.nd] = shape[d]
		for k := 0; k < nops; k++ {
			w.st[k][w.nd] = full[k][d]
		}
		w.nd++
	}
	if w.nd == 0 { // every dimension is 1: a single element
		w.nd = 1
		w.shape[0] = 1
		for k := 0; k < nops; k++ {
			w.st[k][0] = 1
		}
	}
	return w
}

// inner returns the length of the innermost run.
func (w *walk) inner() int { return w.shape[w.nd-1] }

// stride returns operand k's stride along the innermost run.
func (w *walk) stride(k int) int { return w.st[k][w.nd-1] }

// next advances the outer index idx (all dimensions but the innermost) by one
// and updates the operands' offsets.
func (w *walk) next(idx *[tensor.MaxRank]int, off *[maxOps]int, nops int) {
	for d := w.nd - 2; d >= 0; d-- {
		idx[d]++
		if idx[d] < w.shape[d] {
			for k := 0; k < nops; k++ {
				off[k] += w.st[k][d]
			}
			return
		}
		idx[d] = 0
		for k := 0; k < nops; k++ {
			off[k] -= w.st[k][d] * (w.shape[d] - 1)
		}
	}
}
