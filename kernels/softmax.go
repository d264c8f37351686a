package kernels

import "math"

// The softmax family works on the last axis of a [rows, cols] view. Every
// kernel subtracts the row maximum before exponentiating, so no finite input
// overflows, and evaluates exp, log and the row sums in float64. dst may
// alias an input. The float32 cross-entropy and its gradient run on
// attention's vector row operations where the CPU has them (rowsVector):
// e^x in float32 within about an ulp, the row's sum in float32 lanes, the
// log in float64.

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

// rowsVector reports whether the float32 cross-entropy runs on attention's
// vector row operations (attnRows: AVX-512 or AVX2+FMA).
func rowsVector() bool { return simdTrans && attnRows.name != "go" }

// crossChunk is the floats of a row exponentiated at a time through a
// buffer on the stack (the cross-entropy writes no row).
const crossChunk = 256

// lse32 returns logsumexp(row) of a float32 row on the vector row
// operations: m + log Σ e^(row - m), m the row's maximum, the terms
// rounded to float32 and summed in float32 lanes chunk by chunk, the
// chunks and the log in float64. ok is false for an empty row or one whose
// maximum is infinite (the float64 loop keeps their edge values).
func lse32(row []float32) (lse float64, ok bool) {
	if len(row) == 0 {
		return 0, false
	}
	m := rowMax32(row)
	if math.IsInf(float64(m), 0) {
		return 0, false
	}
	var buf [crossChunk]float32
	var s float64
	for c := 0; c < len(row); c += crossChunk {
		n := copy(buf[:], row[c:])
		s += float64(rowExpSum(buf[:n], m))
	}
	return float64(m) + math.Log(s), true
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
	vector := rowsVector()
	for r, l := range labels {
		if l < 0 || int(l) >= cols {
			loss[r] = T(math.NaN())
			if bad < 0 {
				bad = r
			}
			continue
		}
		xr := logits[r*cols : r*cols+cols]
		if x32, ok := any(xr).([]float32); ok && vector {
			if lse, ok := lse32(x32); ok {
				loss[r] = T(lse - float64(xr[l]))
				continue
			}
		}
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
	vector := rowsVector()
	for r, l := range labels {
		xr, d := logits[r*cols:r*cols+cols], dst[r*cols:r*cols+cols]
		if l < 0 || int(l) >= cols {
			Fill(d, T(math.NaN()))
			if bad < 0 {
				bad = r
			}
			continue
		}
		if x32, ok := any(xr).([]float32); ok && vector && crossGrad32(any(d).([]float32), x32, int(l), float32(g[r])) {
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

// crossGrad32 sets d = g·(softmax(x) - onehot(l)) for a float32 row on the
// vector row operations (d may be x): d = e^(x - m) in place, then scaled
// by g/Σ, and d[l] from x[l] in float64. It reports false, writing
// nothing, where lse32 does.
func crossGrad32(d, x []float32, l int, g float32) bool {
	if len(x) == 0 {
		return false
	}
	m := rowMax32(x)
	if math.IsInf(float64(m), 0) {
		return false
	}
	xl := float64(x[l])
	copy(d, x)
	s := rowExpSum(d, m)
	lse := float64(m) + math.Log(float64(s))
	BinaryScalar(Mul, d, d, g/s)
	d[l] = float32(float64(g) * (math.Exp(xl-lse) - 1))
	return true
}
