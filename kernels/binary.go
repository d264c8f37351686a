package kernels

import (
	"math"
	"strconv"

	"github.com/headroom-ml/headroom/tensor"
)

// BinaryOp is an elementwise arithmetic operation of two operands.
type BinaryOp uint8

// The binary operations. Max and Min propagate NaN (like numpy.maximum) and
// order -0 below +0; Div and Pow follow IEEE 754 and math.Pow (1/0 = +Inf,
// Pow of a negative base to a non-integer power is NaN).
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div
	Max
	Min
	Pow
	numBinaryOps
)

var binaryOpNames = [numBinaryOps]string{"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"}

// String returns the operation's name ("Add", "Pow", ...).
func (op BinaryOp) String() string {
	if op < numBinaryOps {
		return binaryOpNames[op]
	}
	return "BinaryOp(" + strconv.Itoa(int(op)) + ")"
}

func checkOp(fn string, op BinaryOp) {
	if op >= numBinaryOps {
		panicf("%s: unknown BinaryOp %d", fn, uint8(op))
	}
}

// apply returns x op y.
func apply[T Float](op BinaryOp, x, y T) T {
	switch op {
	case Add:
		return x + y
	case Sub:
		return x - y
	case Mul:
		return x * y
	case Div:
		return x / y
	case Max:
		return max(x, y)
	case Min:
		return min(x, y)
	default: // Pow
		return T(math.Pow(float64(x), float64(y)))
	}
}

// Binary sets dst[i] = a[i] op b[i] and returns dst. All lengths must be
// equal; dst may alias a or b.
func Binary[T Float](op BinaryOp, dst, a, b []T) []T {
	checkOp("Binary", op)
	checkLen("Binary", "a", len(a), len(dst))
	checkLen("Binary", "b", len(b), len(dst))
	binaryVV(op, dst, a, b)
	return dst
}

// BinaryScalar sets dst[i] = a[i] op s and returns dst.
func BinaryScalar[T Float](op BinaryOp, dst, a []T, s T) []T {
	checkOp("BinaryScalar", op)
	checkLen("BinaryScalar", "a", len(a), len(dst))
	binaryVS(op, dst, a, s)
	return dst
}

// ScalarBinary sets dst[i] = s op b[i] and returns dst.
func ScalarBinary[T Float](op BinaryOp, dst []T, s T, b []T) []T {
	checkOp("ScalarBinary", op)
	checkLen("ScalarBinary", "b", len(b), len(dst))
	binarySV(op, dst, s, b)
	return dst
}

// BinaryBroadcast sets dst = a op b under NumPy broadcasting and returns dst.
// shape is dst's shape (rank <= tensor.MaxRank; dst is contiguous, so len(dst)
// is its size); aStrides and bStrides are a's and b's element strides for
// each dimension of shape, 0 where broadcast (tensor.BroadcastStrides). dst
// may alias a or b when that operand has dst's shape.
//
// The outer dimensions are walked with counters in a fixed array and the
// innermost run goes to a contiguous vector-vector, vector-scalar or
// scalar-vector loop, so the bias add [B, D] + [D] is B vector adds of
// length D. It panics if an operand's length does not match its strides.
func BinaryBroadcast[T Float](op BinaryOp, dst, a, b []T, shape, aStrides, bStrides []int) []T {
	const fn = "BinaryBroadcast"
	checkOp(fn, op)
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
		d, oa, ob := dst[o:o+in], off[1], off[2]
		switch {
		case sa == 1 && sb == 1:
			binaryVV(op, d, a[oa:oa+in], b[ob:ob+in])
		case sa == 1 && sb == 0:
			binaryVS(op, d, a[oa:oa+in], b[ob])
		case sa == 0 && sb == 1:
			binarySV(op, d, a[oa], b[ob:ob+in])
		case sa == 0 && sb == 0:
			Fill(d, apply(op, a[oa], b[ob]))
		default:
			for i := range d {
				d[i] = apply(op, a[oa+i*sa], b[ob+i*sb])
			}
		}
		w.next(&idx, &off, 3)
	}
	return dst
}

// binaryVV sets dst[i] = a[i] op b[i]; the caller has checked the lengths.
func binaryVV[T Float](op BinaryOp, dst, a, b []T) {
	a, b = a[:len(dst)], b[:len(dst)]
	if n := binaryVVSIMD(op, dst, a, b); n > 0 {
		dst, a, b = dst[n:], a[n:], b[n:]
	}
	switch op {
	case Add:
		for i := range dst {
			dst[i] = a[i] + b[i]
		}
	case Sub:
		for i := range dst {
			dst[i] = a[i] - b[i]
		}
	case Mul:
		for i := range dst {
			dst[i] = a[i] * b[i]
		}
	case Div:
		for i := range dst {
			dst[i] = a[i] / b[i]
		}
	case Max:
		for i := range dst {
			dst[i] = max(a[i], b[i])
		}
	case Min:
		for i := range dst {
			dst[i] = min(a[i], b[i])
		}
	default:
		for i := range dst {
			dst[i] = T(math.Pow(float64(a[i]), float64(b[i])))
		}
	}
}

// binaryVS sets dst[i] = a[i] op s.
func binaryVS[T Float](op BinaryOp, dst, a []T, s T) {
	a = a[:len(dst)]
	if n := binaryVSSIMD(op, dst, a, s, false); n > 0 {
		dst, a = dst[n:], a[n:]
	}
	switch op {
	case Add:
		for i := range dst {
			dst[i] = a[i] + s
		}
	case Sub:
		for i := range dst {
			dst[i] = a[i] - s
		}
	case Mul:
		for i := range dst {
			dst[i] = a[i] * s
		}
	case Div:
		for i := range dst {
			dst[i] = a[i] / s
		}
	case Max:
		for i := range dst {
			dst[i] = max(a[i], s)
		}
	case Min:
		for i := range dst {
			dst[i] = min(a[i], s)
		}
	default:
		for i := range dst {
			dst[i] = T(math.Pow(float64(a[i]), float64(s)))
		}
	}
}

// binarySV sets dst[i] = s op b[i].
func binarySV[T Float](op BinaryOp, dst []T, s T, b []T) {
	b = b[:len(dst)]
	if n := binaryVSSIMD(op, dst, b, s, true); n > 0 {
		dst, b = dst[n:], b[n:]
	}
	switch op {
	case Add:
		for i := range dst {
			dst[i] = s + b[i]
		}
	case Sub:
		for i := range dst {
			dst[i] = s - b[i]
		}
	case Mul:
		for i := range dst {
			dst[i] = s * b[i]
		}
	case Div:
		for i := range dst {
			dst[i] = s / b[i]
		}
	case Max:
		for i := range dst {
			dst[i] = max(s, b[i])
		}
	case Min:
		for i := range dst {
			dst[i] = min(s, b[i])
		}
	default:
		for i := range dst {
			dst[i] = T(math.Pow(float64(s), float64(b[i])))
		}
	}
}
