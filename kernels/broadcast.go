package kernels

import (
	"strconv"

	"github.com/headroom-ml/headroom/tensor"
)

// CompareOp is an elementwise comparison; its result is a Bool tensor stored
// as uint8 0 or 1.
type CompareOp uint8

// The comparisons. Any comparison with NaN is false except NotEqual, which
// is true (IEEE 754, as Go's operators).
const (
	Equal CompareOp = iota
	NotEqual
	Less
	LessEqual
	Greater
	GreaterEqual
	numCompareOps
)

var compareOpNames = [numCompareOps]string{"Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"}

// String returns the comparison's name ("Equal", "Less", ...).
func (op CompareOp) String() string {
	if op < numCompareOps {
		return compareOpNames[op]
	}
	return "CompareOp(" + strconv.Itoa(int(op)) + ")"
}

// Compare sets dst = (a op b) as 0/1 under NumPy broadcasting and returns
// dst. shape is dst's shape; aStrides and bStrides are as for
// BinaryBroadcast.
func Compare[T Number](op CompareOp, dst []uint8, a, b []T, shape, aStrides, bStrides []int) []uint8 {
	const fn = "Compare"
	if op >= numCompareOps {
		panicf("%s: unknown CompareOp %d", fn, uint8(op))
	}
	n := shapeSize(fn, shape)
	checkLen(fn, "dst", len(dst), n)
	checkStrides(fn, "a", shape, aStrides, len(a))
	checkStrides(fn, "b", shape, bStrides, len(b))
	if n == 0 {
		return dst
	}
	w := newWalk(shape, 3, [maxOps][]int{nil, aStrides, bStrides})
	in, sa, sb := w.inner(), w.stride(1), w.stride(2)
	var idx [tensor.MaxRank]int
	var off [maxOps]int
	for o := 0; o < n; o += in {
		compareRun(op, dst[o:o+in], a[off[1]:], sa, b[off[2]:], sb)
		w.next(&idx, &off, 3)
	}
	return dst
}

// compareRun sets dst[i] = a[i*sa] op b[i*sb].
func compareRun[T Number](op CompareOp, dst []uint8, a []T, sa int, b []T, sb int) {
	switch op {
	case Equal:
		for i := range dst {
			dst[i] = b2u(a[i*sa] == b[i*sb])
		}
	case NotEqual:
		for i := range dst {
			dst[i] = b2u(a[i*sa] != b[i*sb])
		}
	case Less:
		for i := range dst {
			dst[i] = b2u(a[i*sa] < b[i*sb])
		}
	case LessEqual:
		for i := range dst {
			dst[i] = b2u(a[i*sa] <= b[i*sb])
		}
	case Greater:
		for i := range dst {
			dst[i] = b2u(a[i*sa] > b[i*sb])
		}
	default: // GreaterEqual
		for i := range dst {
			dst[i] = b2u(a[i*sa] >= b[i*sb])
		}
	}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Where sets dst = cond ? a : b elementwise under broadcasting of all three
// inputs and returns dst. Any non-zero cond byte counts as true. shape is
// dst's shape; cStrides, aStrides and bStrides are the inputs' strides for
// each dimension of shape (0 where broadcast).
func Where[T any](dst []T, cond []uint8, a, b []T, shape, cStrides, aStrides, bStrides []int) []T {
	const fn = "Where"
	n := shapeSize(fn, shape)
	checkLen(fn, "dst", len(dst), n)
	checkStrides(fn, "cond", shape, cStrides, len(cond))
	checkStrides(fn, "a", shape, aStrides, len(a))
	checkStrides(fn, "b", shape, bStrides, len(b))
	if n == 0 {
		return dst
	}
	if len(cond) == 1 && rowMajor(shape, aStrides) && rowMajor(shape, bStrides) {
		// one condition for every element (a step guard) over operands of
		// the output's size, so in its element order: one copy, none at
		// all when dst is the chosen operand (an assign in place)
		src := b
		if cond[0] != 0 {
			src = a
		}
		copy(dst, src) // memmove returns at once when dst is src
		return dst
	}
	w := newWalk(shape, 4, [maxOps][]int{nil, cStrides, aStrides, bStrides})
	in, sc, sa, sb := w.inner(), w.stride(1), w.stride(2), w.stride(3)
	var idx [tensor.MaxRank]int
	var off [maxOps]int
	for o := 0; o < n; o += in {
		d, c, x, y := dst[o:o+in], cond[off[1]:], a[off[2]:], b[off[3]:]
		for i := range d {
			if c[i*sc] != 0 {
				d[i] = x[i*sa]
			} else {
				d[i] = y[i*sb]
			}
		}
		w.next(&idx, &off, 4)
	}
	return dst
}

// BroadcastTo writes x, broadcast to shape, into dst and returns dst. xStrides
// are x's element strides for each dimension of shape, 0 where broadcast
// (tensor.BroadcastStrides(xShape, shape)).
func BroadcastTo[T any](dst, x []T, shape, xStrides []int) []T {
	const fn = "BroadcastTo"
	n := shapeSize(fn, shape)
	checkLen(fn, "dst", len(dst), n)
	checkStrides(fn, "x", shape, xStrides, len(x))
	if n == 0 {
		return dst
	}
	copyStrided(dst, x, shape, xStrides)
	return dst
}

// copyStrided sets dst (contiguous over shape, which has at least one
// element) to x read through strides st.
func copyStrided[T any](dst, x []T, shape, st []int) {
	w := newWalk(shape, 2, [maxOps][]int{nil, st})
	in, sx := w.inner(), w.stride(1)
	var idx [tensor.MaxRank]int
	var off [maxOps]int
	if w.nd == 2 && w.st[1][0] == 1 && sx > 1 && in >= 8 {
		// A matrix transpose: dst [R, C] reads x[i + j*sx], done in tiles.
		transposeTiled(dst, x, w.shape[0], in, sx)
		return
	}
	n := len(dst)
	for o := 0; o < n; o += in {
		d, s := dst[o:o+in], x[off[1]:]
		switch sx {
		case 1:
			copy(d, s[:in])
		case 0:
			Fill(d, s[0])
		default:
			for i := range d {
				d[i] = s[i*sx]
			}
		}
		w.next(&idx, &off, 2)
	}
}

// transposeTiled sets dst[i, j] = x[i + j*sx] for dst [r, c] (x is [c, sx]
// with sx >= r), in square tiles so both sides stay in cache.
func transposeTiled[T any](dst, x []T, r, c, sx int) {
	const tile = 32
	for i0 := 0; i0 < r; i0 += tile {
		i1 := min(i0+tile, r)
		for j0 := 0; j0 < c; j0 += tile {
			j1 := min(j0+tile, c)
			for i := i0; i < i1; i++ {
				d := dst[i*c : i*c+c]
				for j := j0; j < j1; j++ {
					d[j] = x[j*sx+i]
				}
			}
		}
	}
}

// rowMajor reports whether strides st walk shape in row-major order over
// contiguous elements (dimensions of size 1 may have any stride).
func rowMajor(shape, st []int) bool {
	want := 1
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] == 1 {
			continue
		}
		if st[i] != want {
			return false
		}
		want *= shape[i]
	}
	return true
}
