package kernels

import "math"

// The softmax family works on the last axis of a [rows, cols] view. Every
// kernel subtracts the row maximum before exponentiating, so no finite input
// overflows, and evaluates exp, log and the row sums in float64. dst may
// alias an input.

func checkRows(fn, what string, n, rows, cols int) {
	if rows < 0 || cols < 0 {
		panicf("%s: negative size %d×%d", fn, rows, cols)
	}
	checkLen(fn, what, n, rows*cols)
}

// rowMax returns the largest element of row (-Inf for an empty row); a NaN
// makes it NaN.
func rowMax[T Float](row []T) float64 {
	m := math.Inf(-1)
	for _, v := range row {
		m = max(m, float64(v))
	}
	return m
}

// logSumExp returns log Σ_c e^row[c], computed as m + log Σ e^(row[c]-m)
// with m = max(row): -Inf for an empty row or a row of -Inf, +Inf if any
// element is +Inf, NaN if any is NaN.
func logSumExp[T Float](row []T) float64 {
	m := rowMax(row)
	if math.IsInf(m, 0) {
		return m
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s)
}

// Softmax sets dst[r, c] = e^x[r,c] / Σ_c' e^x[r,c'] for x, dst [rows, cols]
// and returns dst. Each row sums to 1 (within rounding).
func Softmax[T Float](dst, x []T, rows, cols int) []T {
	const fn = "Softmax"
	checkRows(fn, "x", len(x), rows, cols)
	checkLen(fn, "dst", len(dst), len(x))
	for r := 0; r < rows; r++ {
		xr, d := x[r*cols:r*cols+cols], dst[r*cols:r*cols+cols]
		m := rowMax(xr)
		var s float64
		for c, v := range xr {
			e := math.Exp(float64(v) - m)
			s += e
			d[c] = T(e)
		}
		inv := 1 / s
		for c := range d {
			d[c] = T(float64(d[c]) * inv)
		}
	}
	return dst
}

// LogSoftmax sets dst[r, c] = x[r, c] - log Σ_c' e^x[r,c'] for x, dst
// [rows, cols] and returns dst.
func LogSoftmax[T Float](dst, x []T, rows, cols int) []T {
	const fn = "LogSoftmax"
	checkRows(fn, "x", len(x), rows, cols)
	checkLen(fn, "dst", len(dst), len(x))
	for r := 0; r < rows; r++ {
		xr, d := x[r*cols:r*cols+cols], dst[r*cols:r*cols+cols]
		lse := logSumExp(xr)
		for c, v := range xr {
			d[c] = T(float64(v) - lse)
		}
	}
	return dst
}

// SoftmaxGrad sets dst = y ⊙ (g - Σ_c g⊙y), row by row, and returns dst: the
// gradient through y = Softmax(x) given the upstream gradient g. y, g, dst are
// [rows, cols].
func SoftmaxGrad[T Float](dst, y, g []T, rows, cols int) []T {
	const fn = "SoftmaxGrad"
	checkRows(fn, "y", len(y), rows, cols)
	checkLen(fn, "g", len(g), len(y))
	checkLen(fn, "dst", len(dst), len(y))
	for r := 0; r < rows; r++ {
		yr, gr, d := y[r*cols:r*cols+cols], g[r*cols:r*cols+cols], dst[r*cols:r*cols+cols]
		var s float64
		for c, v := range yr {
			s += float64(v) * float64(gr[c])
		}
		for c, v := range yr {
			d[c] = T(float64(v) * (float64(gr[c]) - s))
		}
	}
	return dst
}

// LogSoftmaxGrad sets dst = g - e^y ⊙ Σ_c g, row by row, and returns dst: the
// gradient through y = LogSoftmax(x) given the upstream gradient g. y, g, dst
// are [rows, cols].
func LogSoftmaxGrad[T Float](dst, y, g []T, rows, cols int) []T {
	const fn = "LogSoftmaxGrad"
	checkRows(fn, "y", len(y), rows, cols)
	checkLen(fn, "g", len(g), len(y))
	checkLen(fn, "dst", len(dst), len(y))
	for r := 0; r < rows; r++ {
		yr, gr, d := y[r*cols:r*cols+cols], g[r*cols:r*cols+cols], dst[r*cols:r*cols+cols]
		var s float64
		for _, v := range gr {
			s += float64(v)
		}
		for c, v := range yr {
			d[c] = T(float64(gr[c]) - math.Exp(float64(v))*s)
		}
	}
	return dst
}

// SoftmaxCrossEntropy sets loss[r] = logsumexp(logits[r, :]) - logits[r,
// labels[r]], the cross-entropy of softmax(logits[r]) against the class
// labels[r], for logits [rows, cols] and loss, labels [rows]. A label outside
// [0, cols) is bad data, not a programmer error: that row's loss is NaN and
// bad is the index of the first such row, or -1 when every label is valid.
func SoftmaxCrossEntropy[T Float](loss, logits []T, labels []int32, rows, cols int) (bad int) {
	const fn = "SoftmaxCrossEntropy"
	checkRows(fn, "logits", len(logits), rows, cols)
	checkLen(fn, "labels", len(labels), rows)
	checkLen(fn, "loss", len(loss), rows)
	bad = -1
	for r, l := range labels {
		if l < 0 || int(l) >= cols {
			loss[r] = T(math.NaN())
			if bad < 0 {
				bad = r
			}
			continue
		}
		xr := logits[r*cols : r*cols+cols]
		loss[r] = T(logSumExp(xr) - float64(xr[l]))
	}
	return bad
}

// SoftmaxCrossEntropyGrad sets dst[r, c] = g[r]·(softmax(logits[r])[c] -
// [c == labels[r]]), the gradient of SoftmaxCrossEntropy with respect to the
// logits given the upstream gradient g [rows] of the per-row loss. dst may
// alias logits. A row with a label outside [0, cols) is set to NaN (the
// gradient of its NaN loss) and bad is the first such row, or -1.
func SoftmaxCrossEntropyGrad[T Float](dst, logits []T, labels []int32, g []T, rows, cols int) (bad int) {
	const fn = "SoftmaxCrossEntropyGrad"
	checkRows(fn, "logits", len(logits), rows, cols)
	checkLen(fn, "labels", len(labels), rows)
	checkLen(fn, "g", len(g), rows)
	checkLen(fn, "dst", len(dst), len(logits))
	bad = -1
	for r, l := range labels {
		xr, d := logits[r*cols:r*cols+cols], dst[r*cols:r*cols+cols]
		if l < 0 || int(l) >= cols {
			Fill(d, T(math.NaN()))
			if bad < 0 {
				bad = r
			}
			continue
		}
		lse, gr := logSumExp(xr), float64(g[r])
		for c, v := range xr {
			p := math.Exp(float64(v) - lse)
			if c == int(l) {
				p--
			}
			d[c] = T(gr * p)
		}
	}
	return bad
}
