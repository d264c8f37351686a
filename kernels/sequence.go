package kernels

import (
	"math"

	"github.com/headroom-ml/headroom/tensor"
)

// AddRegion adds x (of shape ends - starts) into the region [starts, ends)
// of dst [dstShape] and returns dst: dst + Unslice(x), in place. Autodiff
// sums the gradients of the slices of one value with it (graph.UnsliceAdd).
// It panics if the region is outside dstShape or a length does not match.
func AddRegion[T Float](dst, x []T, dstShape, starts, ends []int) []T {
	const fn = "AddRegion"
	var out, st [tensor.MaxRank]int
	n := checkRegion(fn, dstShape, starts, ends, &out)
	checkLen(fn, "dst", len(dst), shapeSize(fn, dstShape))
	checkLen(fn, "x", len(x), n)
	if n == 0 {
		return dst
	}
	r := len(dstShape)
	off := regionOffset(dstShape, starts, &st)
	w := newWalk(out[:r], 2, [maxOps][]int{nil, st[:r]})
	in, sd := w.inner(), w.stride(1)
	var idx [tensor.MaxRank]int
	var offs [maxOps]int
	for o := 0; o < n; o += in {
		d := dst[off+offs[1]:]
		if sd == 1 {
			binaryVV(Add, d[:in], d[:in], x[o:o+in])
		} else {
			for i, v := range x[o : o+in] {
				d[i*sd] += v
			}
		}
		w.next(&idx, &offs, 2)
	}
	return dst
}

// Gelu sets dst[i] = x·Φ(x) = x/2·(1 + erf(x/√2)) (Hendrycks and Gimpel
// 2016, the exact form: Keras' gelu with approximate=False, PyTorch's
// default) and returns dst. dst may alias x. float32 runs AVX-512 where
// the CPU has it (the rational approximation of erf32 in float32 with FMA,
// gelu_amd64.s) and erf32 otherwise; float64 uses math.Erf.
func Gelu[T Float](dst, x []T) []T {
	checkLen("Gelu", "x", len(x), len(dst))
	if d, ok := any(dst).([]float32); ok {
		xs := any(x).([]float32)
		for i := geluBlocks(d, xs, nil); i < len(xs); i++ {
			v := xs[i]
			d[i] = 0.5 * v * (1 + erf32(v*invSqrt2))
		}
		return dst
	}
	for i, v := range x {
		f := float64(v)
		dst[i] = T(0.5 * f * (1 + math.Erf(f/math.Sqrt2)))
	}
	return dst
}

// GeluGrad sets dst[i] = g[i]·(Φ(x) + x·φ(x)), the gradient of Gelu at x[i]
// times g[i], φ the standard normal density, and returns dst. dst may alias
// x or g.
func GeluGrad[T Float](dst, x, g []T) []T {
	checkLen("GeluGrad", "x", len(x), len(dst))
	checkLen("GeluGrad", "g", len(g), len(dst))
	if d, ok := any(dst).([]float32); ok {
		xs, gs := any(x).([]float32), any(g).([]float32)
		for i := geluBlocks(d, xs, gs); i < len(xs); i++ {
			v := xs[i]
			d[i] = gs[i] * (0.5*(1+erf32(v*invSqrt2)) + v*invSqrt2Pi*exp32(-0.5*v*v))
		}
		return dst
	}
	for i, v := range x {
		f := float64(v)
		dst[i] = g[i] * T(0.5*(1+math.Erf(f/math.Sqrt2))+f*math.Exp(-0.5*f*f)/math.Sqrt(2*math.Pi))
	}
	return dst
}

const (
	invSqrt2   = float32(1 / math.Sqrt2)
	invSqrt2Pi = float32(0.3989422804014327) // 1/√(2π)
)

// erf32 is erf for float32: x·P(x²)/Q(x²) over [-4, 4] (beyond, erf is
// ±1 in float32), the rational approximation of Eigen's
// generic_fast_erf_float, evaluated in float64 so that only the
// approximation's own error remains (about 1e-7).
func erf32(x32 float32) float32 {
	x := float64(x32)
	if x > 4 {
		x = 4
	} else if x < -4 {
		x = -4
	}
	x2 := x * x
	p := x2*-2.72614225801306e-10 + 2.77068142495902e-08
	p = x2*p + -2.10102402082508e-06
	p = x2*p + -5.69250639462346e-05
	p = x2*p + -7.34990630326855e-04
	p = x2*p + -2.95459980854025e-03
	p = x2*p + -1.60960333262415e-02
	q := x2*-1.45660718464996e-05 + -2.13374055278905e-04
	q = x2*q + -1.68282697438203e-03
	q = x2*q + -7.37332916720468e-03
	q = x2*q + -1.42647390514189e-02
	return float32(x * p / q)
}

// exp32 is e^x in float32 for x <= 0 (0 below -87): 2^k·e^r with
// k = round(x/ln 2), |r| <= ln 2/2, e^r by its Taylor polynomial of degree 7
// (relative error below 1e-8 there, beneath float32's rounding).
func exp32(x float32) float32 {
	if x < -87 {
		return 0
	}
	k := float32(math.Floor(float64(x*1.4426950408889634 + 0.5)))
	r := x - k*0.693145751953125 - k*1.428606765330187e-06
	p := 1 + r*(1+r*(0.5+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}
