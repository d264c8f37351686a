package kernels

import "math"

// Layer normalization over the last axis (Ba, Kiros and Hinton 2016), row
// by row over x [rows, C]: y = (x - μ)·r·gamma + beta with μ the row's
// mean and r = 1/√(σ² + eps), σ² its biased variance. Sums run in float64
// in both types. The forward pass writes each row's μ and r, which is all
// the backward pass needs beside x:
//
//	x̂ = (x - μ)·r, g = dy·gamma
//	dx = r·(g - mean(g) - x̂·mean(g·x̂))
//	dgamma = Σ_rows dy·x̂, dbeta = Σ_rows dy
//
// The row loops take a range of rows, so a caller can split them over
// threads; the backward pass adds its rows' dgamma and dbeta to float64
// partial sums the caller adds up in a fixed order.

// LayerNormRows sets rows [lo, hi) of y [rows, C] and their mean and rstd
// from x, gamma and beta [C], and returns y. y may alias x.
func LayerNormRows[T Float](y, mean, rstd, x, gamma, beta []T, C int, eps float64, lo, hi int) []T {
	const fn = "LayerNormRows"
	checkLayerNorm(fn, len(y), len(x), len(mean), len(rstd), len(gamma), len(beta), C, lo, hi)
	for r := lo; r < hi; r++ {
		xr, yr := x[r*C:(r+1)*C], y[r*C:(r+1)*C]
		var s float64
		for _, v := range xr {
			s += float64(v)
		}
		m := s / float64(C)
		var ss float64
		for _, v := range xr {
			d := float64(v) - m
			ss += d * d
		}
		rs := 1 / math.Sqrt(ss/float64(C)+eps)
		mean[r], rstd[r] = T(m), T(rs)
		for j, v := range xr {
			yr[j] = T((float64(v)-m)*rs)*gamma[j] + beta[j]
		}
	}
	return y
}

// LayerNormGradRows sets rows [lo, hi) of dx [rows, C] and adds their terms
// of dgamma and dbeta [C] to the float64 partial sums dgamma and dbeta, from
// dy, x, gamma and the forward pass's mean and rstd. dx may alias dy.
func LayerNormGradRows[T Float](dx []T, dgamma, dbeta []float64, dy, x, gamma, mean, rstd []T, C, lo, hi int) []T {
	const fn = "LayerNormGradRows"
	checkLayerNorm(fn, len(dx), len(x), len(mean), len(rstd), len(gamma), len(gamma), C, lo, hi)
	checkLen(fn, "dy", len(dy), len(x))
	checkLen(fn, "dgamma", len(dgamma), C)
	checkLen(fn, "dbeta", len(dbeta), C)
	for r := lo; r < hi; r++ {
		xr, dyr, dxr := x[r*C:(r+1)*C], dy[r*C:(r+1)*C], dx[r*C:(r+1)*C]
		m, rs := float64(mean[r]), float64(rstd[r])
		var sg, sgx float64
		for j, v := range xr {
			xh := (float64(v) - m) * rs
			g := float64(dyr[j]) * float64(gamma[j])
			sg += g
			sgx += g * xh
			dgamma[j] += float64(dyr[j]) * xh
			dbeta[j] += float64(dyr[j])
		}
		sg /= float64(C)
		sgx /= float64(C)
		for j, v := range xr {
			xh := (float64(v) - m) * rs
			dxr[j] = T(rs * (float64(dyr[j])*float64(gamma[j]) - sg - xh*sgx))
		}
	}
	return dx
}

func checkLayerNorm(fn string, y, x, mean, rstd, gamma, beta, C, lo, hi int) {
	if C <= 0 || x%C != 0 {
		panicf("%s: %d elements are not rows of C = %d", fn, x, C)
	}
	rows := x / C
	checkLen(fn, "y", y, x)
	checkLen(fn, "mean", mean, rows)
	checkLen(fn, "rstd", rstd, rows)
	checkLen(fn, "gamma", gamma, C)
	checkLen(fn, "beta", beta, C)
	if lo < 0 || lo > hi || hi > rows {
		panicf("%s: rows [%d, %d) of %d", fn, lo, hi, rows)
	}
}
