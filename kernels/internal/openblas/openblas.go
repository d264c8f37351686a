//go:build openblas && cgo

package openblas

// #cgo LDFLAGS: -lopenblas
// #include <cblas.h>
import "C"

// Sgemm sets dst [m, n] = op(a)·op(b), or adds it when accumulate is set,
// with cblas_sgemm (row-major, alpha 1, beta 0 or 1). op(a) is [m, k]: a is
// stored [m, k], or [k, m] when transA; op(b) is [k, n]: b is stored [k, n],
// or [n, k] when transB. Sizes must be positive and lengths must match; the
// caller checks.
func Sgemm(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) {
	ta, lda := C.enum_CBLAS_TRANSPOSE(C.CblasNoTrans), k
	if transA {
		ta, lda = C.CblasTrans, m
	}
	tb, ldb := C.enum_CBLAS_TRANSPOSE(C.CblasNoTrans), n
	if transB {
		tb, ldb = C.CblasTrans, k
	}
	beta := C.float(0)
	if accumulate {
		beta = 1
	}
	C.cblas_sgemm(C.CblasRowMajor, ta, tb, C.blasint(m), C.blasint(n), C.blasint(k),
		1, (*C.float)(&a[0]), C.blasint(lda), (*C.float)(&b[0]), C.blasint(ldb),
		beta, (*C.float)(&dst[0]), C.blasint(n))
}

// SetThreads sets OpenBLAS's thread count (as OPENBLAS_NUM_THREADS does at
// start-up).
func SetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }
