package kernels

import (
	"math"
	"unsafe"

	"github.com/headroom-ml/headroom/tensor"
)

// Convert sets dst[i] = D(src[i]) and returns dst. It follows Go's
// conversions, with the cases Go leaves to the implementation made exact so
// every platform (and every fast version) agrees:
//   - float to integer truncates toward zero; NaN gives 0; a value at or
//     beyond the integer type's range saturates to its minimum or maximum
//     (so +Inf gives the maximum, -Inf the minimum, and -1.5 to uint8 gives 0).
//   - integer to integer wraps modulo 2^bits (two's complement), like Go and
//     NumPy's astype.
//   - to a float rounds to nearest even; float64 to float32 overflows to ±Inf.
func Convert[D, S Number](dst []D, src []S) []D {
	checkLen("Convert", "dst", len(dst), len(src))
	dst = dst[:len(src)]
	if isFloat[S]() && !isFloat[D]() {
		lo, hi, minD, maxD := intRange[D]()
		for i, v := range src {
			f := float64(v)
			switch {
			case f >= hi:
				dst[i] = maxD
			case f < lo:
				dst[i] = minD
			case f == f:
				dst[i] = D(f)
			default: // NaN
				dst[i] = 0
			}
		}
		return dst
	}
	for i, v := range src {
		dst[i] = D(v)
	}
	return dst
}

// isFloat reports whether T is a floating-point type.
func isFloat[T Number]() bool {
	h := 0.5
	return T(h) != 0
}

// intRange returns, for an integer type T, the float64 bounds of the values
// that convert by truncation (lo <= f < hi, both exact powers of two or 0)
// and T's minimum and maximum.
func intRange[T Number]() (lo, hi float64, minT, maxT T) {
	var z T
	bits := 8 * int(unsafe.Sizeof(z))
	if z-1 > 0 { // unsigned: 0 - 1 wrapped around
		return 0, math.Ldexp(1, bits), 0, T(^uint64(0) >> (64 - bits))
	}
	maxT = T(^uint64(0) >> (65 - bits))
	hi = math.Ldexp(1, bits-1)
	return -hi, hi, -maxT - 1, maxT
}

// The four casts between float32 and the 16-bit floats below are the hot
// loops of mixed precision (every saved activation is narrowed in forward
// and widened in backward). Where the CPU has them they run the vector loops
// of convert_amd64.s (F16C or AVX-512F for float16, AVX2 or AVX-512F integer
// work for bfloat16) over whole blocks and the Go loops below over the
// tail; the results are bit for bit those of tensor.ToFloat16,
// tensor.ToBFloat16 and the exact widenings, NaN payloads included
// (convert_half_test.go checks every 16-bit pattern and the float32 edge
// cases on every tier; all 2^32 float32 patterns were checked once on both
// tiers: no difference).

// Float32ToBF16 rounds src to bfloat16 (to nearest, ties to even, NaN kept
// NaN: tensor.ToBFloat16) into dst and returns dst.
func Float32ToBF16(dst []tensor.BF16, src []float32) []tensor.BF16 {
	checkLen("Float32ToBF16", "dst", len(dst), len(src))
	dst = dst[:len(src)]
	n := f32ToBF16SIMD(dst, src)
	float32ToBF16Go(dst[n:], src[n:])
	return dst
}

// BF16ToFloat32 widens src exactly into dst and returns dst.
func BF16ToFloat32(dst []float32, src []tensor.BF16) []float32 {
	checkLen("BF16ToFloat32", "dst", len(dst), len(src))
	dst = dst[:len(src)]
	n := bf16ToF32SIMD(dst, src)
	bf16ToFloat32Go(dst[n:], src[n:])
	return dst
}

// Float32ToF16 rounds src to IEEE half precision (to nearest, ties to even;
// beyond ±65504 to ±Inf: tensor.ToFloat16) into dst and returns dst.
func Float32ToF16(dst []tensor.F16, src []float32) []tensor.F16 {
	checkLen("Float32ToF16", "dst", len(dst), len(src))
	dst = dst[:len(src)]
	n := f32ToF16SIMD(dst, src)
	float32ToF16Go(dst[n:], src[n:])
	return dst
}

// F16ToFloat32 widens src exactly into dst and returns dst.
func F16ToFloat32(dst []float32, src []tensor.F16) []float32 {
	checkLen("F16ToFloat32", "dst", len(dst), len(src))
	dst = dst[:len(src)]
	n := f16ToF32SIMD(dst, src)
	f16ToFloat32Go(dst[n:], src[n:])
	return dst
}

// The Go loops: the definitions the vector loops match, and the whole
// cast where there are none. len(dst) >= len(src).

func float32ToBF16Go(dst []tensor.BF16, src []float32) {
	for i, v := range src {
		dst[i] = tensor.ToBFloat16(v)
	}
}

func bf16ToFloat32Go(dst []float32, src []tensor.BF16) {
	for i, v := range src {
		dst[i] = v.Float32()
	}
}

func float32ToF16Go(dst []tensor.F16, src []float32) {
	for i, v := range src {
		dst[i] = tensor.ToFloat16(v)
	}
}

func f16ToFloat32Go(dst []float32, src []tensor.F16) {
	for i, v := range src {
		dst[i] = v.Float32()
	}
}
