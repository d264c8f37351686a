//go:build openblas && cgo

package kernels

import "github.com/headroom-ml/headroom/kernels/internal/openblas"

// Build tag openblas: Sgemm (and so float32 MatMul) runs on OpenBLAS's
// cblas_sgemm, for side-by-side comparison with the kernels here. It needs
// cgo and Debian's libopenblas-dev; the default build never uses it.
// OpenBLAS runs on its own threads (OPENBLAS_NUM_THREADS or
// SetOpenBLASThreads), not on the Pool a product is given, for every pool
// of the process.

func init() { sgemmExternal = openblas.Sgemm }

// SgemmOpenBLAS is Sgemm on OpenBLAS, whatever the routing. It panics as
// Sgemm does.
func SgemmOpenBLAS(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
	checkMatMul("SgemmOpenBLAS", len(dst), len(a), len(b), m, n, k)
	if m == 0 || n == 0 {
		return dst
	}
	if k == 0 {
		if !accumulate {
			clear(dst)
		}
		return dst
	}
	openblas.Sgemm(dst, a, b, m, n, k, transA, transB, accumulate)
	return dst
}

// SetOpenBLASThreads sets OpenBLAS's thread count.
func SetOpenBLASThreads(n int) { openblas.SetThreads(n) }
