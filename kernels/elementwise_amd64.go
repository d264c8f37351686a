//go:build !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run ./internal/genelem -out elementwise_amd64.s -stubs elementwise_stub_amd64.go -pkg kernels

// simdF32 reports whether the AVX2 elementwise loops of
// elementwise_amd64.s run on this CPU.
var simdF32 = cpu.X86.HasAVX2

// simdBlock is the element count the assembly loops work in.
const simdBlock = 32

// asF32 views s as float32s; callers have checked T is float32.
func asF32[T Float](s []T) *float32 { return (*float32)(unsafe.Pointer(unsafe.SliceData(s))) }

// simdPrefix returns how many leading elements of an n-element float32
// kernel the assembly computes (a multiple of simdBlock), or 0.
func simdPrefix[T Float](n int) int {
	var z T
	if !simdF32 || unsafe.Sizeof(z) != 4 {
		return 0
	}
	return n &^ (simdBlock - 1)
}

// binaryVVSIMD computes dst[:n] = a op b in assembly where it can and
// returns n (0: the caller does it all).
func binaryVVSIMD[T Float](op BinaryOp, dst, a, b []T) int {
	n := simdPrefix[T](len(dst))
	if n == 0 {
		return 0
	}
	d, x, y := asF32(dst), asF32(a), asF32(b)
	switch op {
	case Add:
		addVV32(d, x, y, n)
	case Sub:
		subVV32(d, x, y, n)
	case Mul:
		mulVV32(d, x, y, n)
	case Div:
		divVV32(d, x, y, n)
	default:
		return 0
	}
	return n
}

// binaryVSSIMD computes dst[:n] = a op s (or s op a when scalarLeft).
func binaryVSSIMD[T Float](op BinaryOp, dst, a []T, s T, scalarLeft bool) int {
	n := simdPrefix[T](len(dst))
	if n == 0 {
		return 0
	}
	d, x, v := asF32(dst), asF32(a), *(*float32)(unsafe.Pointer(&s))
	switch {
	case op == Add:
		addVS32(d, x, v, n)
	case op == Mul:
		mulVS32(d, x, v, n)
	case op == Sub && !scalarLeft:
		subVS32(d, x, v, n)
	case op == Sub:
		subSV32(d, x, v, n)
	case op == Div && !scalarLeft:
		divVS32(d, x, v, n)
	case op == Div:
		divSV32(d, x, v, n)
	default:
		return 0
	}
	return n
}

func reluSIMD[T Float](dst, x []T) int {
	n := simdPrefix[T](len(dst))
	if n > 0 {
		relu32(asF32(dst), asF32(x), n)
	}
	return n
}

func reluGradSIMD[T Float](dst, x, g []T) int {
	n := simdPrefix[T](len(dst))
	if n > 0 {
		reluGrad32(asF32(dst), asF32(x), asF32(g), n)
	}
	return n
}

func sqrtSIMD[T Float](dst, x []T) int {
	n := simdPrefix[T](len(dst))
	if n > 0 {
		sqrt32(asF32(dst), asF32(x), n)
	}
	return n
}

// lstmGradSIMD computes the leading units of one row of an LSTM step's
// gradient (LSTMCellGradRows; the slices are the row's) in assembly where
// it can and returns how many (0: the caller does them all).
func lstmGradSIMD[T Float](dz, dcPrev, acts, dh, dc, cPrev []T, n int) int {
	m := simdPrefix[T](n)
	switch {
	case m == 0:
		return 0
	case cPrev == nil:
		lstmGradFirst32(asF32(dz), asF32(acts), asF32(dh), asF32(dc), n, m)
	case dcPrev == nil:
		return 0
	default:
		lstmGradPrev32(asF32(dz), asF32(dcPrev), asF32(acts), asF32(dh), asF32(dc), asF32(cPrev), n, m)
	}
	return m
}
