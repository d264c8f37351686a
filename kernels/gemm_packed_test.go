package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
)

// packedOn is SgemmPackedOn as a kerneltest product: op(b) packed first,
// into a buffer (kept between calls) with NaN guards past its end.
func packedOn(p *kernels.Pool) kerneltest.MatMulFunc {
	var buf []float32
	return func(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
		l := kernels.PackedBLen(n, k)
		if cap(buf) < l+8 {
			buf = make([]float32, l+8)
		}
		bp := buf[:l+8]
		for i := range bp {
			bp[i] = float32(math.NaN())
		}
		kernels.PackB(bp[:l], b, n, k, transB)
		for i, v := range bp[l:] {
			if !math.IsNaN(float64(v)) {
				panic(fmt.Sprintf("PackB wrote past its length at %d", l+i))
			}
		}
		return kernels.SgemmPackedOn(p, dst, a, bp[:l], m, n, k, transA, transB, accumulate)
	}
}

// TestSgemmPacked checks products over a packed op(b) on every tier and 1
// and 3 threads: the kernel suite's checks against the definition (odd
// sizes, transposes, accumulate, IEEE cases, guards), the same bits as
// Sgemm on random shapes with small blocks (several K blocks and B blocks
// per thread), and one packed b read by several products.
func TestSgemmPacked(t *testing.T) {
	forEachConfig(t, func(t *testing.T, p *kernels.Pool) {
		t.Run("suite", func(t *testing.T) {
			defer kernels.UseMatMulRef()()
			kerneltest.Run(t, kerneltest.Impl{Name: "sgemm_packed", Threads: p.Threads(), MatMul: packedOn(p)})
		})
		r := rand.New(rand.NewPCG(5, 9))
		same := func(t *testing.T, m, n, k int, ta, tb, acc bool) {
			t.Helper()
			a, b := testutil.RandFloat32s(r, m*k), testutil.RandFloat32s(r, k*n)
			want, got := testutil.RandFloat32s(r, m*n), make([]float32, m*n)
			copy(got, want)
			kernels.SgemmOn(p, want, a, b, m, n, k, ta, tb, acc)
			packedOn(p)(got, a, b, m, n, k, ta, tb, acc)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("%dx%dx%d ta=%v tb=%v acc=%v: element %d is %v packed, %v by Sgemm", m, n, k, ta, tb, acc, i, got[i], want[i])
				}
			}
		}
		t.Run("small blocks", func(t *testing.T) {
			defer kernels.UseGemmBlocking(16, 24, 64)()
			for range 10 {
				m, n, k := 1+r.IntN(70), 1+r.IntN(150), 1+r.IntN(50)
				for _, v := range variants {
					same(t, m, n, k, v.ta, v.tb, v.acc)
				}
			}
		})
		t.Run("recurrent shapes", func(t *testing.T) {
			// the reference lstm's step (32×1024×256) and input gradient
			// (32×256×1024, b transposed), and a narrow product
			same(t, 32, 1024, 256, false, false, false)
			same(t, 32, 256, 1024, false, true, false)
			same(t, 7, 12, 600, true, false, true)
		})
		t.Run("shared", func(t *testing.T) {
			// one packing read by products of other rows, as the steps do
			m, n, k := 9, 70, 40
			b := testutil.RandFloat32s(r, k*n)
			bp := kernels.PackB(make([]float32, kernels.PackedBLen(n, k)), b, n, k, false)
			for step := range 3 {
				a := testutil.RandFloat32s(r, (m+step)*k)
				want := kernels.SgemmOn(p, make([]float32, (m+step)*n), a, b, m+step, n, k, false, false, false)
				got := kernels.SgemmPackedOn(p, make([]float32, (m+step)*n), a, bp, m+step, n, k, false, false, false)
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
						t.Fatalf("step %d: element %d is %v packed, %v by Sgemm", step, i, got[i], want[i])
					}
				}
			}
		})
		t.Run("no allocation", func(t *testing.T) {
			m, n, k := 32, 256, 128
			a, b := testutil.RandFloat32s(r, m*k), testutil.RandFloat32s(r, k*n)
			bp, dst := make([]float32, kernels.PackedBLen(n, k)), make([]float32, m*n)
			kernels.PackB(bp, b, n, k, true)
			kernels.SgemmPackedOn(p, dst, a, bp, m, n, k, false, true, false)
			if allocs := testing.AllocsPerRun(5, func() {
				kernels.PackB(bp, b, n, k, true)
				kernels.SgemmPackedOn(p, dst, a, bp, m, n, k, false, true, false)
			}); allocs != 0 {
				t.Fatalf("%v allocations a packing and product", allocs)
			}
		})
	})
}

// BenchmarkSgemmPacked times the reference lstm's per-step products with
// op(b) packed once against Sgemm packing it each time, on the pool of GOMAXPROCS threads: the step (32×1024×256) and the state's gradient (32×256×1024, b
// transposed).
func BenchmarkSgemmPacked(b *testing.B) {
	defer kernels.WithoutExternalSgemm()()
	p := kernels.NewPool(0)
	defer p.Close()
	for _, s := range []gemmShape{
		{"lstm_step", 32, 1024, 256, false, false},
		{"lstm_dh", 32, 256, 1024, false, true},
	} {
		r := rng(3)
		a, w := testutil.RandFloat32s(r, s.m*s.k), testutil.RandFloat32s(r, s.k*s.n)
		dst := make([]float32, s.m*s.n)
		bp := kernels.PackB(make([]float32, kernels.PackedBLen(s.n, s.k)), w, s.n, s.k, s.transB)
		for _, v := range []struct {
			name string
			f    func()
		}{
			{"sgemm", func() { kernels.SgemmOn(p, dst, a, w, s.m, s.n, s.k, s.transA, s.transB, false) }},
			{"packed", func() { kernels.SgemmPackedOn(p, dst, a, bp, s.m, s.n, s.k, s.transA, s.transB, false) }},
		} {
			b.Run(s.name+"/"+v.name, func(b *testing.B) {
				v.f()
				b.ResetTimer()
				for b.Loop() {
					v.f()
				}
				b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
