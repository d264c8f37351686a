package kernels

import "math"

// Erf sets dst[i] = erf(x[i]) and returns dst.
func Erf[T Float](dst, x []T) []T {
	checkLen("Erf", "dst", len(dst), len(x))
	for i, v := range x {
		dst[i] = T(math.Erf(float64(v)))
	}
	return dst
}

// Abs sets dst[i] = |x[i]| and returns dst.
func Abs[T Float](dst, x []T) []T {
	checkLen("Abs", "dst", len(dst), len(x))
	for i, v := range x {
		if v < 0 {
			v = -v
		}
		dst[i] = v
	}
	return dst
}
