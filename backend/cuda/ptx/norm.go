package ptx

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Moments (BatchNormalization's batch statistics, graph/vision.go) and
// layer normalization (graph/sequence.go), with float64 sums as the
// host's kernels (kernels/vision_ops.go, kernels/layernorm.go): one block
// per column for the column statistics, one per row for the rows.
func init() {
	register(graph.OpMoments, renderer{dtypes: only32, render: renderMoments})
	register(graph.OpLayerNorm, renderer{dtypes: only32, render: renderLayerNorm})
	register(graph.OpLayerNormGrad, renderer{dtypes: only32, render: renderLayerNormGrad})
}

// renderMoments renders the mean (row 0 of the output [2, cols]) and the
// biased variance (row 1) of each column of x [rows, cols]: sums of x -
// x[0, c] and its square in float64 (the shift keeps a large mean from
// costing precision), mean = x[0, c] + s1/n, variance max(s2/n - (s1/n)², 0).
func renderMoments(r *req) error {
	rows, cols := r.it.Matrix.Rows, r.it.Matrix.Cols
	b, p, c, tid := r.rowKernel("moments", 2)
	x0 := b.widen(b.load(tensor.Float32, b.offset(p[1], c, 4)))
	s1, s2 := b.accF64(0), b.accF64(0)
	b.strided(tid, rows, func(j string) {
		d := b.opF64("sub.rn.f64", b.widen(b.load(tensor.Float32, b.rowAddr(p[1], j, cols, c))), x0)
		b.ins("add.rn.f64", s1, s1, d)
		b.ins("add.rn.f64", s2, s2, b.opF64("mul.rn.f64", d, d))
	})
	t1 := b.blockReduce(s1, tid, sumF64)
	t2 := b.blockReduce(s2, tid, sumF64)
	first := b.pred()
	b.ins("setp.eq.u32", first, tid, "0")
	end := b.newLabel()
	b.bra(first, true, end)
	n := f64i(float64(rows))
	m := b.opF64("div.rn.f64", t1, n)
	v := b.opF64("sub.rn.f64", b.opF64("div.rn.f64", t2, n), b.opF64("mul.rn.f64", m, m))
	neg := b.pred()
	b.ins("setp.lt.f64", neg, v, f64i(0))
	v = b.selpF64(f64i(0), v, neg)
	b.store(tensor.Float32, b.offset(p[0], c, 4), b.narrow(b.opF64("add.rn.f64", x0, m)))
	b.store(tensor.Float32, b.offset(p[0], b.addu(c, u32i(cols)), 4), b.narrow(v))
	b.label(end)
	r.launch(b.kernel(), cols, out(), in(0))
	return nil
}

// renderLayerNorm renders y = (x - μ)·r·gamma + beta over rows of x
// [rows, C] (in0; gamma in1, beta in2) with parts mean and r = 1/√(σ²+eps)
// (each rounded to float32; in the workspace when nothing reads them).
func renderLayerNorm(r *req) error {
	it := r.it
	rows, C := it.Matrix.Rows, it.Matrix.Cols
	mean := r.partOrWork(0, int64(rows*4))
	rstd := r.partOrWork(1, int64(rows*4))
	b, p, row, tid := r.rowKernel("layer_norm", 6)
	x := p[1]
	s := b.accF64(0)
	b.strided(tid, C, func(j string) {
		b.ins("add.rn.f64", s, s, b.widen(b.load(tensor.Float32, b.rowAddr(x, row, C, j))))
	})
	m := b.opF64("div.rn.f64", b.blockReduce(s, tid, sumF64), f64i(float64(C)))
	ss := b.accF64(0)
	b.strided(tid, C, func(j string) {
		d := b.opF64("sub.rn.f64", b.widen(b.load(tensor.Float32, b.rowAddr(x, row, C, j))), m)
		b.ins("add.rn.f64", ss, ss, b.opF64("mul.rn.f64", d, d))
	})
	v := b.opF64("add.rn.f64", b.opF64("div.rn.f64", b.blockReduce(ss, tid, sumF64), f64i(float64(C))), f64i(it.Matrix.Eps))
	sq := b.f64()
	b.ins("sqrt.rn.f64", sq, v)
	rs := b.opF64("div.rn.f64", f64i(1), sq)
	first := b.pred()
	b.ins("setp.eq.u32", first, tid, "0")
	b.guarded(first, false, "st.global.f32", addr(b.offset(p[4], row, 4), 0), b.narrow(m))
	b.guarded(first, false, "st.global.f32", addr(b.offset(p[5], row, 4), 0), b.narrow(rs))
	b.strided(tid, C, func(j string) {
		d := b.opF64("sub.rn.f64", b.widen(b.load(tensor.Float32, b.rowAddr(x, row, C, j))), m)
		xh := b.narrow(b.opF64("mul.rn.f64", d, rs))
		y := b.addF(b.mulF(xh, b.load(tensor.Float32, b.offset(p[2], j, 4))), b.load(tensor.Float32, b.offset(p[3], j, 4)))
		b.store(tensor.Float32, b.rowAddr(p[0], row, C, j), y)
	})
	r.launch(b.kernel(), rows, out(), in(0), in(1), in(2), mean, rstd)
	return nil
}

// renderLayerNormGrad renders dx (one block per row) and dgamma, dbeta
// (one block per column) from x (in0), gamma (in1), mean (in2), r (in3)
// and dy (in4), in float64 as the host:
//
//	x̂ = (x - μ)·r, g = dy·gamma
//	dx = r·(g - mean(g) - x̂·mean(g·x̂))
//	dgamma = Σ_rows dy·x̂, dbeta = Σ_rows dy
func renderLayerNormGrad(r *req) error {
	it := r.it
	rows, C := it.Matrix.Rows, it.Matrix.Cols
	dgamma := r.partOrWork(0, int64(C*4))
	dbeta := r.partOrWork(1, int64(C*4))
	// dx
	b, p, row, tid := r.rowKernel("layer_norm_grad", 6)
	x, gamma, dy := p[1], p[2], p[5]
	m := b.widen(b.load(tensor.Float32, b.offset(p[3], row, 4)))
	rs := b.widen(b.load(tensor.Float32, b.offset(p[4], row, 4)))
	xhat := func(j string) string {
		d := b.opF64("sub.rn.f64", b.widen(b.load(tensor.Float32, b.rowAddr(x, row, C, j))), m)
		return b.opF64("mul.rn.f64", d, rs)
	}
	gOf := func(j string) string {
		return b.opF64("mul.rn.f64", b.widen(b.load(tensor.Float32, b.rowAddr(dy, row, C, j))),
			b.widen(b.load(tensor.Float32, b.offset(gamma, j, 4))))
	}
	sg, sgx := b.accF64(0), b.accF64(0)
	b.strided(tid, C, func(j string) {
		g := gOf(j)
		b.ins("add.rn.f64", sg, sg, g)
		b.ins("add.rn.f64", sgx, sgx, b.opF64("mul.rn.f64", g, xhat(j)))
	})
	n := f64i(float64(C))
	mg := b.opF64("div.rn.f64", b.blockReduce(sg, tid, sumF64), n)
	mgx := b.opF64("div.rn.f64", b.blockReduce(sgx, tid, sumF64), n)
	b.strided(tid, C, func(j string) {
		d := b.opF64("sub.rn.f64", b.opF64("sub.rn.f64", gOf(j), mg), b.opF64("mul.rn.f64", xhat(j), mgx))
		b.store(tensor.Float32, b.rowAddr(p[0], row, C, j), b.narrow(b.opF64("mul.rn.f64", rs, d)))
	})
	r.launch(b.kernel(), rows, out(), in(0), in(1), in(2), in(3), in(4))
	// dgamma, dbeta
	b, p, col, tid := r.rowKernel("layer_norm_grad_params", 6)
	x, dy = p[0], p[3]
	sgm, sb := b.accF64(0), b.accF64(0)
	b.strided(tid, rows, func(j string) {
		mj := b.widen(b.load(tensor.Float32, b.offset(p[1], j, 4)))
		rj := b.widen(b.load(tensor.Float32, b.offset(p[2], j, 4)))
		xh := b.opF64("mul.rn.f64", b.opF64("sub.rn.f64", b.widen(b.load(tensor.Float32, b.rowAddr(x, j, C, col))), mj), rj)
		d := b.widen(b.load(tensor.Float32, b.rowAddr(dy, j, C, col)))
		b.ins("add.rn.f64", sgm, sgm, b.opF64("mul.rn.f64", d, xh))
		b.ins("add.rn.f64", sb, sb, d)
	})
	tg := b.blockReduce(sgm, tid, sumF64)
	tb := b.blockReduce(sb, tid, sumF64)
	first := b.pred()
	b.ins("setp.eq.u32", first, tid, "0")
	b.guarded(first, false, "st.global.f32", addr(b.offset(p[4], col, 4), 0), b.narrow(tg))
	b.guarded(first, false, "st.global.f32", addr(b.offset(p[5], col, 4), 0), b.narrow(tb))
	r.launch(b.kernel(), C, in(0), in(2), in(3), in(4), dgamma, dbeta)
	return nil
}
