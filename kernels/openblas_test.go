//go:build openblas && cgo

package kernels_test

import (
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
)

// TestOpenBLASSuite runs the shared suite on OpenBLAS, which also checks the
// argument translation of SgemmOpenBLAS.
func TestOpenBLASSuite(t *testing.T) {
	defer kernels.UseMatMulRef()()
	kernels.SetOpenBLASThreads(1)
	kerneltest.Run(t, kerneltest.Impl{Name: "openblas", MatMul: kernels.SgemmOpenBLAS})
}

// benchOpenBLAS benchmarks cblas_sgemm on the shapes of BenchmarkSgemm.
func benchOpenBLAS(b *testing.B, threads int) {
	kernels.SetOpenBLASThreads(threads)
	benchGemm(b, func(dst, a, w []float32, m, n, k int, ta, tb bool) {
		kernels.SgemmOpenBLAS(dst, a, w, m, n, k, ta, tb, false)
	})
}

func BenchmarkOpenBLAS1T(b *testing.B) { benchOpenBLAS(b, 1) }
func BenchmarkOpenBLAS2T(b *testing.B) { benchOpenBLAS(b, 2) }
