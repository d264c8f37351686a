package kernels

import (
	"math"

	"github.com/headroom-ml/headroom/tensor"
)

// Reductions are the transpose of broadcasting: x [xShape] is summed (or
// maxed) into dst, which has x's shape with the reduced axes set to 1 (the
// keepdims form; dropping those 1s does not change the data). dstStrides are
// dst's element strides for each dimension of xShape, 0 on the reduced axes:
// tensor.BroadcastStrides(keepdimsShape, xShape). dst is overwritten and
// must not overlap x.

// checkReduce validates a reduction's operands and returns len(x).
func checkReduce(fn string, dstLen, xLen int, xShape, dstStrides []int) int {
	n := shapeSize(fn, xShape)
	checkLen(fn, "x", xLen, n)
	if len(dstStrides) != len(xShape) {
		panicf("%s: %d dst strides for x shape %s", fn, len(dstStrides), dims(xShape))
	}
	want := 1 // dst's size: the product of the kept dimensions
	for d, s := range dstStrides {
		if s < 0 {
			panicf("%s: negative stride in dst strides %s", fn, dims(dstStrides))
		}
		if s != 0 {
			want *= xShape[d]
		}
	}
	checkLen(fn, "dst", dstLen, want)
	if sp := span(xShape, dstStrides); sp != 0 && sp != dstLen {
		panicf("%s: dst strides %s over x shape %s cover %d elements, dst has %d", fn, dims(dstStrides), dims(xShape), sp, dstLen)
	}
	return n
}

// ReduceSumOn sets dst to the sum of x over the axes where dstStrides is 0
// and returns dst. Summing a whole run of x into one element accumulates
// in float64; summing rows into a vector (SumRowsOn, on pool p)
// accumulates in T. An empty reduction gives 0.
func ReduceSumOn[T Float](p *Pool, dst, x []T, xShape, dstStrides []int) []T {
	const fn = "ReduceSum"
	n := checkReduce(fn, len(dst), len(x), xShape, dstStrides)
	clear(dst)
	if n == 0 {
		return dst
	}
	w := newWalk(xShape, 2, [maxOps][]int{nil, dstStrides})
	in, sd := w.inner(), w.stride(1)
	if w.nd == 2 && sd == 1 && w.st[1][0] == 0 {
		return SumRowsOn(p, dst, x, w.shape[0], in) // [rows, cols] -> [cols]: the bias gradient
	}
	var idx [tensor.MaxRank]int
	var off [maxOps]int
	for o := 0; o < n; o += in {
		row, od := x[o:o+in], off[1]
		switch sd {
		case 0:
			var s float64
			for _, v := range row {
				s += float64(v)
			}
			dst[od] += T(s)
		case 1:
			d := dst[od : od+in]
			for i, v := range row {
				d[i] += v
			}
		default:
			for i, v := range row {
				dst[od+i*sd] += v
			}
		}
		w.next(&idx, &off, 2)
	}
	return dst
}

// ReduceMax sets dst to the maximum of x over the axes where dstStrides is 0
// and returns dst. The identity is -Inf (an empty reduction gives -Inf) and a
// NaN anywhere in a reduced group makes that result NaN.
func ReduceMax[T Float](dst, x []T, xShape, dstStrides []int) []T {
	const fn = "ReduceMax"
	n := checkReduce(fn, len(dst), len(x), xShape, dstStrides)
	Fill(dst, T(math.Inf(-1)))
	if n == 0 {
		return dst
	}
	w := newWalk(xShape, 2, [maxOps][]int{nil, dstStrides})
	in, sd := w.inner(), w.stride(1)
	var idx [tensor.MaxRank]int
	var off [maxOps]int
	for o := 0; o < n; o += in {
		row, od := x[o:o+in], off[1]
		switch sd {
		case 0:
			m := dst[od]
			for _, v := range row {
				m = max(m, v)
			}
			dst[od] = m
		default:
			for i, v := range row {
				dst[od+i*sd] = max(dst[od+i*sd], v)
			}
		}
		w.next(&idx, &off, 2)
	}
	return dst
}

// SumRowsOn sets dst[c] = Σ_r x[r, c] for x [rows, cols] and dst [cols],
// and returns dst: the gradient of a bias broadcast over rows. dst is
// overwritten. A large float32 matrix splits its columns over pool p's
// threads (each column summed in the same order on any thread).
func SumRowsOn[T Float](p *Pool, dst, x []T, rows, cols int) []T {
	const fn = "SumRows"
	if rows < 0 || cols < 0 {
		panicf("%s: negative size %d×%d", fn, rows, cols)
	}
	checkLen(fn, "x", len(x), rows*cols)
	checkLen(fn, "dst", len(dst), cols)
	if d32, ok := any(dst).([]float32); ok && sumRowsFast(p, d32, any(x).([]float32), rows, cols) {
		return dst
	}
	clear(dst)
	for r := 0; r < rows; r++ {
		row := x[r*cols : r*cols+cols]
		for c, v := range row {
			dst[c] += v
		}
	}
	return dst
}
