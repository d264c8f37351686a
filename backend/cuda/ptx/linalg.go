package ptx

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The matrix product (graph/linalg.go) runs on cuBLAS: one product for a
// shared b whose a rows are contiguous over the batch (a dense layer on a
// sequence), else one per batch element. Under mixed_bfloat16
// (MatMulGeom.BF16) both operands are rounded to bfloat16 in the
// workspace and multiplied with float32 products and sums
// (cublasGemmEx), as the host's MatMulBF16 rounds them.
func init() {
	register(graph.OpMatMul, renderer{dtypes: only32, render: renderMatMul})
}

func renderMatMul(r *req) error {
	g := r.it.MatMul
	am, bm, cm := g.M*g.K, g.K*g.N, g.M*g.N
	a, bArg := in(0), in(1)
	dt := tensor.Float32
	if g.BF16 {
		dt = tensor.BFloat16
		na, nb := g.Batch*am, g.Batch*bm
		if g.SharedB {
			nb = bm
		}
		wa, wb := r.work(int64(na*2)), r.work(int64(nb*2))
		r.cast(work(wa), a, na, dt)
		r.cast(work(wb), bArg, nb, dt)
		a, bArg = work(wa), work(wb)
	}
	es := int64(dt.Size())
	if g.SharedB && !g.TransA {
		r.gemm(Gemm{M: g.Batch * g.M, N: g.N, K: g.K, TransB: g.TransB, In: dt, A: a, B: bArg, C: out()})
		return nil
	}
	for i := 0; i < g.Batch; i++ {
		bi := bArg
		if !g.SharedB {
			bi = bArg.at(int64(i*bm) * es)
		}
		r.gemm(Gemm{M: g.M, N: g.N, K: g.K, TransA: g.TransA, TransB: g.TransB, In: dt,
			A: a.at(int64(i*am) * es), B: bi, C: out().at(int64(i*cm) * 4)})
	}
	return nil
}
