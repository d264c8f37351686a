package ptx

import (
	"math"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The softmax family over the last axis (graph/softmax.go), one block per
// row: the row's maximum, then float64 sums of exponentials as the host's
// kernels compute them (kernels/softmax.go), exp and log in float64.
func init() {
	register(graph.OpSoftmax, renderer{dtypes: only32, render: renderSoftmax})
	register(graph.OpLogSoftmax, renderer{dtypes: only32, render: renderSoftmax})
	register(graph.OpSoftmaxGrad, renderer{dtypes: only32, render: renderSoftmaxGrad})
	register(graph.OpLogSoftmaxGrad, renderer{dtypes: only32, render: renderSoftmaxGrad})
	register(graph.OpSoftmaxCrossEntropy, renderer{dtypes: only32, render: renderSCE})
	register(graph.OpSoftmaxCrossEntropyGrad, renderer{dtypes: only32, render: renderSCE})
}

// rowAddr returns the address of element j of row row (of cols float32s)
// at base.
func (b *builder) rowAddr(base, row string, cols int, j string) string {
	return b.offset(base, b.madu(row, cols, j), 4)
}

// rowMax returns the maximum of row row (as the host's rowMax: -Inf for an
// empty row, NaN if any element is).
func (b *builder) rowMax(x, row, tid string, cols int) string {
	m := b.accF32(float32(math.Inf(-1)))
	b.strided(tid, cols, func(j string) {
		b.accumulate(m, b.load(tensor.Float32, b.rowAddr(x, row, cols, j)), true)
	})
	return b.blockReduce(m, tid, maxF32)
}

// rowSumExp returns Σ_j e^(x_j - m) in float64 over the row (m float64).
func (b *builder) rowSumExp(x, row, tid string, cols int, m string) string {
	s := b.accF64(0)
	b.strided(tid, cols, func(j string) {
		v := b.widen(b.load(tensor.Float32, b.rowAddr(x, row, cols, j)))
		b.ins("add.rn.f64", s, s, b.exp64(b.opF64("sub.rn.f64", v, m)))
	})
	return b.blockReduce(s, tid, sumF64)
}

// rowLogSumExp returns the host's logSumExp of the row (float64): m + log
// Σ e^(x-m), or m itself when m is infinite.
func (b *builder) rowLogSumExp(x, row, tid string, cols int) string {
	m := b.widen(b.rowMax(x, row, tid, cols))
	s := b.rowSumExp(x, row, tid, cols, m)
	lse := b.opF64("add.rn.f64", m, b.log64(s))
	inf := b.pred()
	a := b.f64()
	b.ins("abs.f64", a, m)
	b.ins("setp.eq.f64", inf, a, f64i(math.Inf(1)))
	return b.selpF64(m, lse, inf)
}

// renderSoftmax renders softmax (e^(x-m) rounded, then times 1/Σ in
// float64, rounded again: the host's two roundings) and log_softmax
// (x - lse).
func renderSoftmax(r *req) error {
	it := r.it
	rows, cols := it.Matrix.Rows, it.Matrix.Cols
	b, p, row, tid := r.rowKernel("softmax", 2)
	if it.Op == graph.OpLogSoftmax {
		b.family = "log_softmax"
		lse := b.rowLogSumExp(p[1], row, tid, cols)
		b.strided(tid, cols, func(j string) {
			v := b.widen(b.load(tensor.Float32, b.rowAddr(p[1], row, cols, j)))
			b.store(tensor.Float32, b.rowAddr(p[0], row, cols, j), b.narrow(b.opF64("sub.rn.f64", v, lse)))
		})
	} else {
		m := b.widen(b.rowMax(p[1], row, tid, cols))
		s := b.rowSumExp(p[1], row, tid, cols, m)
		inv := b.opF64("div.rn.f64", f64i(1), s)
		b.strided(tid, cols, func(j string) {
			v := b.widen(b.load(tensor.Float32, b.rowAddr(p[1], row, cols, j)))
			e := b.widen(b.narrow(b.exp64(b.opF64("sub.rn.f64", v, m))))
			b.store(tensor.Float32, b.rowAddr(p[0], row, cols, j), b.narrow(b.opF64("mul.rn.f64", e, inv)))
		})
	}
	r.launch(b.kernel(), rows, out(), in(0))
	return nil
}

// renderSoftmaxGrad renders y ⊙ (g - Σ g⊙y) (softmax) or g - e^y·Σ g
// (log_softmax), in float64 as the host: in0 is y, in1 is g.
func renderSoftmaxGrad(r *req) error {
	it := r.it
	rows, cols := it.Matrix.Rows, it.Matrix.Cols
	b, p, row, tid := r.rowKernel("softmax_grad", 3)
	logSoftmax := it.Op == graph.OpLogSoftmaxGrad
	if logSoftmax {
		b.family = "log_softmax_grad"
	}
	s := b.accF64(0)
	b.strided(tid, cols, func(j string) {
		g := b.widen(b.load(tensor.Float32, b.rowAddr(p[2], row, cols, j)))
		if logSoftmax {
			b.ins("add.rn.f64", s, s, g)
			return
		}
		y := b.widen(b.load(tensor.Float32, b.rowAddr(p[1], row, cols, j)))
		b.ins("add.rn.f64", s, s, b.opF64("mul.rn.f64", y, g))
	})
	sum := b.blockReduce(s, tid, sumF64)
	b.strided(tid, cols, func(j string) {
		y := b.widen(b.load(tensor.Float32, b.rowAddr(p[1], row, cols, j)))
		g := b.widen(b.load(tensor.Float32, b.rowAddr(p[2], row, cols, j)))
		var d string
		if logSoftmax {
			d = b.opF64("sub.rn.f64", g, b.opF64("mul.rn.f64", b.exp64(y), sum))
		} else {
			d = b.opF64("mul.rn.f64", y, b.opF64("sub.rn.f64", g, sum))
		}
		b.store(tensor.Float32, b.rowAddr(p[0], row, cols, j), b.narrow(d))
	})
	r.launch(b.kernel(), rows, out(), in(0), in(1))
	return nil
}

// renderSCE renders softmax cross-entropy from logits (in0) and int32
// labels (in1): the loss lse - x[label] per row, or with the upstream
// gradient g (in2) the gradient g·(e^(x-lse) - [j == label]). A label
// outside [0, cols) makes the row NaN and is reported in the error
// record (position: the row, value: the label).
func renderSCE(r *req) error {
	it := r.it
	rows, cols := it.Matrix.Rows, it.Matrix.Cols
	grad := it.Op == graph.OpSoftmaxCrossEntropyGrad
	params := 4
	family := "softmax_xent"
	if grad {
		params, family = 5, "softmax_xent_grad"
	}
	b, p, row, tid := r.rowKernel(family, params)
	rec := p[len(p)-1]
	label := b.r32()
	b.ins("ld.global.u32", label, addr(b.offset(p[2], row, 4), 0))
	bad := b.pred()
	b.ins("setp.ge.u32", bad, label, u32i(cols)) // a negative label is a large u32
	lse := b.rowLogSumExp(p[1], row, tid, cols)
	nan := f32i(float32(math.NaN()))
	if !grad {
		first, lead := b.pred(), b.pred()
		b.ins("setp.eq.u32", first, tid, "0")
		xl := b.f32()
		b.ins("mov.f32", xl, f32i(0))
		b.guarded(bad, true, "ld.global.f32", xl, addr(b.rowAddr(p[1], row, cols, label), 0))
		loss := b.narrow(b.opF64("sub.rn.f64", lse, b.widen(xl)))
		loss = b.selpF32(nan, loss, bad)
		b.guarded(first, false, "st.global.f32", addr(b.offset(p[0], row, 4), 0), loss)
		b.ins("and.pred", lead, first, bad)
		b.reportBad(rec, lead, row, label)
		r.launch(b.kernel(), rows, out(), in(0), in(1), errRecord())
		r.out.Checks = true
		return nil
	}
	g := b.widen(b.load(tensor.Float32, b.offset(p[3], row, 4)))
	b.strided(tid, cols, func(j string) {
		v := b.widen(b.load(tensor.Float32, b.rowAddr(p[1], row, cols, j)))
		e := b.exp64(b.opF64("sub.rn.f64", v, lse))
		hit := b.pred()
		b.ins("setp.eq.u32", hit, j, label)
		e1 := b.opF64("sub.rn.f64", e, f64i(1))
		e = b.selpF64(e1, e, hit)
		d := b.narrow(b.opF64("mul.rn.f64", g, e))
		b.store(tensor.Float32, b.rowAddr(p[0], row, cols, j), b.selpF32(nan, d, bad))
	})
	first, lead := b.pred(), b.pred()
	b.ins("setp.eq.u32", first, tid, "0")
	b.ins("and.pred", lead, first, bad)
	b.reportBad(rec, lead, row, label)
	r.launch(b.kernel(), rows, out(), in(0), in(1), in(2), errRecord())
	r.out.Checks = true
	return nil
}
