package kernels

import "math"

// Elementwise kernels: dst[i] = f(x[i]). len(dst) must equal len(x) (and
// len(g) for the gradients); dst may alias any input. Transcendental
// functions are evaluated in float64 and rounded once to T, but for
// float32 Sigmoid and Tanh where the CPU has AVX-512: those run in float32
// vectors, within a few ulp (trans.go).

// Neg sets dst[i] = -x[i] and returns dst.
func Neg[T Float](dst, x []T) []T {
	checkLen("Neg", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = -v
	}
	return dst
}

// Exp sets dst[i] = e^x[i] and returns dst. It overflows to +Inf.
func Exp[T Float](dst, x []T) []T {
	checkLen("Exp", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = T(math.Exp(float64(v)))
	}
	return dst
}

// Log sets dst[i] = ln x[i] and returns dst: -Inf at 0, NaN below 0.
func Log[T Float](dst, x []T) []T {
	checkLen("Log", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = T(math.Log(float64(v)))
	}
	return dst
}

// Sqrt sets dst[i] = √x[i] and returns dst (NaN below 0).
func Sqrt[T Float](dst, x []T) []T {
	checkLen("Sqrt", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	for i := sqrtSIMD(dst, x); i < len(x); i++ {
		dst[i] = T(math.Sqrt(float64(x[i])))
	}
	return dst
}

// Relu sets dst[i] = max(x[i], 0) and returns dst. NaN propagates; -0 and 0
// give +0.
func Relu[T Float](dst, x []T) []T {
	checkLen("Relu", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	n := reluSIMD(dst, x)
	for i, v := range x[n:] {
		if v <= 0 {
			v = 0
		}
		dst[n+i] = v
	}
	return dst
}

// Sigmoid sets dst[i] = 1/(1+e^-x[i]) and returns dst. It never evaluates
// e^|x| (which overflows): for x >= 0 it uses 1/(1+e^-x), for x < 0 e^x/(1+e^x),
// so it saturates to exactly 0 or 1 for large |x| and keeps NaN.
func Sigmoid[T Float](dst, x []T) []T {
	checkLen("Sigmoid", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	if d, ok := any(dst).([]float32); ok && sigmoidVector(d, any(x).([]float32)) {
		return dst
	}
	for i, v := range x {
		dst[i] = T(sigmoid(float64(v)))
	}
	return dst
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x) // also NaN for NaN
	return e / (1 + e)
}

// Tanh sets dst[i] = tanh x[i] and returns dst.
func Tanh[T Float](dst, x []T) []T {
	checkLen("Tanh", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	if d, ok := any(dst).([]float32); ok && tanhVector(d, any(x).([]float32)) {
		return dst
	}
	for i, v := range x {
		dst[i] = T(math.Tanh(float64(v)))
	}
	return dst
}

// Copy copies x into dst and returns dst. Overlapping slices are handled as
// by the built-in copy.
func Copy[T any](dst, x []T) []T {
	checkLen("Copy", "dst", len(dst), len(x))
	copy(dst, x)
	return dst
}

// Fill sets every element of dst to v and returns dst.
func Fill[T any](dst []T, v T) []T {
	for i := range dst {
		dst[i] = v
	}
	return dst
}

// ReluGradOn sets dst[i] = g[i] where x[i] > 0 and 0 elsewhere (the
// gradient of Relu at 0 is taken as 0), and returns dst. x is Relu's input
// (its output gives the same mask). A large float32 call splits over pool
// p's threads.
func ReluGradOn[T Float](p *Pool, dst, x, g []T) []T {
	checkLen("ReluGrad", "x", len(x), len(dst))
	checkLen("ReluGrad", "g", len(g), len(dst))
	x, g = x[:len(dst)], g[:len(dst)]
	i := 0
	if d32, ok := any(dst).([]float32); ok {
		i = reluGradJob(p, d32, any(x).([]float32), any(g).([]float32))
	}
	if i == 0 {
		i = reluGradSIMD(dst, x, g)
	}
	for ; i < len(dst); i++ {
		if x[i] > 0 {
			dst[i] = g[i]
		} else {
			dst[i] = 0
		}
	}
	return dst
}

// SigmoidGrad sets dst[i] = g[i]·y[i]·(1-y[i]), the gradient through
// y = Sigmoid(x) given the upstream gradient g, and returns dst.
func SigmoidGrad[T Float](dst, y, g []T) []T {
	checkLen("SigmoidGrad", "y", len(y), len(dst))
	checkLen("SigmoidGrad", "g", len(g), len(dst))
	y, g = y[:len(dst)], g[:len(dst)]
	i := gateGradSIMD(dst, y, g, false)
	for ; i < len(dst); i++ {
		dst[i] = g[i] * y[i] * (1 - y[i])
	}
	return dst
}

// TanhGrad sets dst[i] = g[i]·(1-y[i]²), the gradient through y = Tanh(x)
// given the upstream gradient g, and returns dst.
func TanhGrad[T Float](dst, y, g []T) []T {
	checkLen("TanhGrad", "y", len(y), len(dst))
	checkLen("TanhGrad", "g", len(g), len(dst))
	y, g = y[:len(dst)], g[:len(dst)]
	i := gateGradSIMD(dst, y, g, true)
	for ; i < len(dst); i++ {
		dst[i] = g[i] * (1 - y[i]*y[i])
	}
	return dst
}

// gateGradSIMD computes a prefix of SigmoidGrad (tanh false) or TanhGrad
// (tanh true) in the vector loops of the binary ops, block by block
// through a stack buffer, with the scalar loops' operations in their
// order, so the bits are theirs: (g·y)·(1-y), and g·(1-y·y). It returns
// how many elements it did (0 where there are no vector loops). The
// recurrent layers' gates are sigmoids and tanhs, and their gradients ran
// one element at a time.
func gateGradSIMD[T Float](dst, y, g []T, tanh bool) int {
	n := simdPrefix[T](len(dst))
	var tmp [256]T
	for lo := 0; lo < n; lo += len(tmp) {
		hi := min(n, lo+len(tmp))
		t, d, yy, gg := tmp[:hi-lo], dst[lo:hi], y[lo:hi], g[lo:hi]
		if tanh {
			binaryVVSIMD(Mul, t, yy, yy)
			binaryVSSIMD(Sub, t, t, 1, true) // 1 - y·y
			binaryVVSIMD(Mul, d, gg, t)
			continue
		}
		binaryVSSIMD(Sub, t, yy, 1, true) // 1 - y
		binaryVVSIMD(Mul, d, gg, yy)
		binaryVVSIMD(Mul, d, d, t)
	}
	return n
}
