package kernels_test

import (
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// gemmShape is one benchmarked product: dst [m, n] = op(a) [m, k] · op(b) [k, n].
type gemmShape struct {
	name           string
	m, n, k        int
	transA, transB bool
}

// gemmShapes are the square sizes of issue 4 and the dense layers of the
// reference mlp (784-1024-1024-10, batch 128): forward x·W (NN), the weight
// gradient xᵀ·dy (TN) and the input gradient dy·Wᵀ (NT). Names give
// batch×inputs×outputs as in BenchmarkMatMul.
var gemmShapes = []gemmShape{
	{"256", 256, 256, 256, false, false},
	{"512", 512, 512, 512, false, false},
	{"1024", 1024, 1024, 1024, false, false},
	{"2048", 2048, 2048, 2048, false, false},
	{"128x784x1024/NN", 128, 1024, 784, false, false},
	{"128x784x1024/TN", 784, 1024, 128, true, false},
	{"128x784x1024/NT", 128, 784, 1024, false, true},
	{"128x1024x1024/NN", 128, 1024, 1024, false, false},
	{"128x1024x1024/TN", 1024, 1024, 128, true, false},
	{"128x1024x1024/NT", 128, 1024, 1024, false, true},
}

// benchGemm times f on every shape and reports GFLOP/s (2·m·n·k per product).
func benchGemm(b *testing.B, f func(dst, a, w []float32, m, n, k int, ta, tb bool)) {
	for _, s := range gemmShapes {
		b.Run(s.name, func(b *testing.B) {
			r := rng(11)
			a, w := testutil.RandFloat32s(r, s.m*s.k), testutil.RandFloat32s(r, s.k*s.n)
			dst := make([]float32, s.m*s.n)
			f(dst, a, w, s.m, s.n, s.k, s.transA, s.transB) // warm-up: pool, caches
			b.ResetTimer()
			for b.Loop() {
				f(dst, a, w, s.m, s.n, s.k, s.transA, s.transB)
			}
			b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// benchSgemm benchmarks Sgemm on threads threads (0: the default).
func benchSgemm(b *testing.B, threads int) {
	defer kernels.WithoutExternalSgemm()()
	if threads > 0 {
		defer kernels.UseThreads(threads)()
	}
	benchGemm(b, func(dst, a, w []float32, m, n, k int, ta, tb bool) {
		kernels.Sgemm(dst, a, w, m, n, k, ta, tb, false)
	})
}

func BenchmarkSgemm(b *testing.B)   { benchSgemm(b, 0) }
func BenchmarkSgemm1T(b *testing.B) { benchSgemm(b, 1) }
func BenchmarkSgemm2T(b *testing.B) { benchSgemm(b, 2) }
