package kernels

import "math"

// The activations of vision models that have ops of their own (see
// graph/vision.go for why each is an op rather than a composition), and
// their gradients. As elementwise.go: dst may alias any input, lengths
// must match, transcendental functions are evaluated in float64.

// ReluClip sets dst[i] to Keras' relu(x[i], negative_slope=slope,
// max_value=maxValue, threshold=threshold) and returns dst: with p = x if
// x > threshold else 0 (threshold ≠ 0), or max(x, 0) (threshold = 0),
// clipped to [0, maxValue] unless maxValue is NaN (no clip), the result is
// p - slope·max(threshold - x, 0).
func ReluClip[T Float](dst, x []T, maxValue, slope, threshold float64) []T {
	checkLen("ReluClip", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	clip := !math.IsNaN(maxValue)
	mx, sl, th := T(maxValue), T(slope), T(threshold)
	for i, v := range x {
		p := v
		if v <= th || (th == 0 && v <= 0) {
			p = 0
		}
		if clip {
			p = min(max(p, 0), mx)
		}
		if sl != 0 && v < th {
			p -= sl * (th - v)
		}
		dst[i] = p
	}
	return dst
}

// ReluClipGrad sets dst[i] to g[i] times the derivative of ReluClip at the
// input, told from v: the input (fromOutput false) or ReluClip's output
// (fromOutput true, valid for threshold 0 and slope >= 0). At a kink the
// derivative of the side Keras' formula takes is used (0 at x = threshold,
// 0 at x = maxValue).
func ReluClipGrad[T Float](dst, v, g []T, maxValue, slope, threshold float64, fromOutput bool) []T {
	checkLen("ReluClipGrad", "dst", len(dst), len(v))
	checkLen("ReluClipGrad", "g", len(g), len(v))
	dst = dst[:len(v)]
	clip := !math.IsNaN(maxValue)
	mx, sl, th := T(maxValue), T(slope), T(threshold)
	for i, x := range v {
		var d T
		if fromOutput {
			// y > 0: the identity part (unless clipped at max), y < 0: the slope
			switch {
			case x > 0 && (!clip || x < mx):
				d = 1
			case x < 0:
				d = sl
			}
		} else {
			if x > th && (th != 0 || x > 0) && (!clip || (x > 0 && x < mx)) {
				d = 1
			}
			if x < th {
				d += sl
			}
		}
		dst[i] = g[i] * d
	}
	return dst
}

// Elu sets dst[i] = scale·x for x > 0 and scale·alpha·(e^x - 1) elsewhere,
// and returns dst.
func Elu[T Float](dst, x []T, alpha, scale float64) []T {
	checkLen("Elu", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		if v > 0 {
			dst[i] = T(scale * float64(v))
		} else {
			dst[i] = T(scale * alpha * math.Expm1(float64(v)))
		}
	}
	return dst
}

// EluGrad sets dst[i] = g[i]·scale where y[i] > 0, else g[i]·(y[i] +
// scale·alpha) (the derivative from Elu's output y), and returns dst.
func EluGrad[T Float](dst, y, g []T, alpha, scale float64) []T {
	checkLen("EluGrad", "dst", len(dst), len(y))
	checkLen("EluGrad", "g", len(g), len(y))
	dst = dst[:len(y)]
	s, sa := T(scale), T(scale*alpha)
	for i, v := range y {
		if v > 0 {
			dst[i] = g[i] * s
		} else {
			dst[i] = g[i] * (v + sa)
		}
	}
	return dst
}

// Silu sets dst[i] = x·sigmoid(x) and returns dst.
func Silu[T Float](dst, x []T) []T {
	checkLen("Silu", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = T(float64(v) * sigmoid(float64(v)))
	}
	return dst
}

// SiluGrad sets dst[i] = g·s·(1 + x·(1 - s)), s = sigmoid(x), the
// derivative of Silu, and returns dst.
func SiluGrad[T Float](dst, x, g []T) []T {
	checkLen("SiluGrad", "dst", len(dst), len(x))
	checkLen("SiluGrad", "g", len(g), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		s := sigmoid(float64(v))
		dst[i] = T(float64(g[i]) * s * (1 + float64(v)*(1-s)))
	}
	return dst
}

// HardSwish sets dst[i] = x·min(max(x + 3, 0), 6)/6 and returns dst.
func HardSwish[T Float](dst, x []T) []T {
	checkLen("HardSwish", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v * min(max(v+3, 0), 6) / 6
	}
	return dst
}

// HardSwishGrad sets dst[i] = g times the derivative of HardSwish: 0 below
// -3, 1 above 3, (2x + 3)/6 between, and returns dst.
func HardSwishGrad[T Float](dst, x, g []T) []T {
	checkLen("HardSwishGrad", "dst", len(dst), len(x))
	checkLen("HardSwishGrad", "g", len(g), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		var d T
		switch {
		case v > 3:
			d = 1
		case v > -3:
			d = (2*v + 3) / 6
		}
		dst[i] = g[i] * d
	}
	return dst
}

// Softplus sets dst[i] = log(1 + e^x) = max(x, 0) + log1p(e^-|x|), which
// neither overflows nor loses small values, and returns dst.
func Softplus[T Float](dst, x []T) []T {
	checkLen("Softplus", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		f := float64(v)
		dst[i] = T(max(f, 0) + math.Log1p(math.Exp(-math.Abs(f))))
	}
	return dst
}

// SoftplusGrad sets dst[i] = g·sigmoid(x) and returns dst.
func SoftplusGrad[T Float](dst, x, g []T) []T {
	checkLen("SoftplusGrad", "dst", len(dst), len(x))
	checkLen("SoftplusGrad", "g", len(g), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = T(float64(g[i]) * sigmoid(float64(v)))
	}
	return dst
}

// Softsign sets dst[i] = x/(1 + |x|) and returns dst.
func Softsign[T Float](dst, x []T) []T {
	checkLen("Softsign", "dst", len(dst), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v / (1 + abs(v))
	}
	return dst
}

// SoftsignGrad sets dst[i] = g/(1 + |x|)² and returns dst.
func SoftsignGrad[T Float](dst, x, g []T) []T {
	checkLen("SoftsignGrad", "dst", len(dst), len(x))
	checkLen("SoftsignGrad", "g", len(g), len(x))
	dst = dst[:len(x)]
	for i, v := range x {
		d := 1 + abs(v)
		dst[i] = g[i] / (d * d)
	}
	return dst
}

func abs[T Float](v T) T {
	if v < 0 {
		return -v
	}
	return v
}
