package kernels_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
)

// matMulTileShapes are products the register tiles take (n a multiple of
// 16; with transA, m of 4), with rows left over past each tile height and
// a last strip of 16 columns, and products they refuse.
var matMulTileShapes = [][3]int{
	{1, 16, 1}, {4, 16, 5}, {7, 48, 17}, {12, 32, 64}, {13, 80, 33}, {36, 96, 32},
	{32, 1024, 256}, {100, 64, 300}, {5, 17, 3}, {6, 33, 8},
}

// TestMatMulAlgos runs every algorithm MatMulAlgos offers on each product
// against the definition (the kernel suite's CheckMatMul), on 1-3
// threads: the tiles give the same bits on any number of threads and
// alone (tiles1), and allocate nothing.
func TestMatMulAlgos(t *testing.T) {
	defer kernels.WithoutExternalSgemm()()
	forEachPool(t, "algos", func(t *testing.T, p *kernels.Pool) {
		seed, tiles := uint64(1), 0
		for _, s := range matMulTileShapes {
			m, n, k := s[0], s[1], s[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, acc := range []bool{false, true} {
						algos := kernels.MatMulAlgos(m, n, k, ta, tb, acc, p.Threads())
						wantTiles := kernels.HasTiles() && n%16 == 0 && !tb && !acc && (!ta || m%4 == 0)
						if got := slices.Contains(algos, kernels.MatMulTiles); got != wantTiles || algos[0] != kernels.MatMulPacked {
							t.Errorf("m=%d n=%d k=%d ta=%v tb=%v acc=%v: algorithms %v (tiles offered: want %v)", m, n, k, ta, tb, acc, algos, wantTiles)
						}
						var bits [][]float32
						for _, algo := range algos {
							seed++
							var got []float32
							kerneltest.CheckMatMul(t, func(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
								got = kernels.MatMulWith(p, algo, dst, a, b, m, n, k, transA, transB, accumulate)
								return got
							}, m, n, k, ta, tb, acc, 77) // one seed: the algorithms' bits compare
							if algo == kernels.MatMulTiles || algo == kernels.MatMulTilesOne {
								tiles++
								bits = append(bits, slices.Clone(got))
							}
						}
						if len(bits) == 2 && !slices.Equal(bits[0], bits[1]) {
							t.Errorf("m=%d n=%d k=%d ta=%v: tiles and tiles1 differ", m, n, k, ta)
						}
					}
				}
			}
		}
		if kernels.HasTiles() && tiles == 0 {
			t.Error("no product ran on the tiles")
		}
	})
}

// TestMatMulTilesThreads checks that the tiles give the same bits on 1-3
// threads, and that a tiles product allocates nothing.
func TestMatMulTilesThreads(t *testing.T) {
	if !kernels.HasTiles() {
		t.Skip("no AVX-512 register tiles on this machine: MatMulAlgos never offers them")
	}
	const m, n, k = 33, 1040, 70
	a, b := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = float32(i%13) - 6.5
	}
	for i := range b {
		b[i] = float32(i%7)*0.25 - 1
	}
	var first []float32
	for threads := 1; threads <= 3; threads++ {
		p := kernels.NewPool(threads)
		for _, ta := range []bool{false, true} {
			mm := m
			if ta {
				mm = 32
			}
			dst := make([]float32, mm*n)
			kernels.MatMulWith(p, kernels.MatMulTiles, dst, a[:mm*k], b, mm, n, k, ta, false, false)
			if threads == 1 && !ta {
				first = slices.Clone(dst)
			} else if !ta && !slices.Equal(first, dst) {
				t.Errorf("%d threads: other bits than on one", threads)
			}
			if allocs := testing.AllocsPerRun(5, func() {
				kernels.MatMulWith(p, kernels.MatMulTiles, dst, a[:mm*k], b, mm, n, k, ta, false, false)
			}); allocs != 0 {
				t.Errorf("%d threads, transA=%v: %v allocations a product", threads, ta, allocs)
			}
		}
		p.Close()
	}
}

// TestParseMatMulAlgo round-trips every name and refuses others.
func TestParseMatMulAlgo(t *testing.T) {
	for _, a := range []kernels.MatMulAlgo{kernels.MatMulPacked, kernels.MatMulPackedOne, kernels.MatMulTiles, kernels.MatMulTilesOne} {
		if got, err := kernels.ParseMatMulAlgo(a.String()); err != nil || got != a {
			t.Errorf("%v: %v, %v", a, got, err)
		}
	}
	if _, err := kernels.ParseMatMulAlgo("direct"); err == nil {
		t.Error("direct: no error")
	}
}

// BenchmarkMatMulAlgos times each algorithm on the small products of the
// mlp at batch 32 and of the lstm's steps (batch 32, 256 units), on the
// default pool.
func BenchmarkMatMulAlgos(b *testing.B) {
	p := kernels.NewPool(0)
	defer p.Close()
	for _, s := range []struct {
		name    string
		m, n, k int
		ta, tb  bool
	}{
		{"mlp-dense-784", 32, 1024, 784, false, false},
		{"mlp-dense-1024", 32, 1024, 1024, false, false},
		{"mlp-dW-1024", 1024, 1024, 32, true, false},
		{"mlp-dW-784", 784, 1024, 32, true, false},
		{"mlp-dx-1024", 32, 1024, 1024, false, true},
		{"lstm-step", 32, 1024, 256, false, false},
		{"lstm-dW", 256, 1024, 32, true, false},
		{"lstm-dh", 32, 256, 1024, false, true},
		{"gpt-qkv", 4096, 384, 128, false, false},
	} {
		a, bb, dst := make([]float32, s.m*s.k), make([]float32, s.k*s.n), make([]float32, s.m*s.n)
		for i := range a {
			a[i] = float32(i%5) * 0.1
		}
		for _, algo := range kernels.MatMulAlgos(s.m, s.n, s.k, s.ta, s.tb, false, p.Threads()) {
			b.Run(fmt.Sprintf("%s/%v", s.name, algo), func(b *testing.B) {
				b.SetBytes(0)
				for i := 0; i < b.N; i++ {
					kernels.MatMulWith(p, algo, dst, a, bb, s.m, s.n, s.k, s.ta, s.tb, false)
				}
				b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
