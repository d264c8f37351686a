package cpu

import (
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The matrix product (graph/linalg.go) on the host: float32 products
// (bfloat16 operands under mixed_bfloat16) pack their operands into the
// engine's scratch.
func init() {
	register(graph.OpMatMul, kernel{
		bind: floats(func(b *Bound) func() error {
			if b.MatMul.BF16 {
				return bindMatMul(b, kernels.MatMulBF16On)
			}
			return bindMatMulChosen(b)
		}, func(b *Bound) func() error { return bindMatMul(b, kernels.MatMulOn[float64]) }),
		scratch: func(it *compile.Instr) int {
			g := it.MatMul
			m := g.M
			if g.SharedB && !g.TransA { // one product over the batch (see matmul)
				m *= g.Batch
			}
			return kernels.PackFloats(m, g.N, g.K, g.BF16)
		},
	})
}

// bindMatMul binds a product over its batch with mm (kernels.MatMul, or
// MatMulBF16 for bfloat16 operands).
func bindMatMul[T kernels.Float](b *Bound, mm func(p *kernels.Pool, dst, a, b []T, m, n, k int, transA, transB, accumulate bool) []T) func() error {
	dst, x, y, g, p := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), *b.MatMul, b.pool
	return func() error {
		matmul(p, &g, dst, x, y, mm)
		return nil
	}
}

// bindMatMulChosen binds a float32 product with its algorithm picked by
// b.choices (choose.go), as bindConvChosen does a convolution's.
func bindMatMulChosen(b *Bound) func() error {
	dst, x, y, g, p := tensor.As[float32](b.out), tensor.As[float32](b.in[0]), tensor.As[float32](b.in[1]), *b.MatMul, b.pool
	algo := new(kernels.MatMulAlgo)
	b.mmAlgo = algo
	mm := func(p *kernels.Pool, dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
		return kernels.MatMulWith(p, *algo, dst, a, b, m, n, k, transA, transB, accumulate)
	}
	m, transA := g.M, g.TransA
	if g.SharedB && !g.TransA {
		m *= g.Batch
	}
	run := func(a kernels.MatMulAlgo) {
		*algo = a
		matmul(p, &g, dst, x, y, mm)
	}
	b.pending = b.choices.pickMatMul(b, m, g.N, g.K, transA, g.TransB, algo, run)
	return func() error {
		matmul(p, &g, dst, x, y, mm)
		return nil
	}
}

// matmul runs the product g over its batch with mm.
func matmul[T kernels.Float](p *kernels.Pool, g *compile.MatMulGeom, dst, x, y []T, mm func(p *kernels.Pool, dst, a, b []T, m, n, k int, transA, transB, accumulate bool) []T) {
	am, bm, cm := g.M*g.K, g.K*g.N, g.M*g.N
	if g.SharedB && !g.TransA {
		// rows of every batch element are contiguous: one product
		mm(p, dst, x, y, g.Batch*g.M, g.N, g.K, false, g.TransB, false)
		return
	}
	for i := 0; i < g.Batch; i++ {
		yb := y
		if !g.SharedB {
			yb = y[i*bm : (i+1)*bm]
		}
		mm(p, dst[i*cm:(i+1)*cm], x[i*am:(i+1)*am], yb, g.M, g.N, g.K, g.TransA, g.TransB, false)
	}
}
