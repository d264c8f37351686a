package kernels

import "unsafe"

// MatMulOn sets dst = op(a)·op(b), or adds it to dst when accumulate is
// set, and returns dst.
//
//	dst:   [m, n]
//	op(a): [m, k]; a is stored [m, k] row-major, or [k, m] when transA
//	op(b): [k, n]; b is stored [k, n], or [n, k] when transB
//
// dst must not overlap a or b. float32 (and types defined on it) runs on
// SgemmOn: packed, cache-blocked, assembly micro-kernels on pool p's
// threads (gemm.go). float64 runs on the reference loops of MatMulRef on
// the calling goroutine. It panics if a size is negative or a length does
// not match.
func MatMulOn[T Float](p *Pool, dst, a, b []T, m, n, k int, transA, transB, accumulate bool) []T {
	checkMatMul("MatMul", len(dst), len(a), len(b), m, n, k)
	var zero T
	if unsafe.Sizeof(zero) == 4 && matmulFast {
		sgemm(p, float32s(dst), float32s(a), float32s(b), m, n, k, transA, transB, accumulate)
		return dst
	}
	matmulRef(dst, a, b, m, n, k, transA, transB, accumulate)
	return dst
}

// matmulFast routes float32 MatMul to Sgemm; tests turn it off to compare
// Sgemm with the reference through MatMul's callers.
var matmulFast = true

// float32s views x, whose element type has float32 as underlying type (Float
// with size 4), as []float32.
func float32s[T Float](x []T) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
}

// MatMulRef is MatMul on the reference loops, in any Float type: the
// definition the fast kernels are tested against. No operand is copied or
// repacked. The loop orders keep the innermost loop on contiguous memory:
// i-k-j (a row of dst updated by scaled rows of b) when b is not transposed,
// dot products of rows when it is. Products are summed in T. It panics if a
// size is negative or a length does not match.
func MatMulRef[T Float](dst, a, b []T, m, n, k int, transA, transB, accumulate bool) []T {
	checkMatMul("MatMulRef", len(dst), len(a), len(b), m, n, k)
	matmulRef(dst, a, b, m, n, k, transA, transB, accumulate)
	return dst
}

// matmulRef is MatMulRef after the checks.
func matmulRef[T Float](dst, a, b []T, m, n, k int, transA, transB, accumulate bool) {
	if !accumulate {
		clear(dst)
	}
	if m == 0 || n == 0 || k == 0 {
		return
	}
	switch {
	case !transA && !transB:
		for i := 0; i < m; i++ {
			d := dst[i*n : i*n+n]
			for p, av := range a[i*k : i*k+k] {
				axpy(d, av, b[p*n:p*n+n])
			}
		}
	case transA && !transB: // a: [k, m]
		for i := 0; i < m; i++ {
			d := dst[i*n : i*n+n]
			for p := 0; p < k; p++ {
				axpy(d, a[p*m+i], b[p*n:p*n+n])
			}
		}
	case !transA && transB: // b: [n, k]
		for i := 0; i < m; i++ {
			ar, d := a[i*k:i*k+k], dst[i*n:i*n+n]
			for j := range d {
				d[j] += dot(ar, b[j*k:j*k+k])
			}
		}
	default: // a: [k, m], b: [n, k]
		matmulTT(dst, a, b, m, n, k)
	}
}

// axpy sets d[j] += s·x[j]; len(x) == len(d).
func axpy[T Float](d []T, s T, x []T) {
	x = x[:len(d)]
	j := 0
	for ; j+4 <= len(d); j += 4 {
		d[j] += s * x[j]
		d[j+1] += s * x[j+1]
		d[j+2] += s * x[j+2]
		d[j+3] += s * x[j+3]
	}
	for ; j < len(d); j++ {
		d[j] += s * x[j]
	}
}

// dot returns Σ x[p]·y[p] with four partial sums; len(y) == len(x).
func dot[T Float](x, y []T) T {
	y = y[:len(x)]
	var s0, s1, s2, s3 T
	p := 0
	for ; p+4 <= len(x); p += 4 {
		s0 += x[p] * y[p]
		s1 += x[p+1] * y[p+1]
		s2 += x[p+2] * y[p+2]
		s3 += x[p+3] * y[p+3]
	}
	for ; p < len(x); p++ {
		s0 += x[p] * y[p]
	}
	return (s0 + s1) + (s2 + s3)
}

// matmulTT adds aᵀ·bᵀ to dst for a [k, m] and b [n, k]: dst[i, j] = Σ_p
// a[p, i]·b[j, p]. Four columns of a are read together so each cache line of
// a serves four rows of dst.
func matmulTT[T Float](dst, a, b []T, m, n, k int) {
	i := 0
	for ; i+4 <= m; i += 4 {
		for j := 0; j < n; j++ {
			br := b[j*k : j*k+k]
			var s0, s1, s2, s3 T
			for p, bv := range br {
				ac := a[p*m+i : p*m+i+4]
				s0 += ac[0] * bv
				s1 += ac[1] * bv
				s2 += ac[2] * bv
				s3 += ac[3] * bv
			}
			dst[i*n+j] += s0
			dst[(i+1)*n+j] += s1
			dst[(i+2)*n+j] += s2
			dst[(i+3)*n+j] += s3
		}
	}
	for ; i < m; i++ {
		for j := 0; j < n; j++ {
			var s T
			for p, bv := range b[j*k : j*k+k] {
				s += a[p*m+i] * bv
			}
			dst[i*n+j] += s
		}
	}
}
