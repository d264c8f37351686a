package kernels_test

import (
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// benchBgemm benchmarks MatMulBF16 on threads threads (0: the default), on
// the shapes and with the GFLOP/s metric of BenchmarkSgemm
// (gemm_bench_test.go), so that
//
//	go test ./kernels -run '^$' -bench 'Sgemm1T/(1024|2048)$|Bgemm1T/(1024|2048)$'
//
// compares the two side by side.
func benchBgemm(b *testing.B, threads int) {
	if threads > 0 {
		defer kernels.UseThreads(threads)()
	}
	benchGemm(b, func(dst, a, w []float32, m, n, k int, ta, tb bool) {
		kernels.MatMulBF16(dst, a, w, m, n, k, ta, tb, false)
	})
}

func BenchmarkBgemm(b *testing.B)   { benchBgemm(b, 0) }
func BenchmarkBgemm1T(b *testing.B) { benchBgemm(b, 1) }
func BenchmarkBgemm2T(b *testing.B) { benchBgemm(b, 2) }
