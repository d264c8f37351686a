package ptx

import (
	"errors"
	"fmt"
	"math"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Attention (graph/sequence.go) without the Tq×Tk probabilities in
// memory: the forward pass keeps each query row's log-sum-exp and the
// backward pass recomputes the probabilities from it (Rabe and Staats
// 2021; Dao et al. 2022), as the host's kernels (kernels/attention.go),
// whose row loop these follow operation for operation. The forward pass
// runs one block per query row: the scores' maximum over its keys
// (strided over the threads), then the keys in chunks of Block, each
// thread one key's e^(s-m) into shared memory and the first D threads one
// output column each, summed over the chunk in key order. The backward
// pass is three kernels with no atomics: each row's do·o, dq (a block per
// query row, the keys in chunks) and dk, dv (a block per key row, the
// queries in chunks). Dropout on the probabilities is not rendered; a
// mask is.
//
// Layouts: q, o, do, dq [B, Tq, H, D]; k, v, dk, dv [B, Tk, H, D]; lse
// [B, H, Tq]; the mask [B, Tq, Tk] (uint8, 1 = attend).
func init() {
	register(graph.OpAttention, renderer{dtypes: only32, render: renderAttention})
	register(graph.OpAttentionGrad, renderer{dtypes: only32, render: renderAttentionGrad})
}

// attnKernel is the state of one attention kernel: its sizes and the
// addresses of its operands.
type attnKernel struct {
	b               *builder
	B, Tq, Tk, H, D int
	scale           float64
	causal          bool
	off             int    // the causal offset: key j is visible to query i when j <= i + off
	q, k, v, mask   string // operand addresses (mask "" without one)
	bb, h           string // the block's batch element and head (u32)
	tid             string
	ld              int // elements between rows of q, k, v: H·D
}

func newAttn(r *req, b *builder) (*attnKernel, error) {
	a := r.it.Attention
	if a.Rate != 0 {
		return nil, errors.New("dropout on the attention probabilities is not rendered for the GPU")
	}
	if a.D > Block {
		return nil, fmt.Errorf("head size %d is above %d", a.D, Block)
	}
	k := &attnKernel{b: b, B: a.B, Tq: a.Tq, Tk: a.Tk, H: a.H, D: a.D, scale: a.Scale, causal: a.Causal != graph.NotCausal, ld: a.H * a.D}
	if a.Causal != graph.CausalTopLeft {
		k.off = a.Tk - a.Tq
	}
	return k, nil
}

// rowOf returns the element offset of row t of batch element bb, head h,
// in a [B, T, H, D] tensor.
func (a *attnKernel) rowOf(bb, t string, T int) string {
	b := a.b
	return b.madu(b.madu(bb, T, t), a.ld, b.mulu(a.h, a.D))
}

// dot returns the float32 dot product of D elements at x and y (element
// offsets xo, yo), as the host's dot: four partial sums, (s0+s1)+(s2+s3).
func (a *attnKernel) dot(x, xo, y, yo string) string {
	b := a.b
	xa, ya := b.offset(x, xo, 4), b.offset(y, yo, 4)
	s := []string{b.accF32(0), b.accF32(0), b.accF32(0), b.accF32(0)}
	for d := 0; d < a.D; d++ {
		lane := d % 4
		if d >= a.D/4*4 {
			lane = 0
		}
		u, w := b.f32(), b.f32()
		b.ins("ld.global.f32", u, addr(xa, 4*d))
		b.ins("ld.global.f32", w, addr(ya, 4*d))
		b.ins("add.rn.f32", s[lane], s[lane], b.mulF(u, w))
	}
	return b.addF(b.addF(s[0], s[1]), b.addF(s[2], s[3]))
}

// visible returns the predicate "query i sees key j": i < Tq, j < Tk, j
// <= i + off when causal, mask[bb, i, j] != 0 with a mask (read only where
// the others hold).
func (a *attnKernel) visible(i, j string) string {
	b := a.b
	p, q := b.pred(), b.pred()
	b.ins("setp.lt.u32", p, j, u32i(a.Tk))
	b.ins("setp.lt.u32", q, i, u32i(a.Tq))
	b.ins("and.pred", p, p, q)
	if a.causal {
		lim, c := b.r32(), b.pred()
		b.ins("add.s32", lim, i, u32i(a.off))
		b.ins("setp.le.s32", c, j, lim)
		b.ins("and.pred", p, p, c)
	}
	if a.mask != "" {
		m := b.r16()
		b.ins("mov.u16", m, "0")
		cell := b.madu(b.madu(a.bb, a.Tq, i), a.Tk, j)
		b.guarded(p, false, "ld.global.u8", m, addr(b.offset(a.mask, cell, 1), 0))
		nz := b.pred()
		b.ins("setp.ne.u16", nz, m, "0")
		b.ins("and.pred", p, p, nz)
	}
	return p
}

// score returns Scale·(q_i·k_j) in float64.
func (a *attnKernel) score(i, j string) string {
	b := a.b
	return b.opF64("mul.rn.f64", f64i(a.scale), b.widen(a.dot(a.q, a.rowOf(a.bb, i, a.Tq), a.k, a.rowOf(a.bb, j, a.Tk))))
}

// chunks writes a loop over the chunks of n rows, Block at a time: body
// gets the chunk's first row (u32). The trip count is the same in every
// thread (barriers inside are reached by all).
func (a *attnKernel) chunks(n int, body func(base string)) {
	b := a.b
	base := b.r32()
	b.ins("mov.u32", base, "0")
	top, end := b.newLabel(), b.newLabel()
	p := b.pred()
	b.label(top)
	b.ins("setp.ge.u32", p, base, u32i(n))
	b.bra(p, false, end)
	body(base)
	b.ins("add.s32", base, base, u32i(Block))
	b.bra("", false, top)
	b.label(end)
}

// sharedArray returns the shared address of the f32 array slot (Block
// floats each) after the reductions' space.
func (a *attnKernel) sharedArray(slot int) string {
	b := a.b
	base := b.sharedBase(Block*8 + (slot+1)*Block*4)
	r := b.r32()
	b.ins("add.s32", r, base, u32i(Block*8+slot*Block*4))
	return r
}

// renderAttention renders o (the output) and lse (part 1, or workspace).
func renderAttention(r *req) error {
	it := r.it
	at := it.Attention
	lse := r.partOrWork(0, int64(at.B*at.H*at.Tq*4))
	b, p, blk, tid := r.rowKernel("attention", 6)
	a, err := newAttn(r, b)
	if err != nil {
		return err
	}
	a.tid = tid
	a.q, a.k, a.v = p[1], p[2], p[3]
	if at.MaskIn >= 0 {
		a.mask = p[4]
	}
	i, bh := b.remu(blk, a.Tq), b.divu(blk, a.Tq)
	a.h, a.bb = b.remu(bh, a.H), b.divu(bh, a.H)
	// the maximum score
	m := b.accF64(math.Inf(-1))
	b.strided(tid, a.Tk, func(j string) {
		vis := a.visible(i, j)
		skip := b.newLabel()
		b.bra(vis, true, skip)
		b.ins("mov.f64", m, b.maxF64(m, a.score(i, j)))
		b.label(skip)
	})
	m = b.blockReduce(m, tid, maxF64)
	orow := b.addu(a.rowOf(a.bb, i, a.Tq), tid)
	mine := b.pred()
	b.ins("setp.lt.u32", mine, tid, u32i(a.D))
	first := b.pred()
	b.ins("setp.eq.u32", first, tid, "0")
	ninf, done := b.pred(), b.newLabel()
	b.ins("setp.eq.f64", ninf, m, f64i(math.Inf(-1)))
	whole := b.newLabel()
	b.bra(ninf, true, whole) // the block-uniform branch of a row with no visible key: o = 0, lse = -Inf
	b.guarded(mine, false, "st.global.f32", addr(b.offset(p[0], orow, 4), 0), f32i(0))
	b.guarded(first, false, "st.global.f32", addr(b.offset(p[5], blk, 4), 0), f32i(float32(math.Inf(-1))))
	b.bra("", false, done)
	b.label(whole)
	l, acc := b.accF64(0), b.accF32(0)
	es := a.sharedArray(0)
	a.chunks(a.Tk, func(base string) {
		j := b.addu(base, tid)
		vis := a.visible(i, j)
		e := b.accF64(0)
		skip := b.newLabel()
		b.bra(vis, true, skip)
		b.ins("mov.f64", e, b.exp64(b.opF64("sub.rn.f64", a.score(i, j), m)))
		b.ins("add.rn.f64", l, l, e)
		b.label(skip)
		b.ins("st.shared.f32", addr(b.madu(tid, 4, es), 0), b.narrow(e))
		b.ins("bar.sync", "0")
		a.weighted(mine, acc, es, a.v, base, a.Tk)
		b.ins("bar.sync", "0")
	})
	l = b.blockReduce(l, tid, sumF64)
	b.guarded(mine, false, "st.global.f32", addr(b.offset(p[0], orow, 4), 0), b.narrow(b.opF64("div.rn.f64", b.widen(acc), l)))
	b.guarded(first, false, "st.global.f32", addr(b.offset(p[5], blk, 4), 0), b.narrow(b.opF64("add.rn.f64", m, b.log64(l))))
	b.label(done)
	mask := Arg{Role: RoleIn, Index: 0}
	if at.MaskIn >= 0 {
		mask = Arg{Role: RoleIn, Index: at.MaskIn}
	}
	r.launch(b.kernel(), at.B*at.H*at.Tq, out(), in(0), in(1), in(2), mask, lse)
	return nil
}

// weighted adds, in the threads where mine holds (tid < D), Σ_t w[t]·
// x[row base+t, column tid] over the chunk's rows (at most Block, fewer at
// the end) to acc, in row order: each product rounded, then added, as the
// host's axpy.
func (a *attnKernel) weighted(mine, acc, w, x, base string, T int) {
	b := a.b
	skip := b.newLabel()
	b.bra(mine, true, skip)
	count := b.r32()
	b.ins("sub.s32", count, u32i(T), base)
	b.ins("min.u32", count, count, u32i(Block))
	b.counted0(count, func(t string) {
		wt, xv := b.f32(), b.f32()
		b.ins("ld.shared.f32", wt, addr(b.madu(t, 4, w), 0))
		b.ins("ld.global.f32", xv, addr(b.offset(x, b.addu(a.rowOf(a.bb, b.addu(base, t), T), a.tid), 4), 0))
		b.ins("add.rn.f32", acc, acc, b.mulF(wt, xv))
	})
	b.label(skip)
}

// counted0 writes a loop over t = 0 ... n-1 for n a register.
func (b *builder) counted0(n string, body func(t string)) {
	t := b.r32()
	b.ins("mov.u32", t, "0")
	top, end := b.newLabel(), b.newLabel()
	p := b.pred()
	b.label(top)
	b.ins("setp.ge.u32", p, t, n)
	b.bra(p, false, end)
	body(t)
	b.ins("add.s32", t, t, "1")
	b.bra("", false, top)
	b.label(end)
}

// renderAttentionGrad renders dq (the output), dk and dv (parts 1 and 2,
// or workspace) from q (in0), k (in1), v (in2), o (in3), lse (in4) and do
// (in5), as the host's row loop:
//
//	P_ij = e^(Scale·q_i·k_j - lse_i), D_i = do_i·o_i
//	ds_ij = P_ij·(do_i·v_j - D_i)·Scale
//	dq_i = Σ_j ds_ij·k_j, dk_j = Σ_i ds_ij·q_i, dv_j = Σ_i P_ij·do_i
func renderAttentionGrad(r *req) error {
	it := r.it
	at := it.Attention
	nk := int64(at.B * at.Tk * at.H * at.D * 4)
	dk := r.partOrWork(0, nk)
	dv := r.partOrWork(1, nk)
	rows := at.B * at.H * at.Tq
	di := work(r.work(int64(rows * 4)))
	mask := Arg{Role: RoleIn, Index: 0}
	if at.MaskIn >= 0 {
		mask = Arg{Role: RoleIn, Index: at.MaskIn}
	}
	// D_i: one thread per query row
	{
		b, p, row := r.elementwiseKernel("attention_grad_di", 3, rows)
		a, err := newAttn(r, b)
		if err != nil {
			return err
		}
		i, bh := b.remu(row, a.Tq), b.divu(row, a.Tq)
		a.h, a.bb = b.remu(bh, a.H), b.divu(bh, a.H)
		off := a.rowOf(a.bb, i, a.Tq)
		b.store(tensor.Float32, b.offset(p[0], row, 4), a.dot(p[1], off, p[2], off))
		r.launch(b.kernel(), blocks(rows), di, in(5), in(3))
	}
	if err := r.attnGradQ(di, mask); err != nil {
		return err
	}
	return r.attnGradKV(di, mask, dk, dv)
}

// attnState starts a block-per-row attention gradient kernel with params
// q, k, v, do, lse, D_i, mask and the outputs.
func (r *req) attnState(family string, outs int) (*attnKernel, []string, string, error) {
	b, p, blk, tid := r.rowKernel(family, 7+outs)
	a, err := newAttn(r, b)
	if err != nil {
		return nil, nil, "", err
	}
	a.tid = tid
	a.q, a.k, a.v = p[0], p[1], p[2]
	if r.it.Attention.MaskIn >= 0 {
		a.mask = p[6]
	}
	return a, p, blk, nil
}

// dsOf returns P_ij and ds_ij (float32, as the host rounds them) for query
// row i (its lse l and D_i di, float32) and key j.
func (a *attnKernel) dsOf(do, i, j, l, di string) (string, string) {
	b := a.b
	pij := b.narrow(b.exp64(b.opF64("sub.rn.f64", a.score(i, j), b.widen(l))))
	dv := a.dot(do, a.rowOf(a.bb, i, a.Tq), a.v, a.rowOf(a.bb, j, a.Tk))
	ds := b.mulF(b.mulF(pij, b.subF(dv, di)), f32i(float32(a.scale)))
	return pij, ds
}

// attnGradQ appends dq: a block per query row, the keys in chunks.
func (r *req) attnGradQ(di, mask Arg) error {
	at := r.it.Attention
	a, p, blk, err := r.attnState("attention_grad_q", 1)
	if err != nil {
		return err
	}
	b, tid := a.b, a.tid
	i, bh := b.remu(blk, a.Tq), b.divu(blk, a.Tq)
	a.h, a.bb = b.remu(bh, a.H), b.divu(bh, a.H)
	l := b.load(tensor.Float32, b.offset(p[4], blk, 4))
	d := b.load(tensor.Float32, b.offset(p[5], blk, 4))
	mine := b.pred()
	b.ins("setp.lt.u32", mine, tid, u32i(a.D))
	acc := b.accF32(0)
	ninf, done := b.pred(), b.newLabel()
	b.ins("setp.eq.f32", ninf, l, f32i(float32(math.Inf(-1))))
	b.bra(ninf, false, done) // block-uniform: a row that saw no key has dq = 0
	ws := a.sharedArray(0)
	a.chunks(a.Tk, func(base string) {
		j := b.addu(base, tid)
		vis := a.visible(i, j)
		ds := b.accF32(0)
		skip := b.newLabel()
		b.bra(vis, true, skip)
		_, v := a.dsOf(p[3], i, j, l, d)
		b.ins("mov.f32", ds, v)
		b.label(skip)
		b.ins("st.shared.f32", addr(b.madu(tid, 4, ws), 0), ds)
		b.ins("bar.sync", "0")
		a.weighted(mine, acc, ws, a.k, base, a.Tk)
		b.ins("bar.sync", "0")
	})
	b.label(done)
	b.guarded(mine, false, "st.global.f32", addr(b.offset(p[7], b.addu(a.rowOf(a.bb, i, a.Tq), tid), 4), 0), acc)
	r.launch(b.kernel(), at.B*at.H*at.Tq, in(0), in(1), in(2), in(5), in(4), di, mask, out())
	return nil
}

// attnGradKV appends dk and dv: a block per key row, the queries in
// chunks, each query's P and ds recomputed.
func (r *req) attnGradKV(di, mask, dk, dv Arg) error {
	at := r.it.Attention
	a, p, blk, err := r.attnState("attention_grad_kv", 2)
	if err != nil {
		return err
	}
	b, tid := a.b, a.tid
	j, bh := b.remu(blk, a.Tk), b.divu(blk, a.Tk)
	a.h, a.bb = b.remu(bh, a.H), b.divu(bh, a.H)
	mine := b.pred()
	b.ins("setp.lt.u32", mine, tid, u32i(a.D))
	accK, accV := b.accF32(0), b.accF32(0)
	ws, ps := a.sharedArray(0), a.sharedArray(1)
	a.chunks(a.Tq, func(base string) {
		i := b.addu(base, tid)
		vis := a.visible(i, j)
		row := b.madu(bh, a.Tq, i)
		l, d := b.accF32(0), b.accF32(0)
		b.guarded(vis, false, "ld.global.f32", l, addr(b.offset(p[4], row, 4), 0))
		b.guarded(vis, false, "ld.global.f32", d, addr(b.offset(p[5], row, 4), 0))
		seen := b.pred()
		b.ins("setp.ne.f32", seen, l, f32i(float32(math.Inf(-1))))
		b.ins("and.pred", vis, vis, seen)
		ds, pij := b.accF32(0), b.accF32(0)
		skip := b.newLabel()
		b.bra(vis, true, skip)
		pv, dv := a.dsOf(p[3], i, j, l, d)
		b.ins("mov.f32", pij, pv)
		b.ins("mov.f32", ds, dv)
		b.label(skip)
		b.ins("st.shared.f32", addr(b.madu(tid, 4, ws), 0), ds)
		b.ins("st.shared.f32", addr(b.madu(tid, 4, ps), 0), pij)
		b.ins("bar.sync", "0")
		a.weighted(mine, accK, ws, a.q, base, a.Tq)
		a.weighted(mine, accV, ps, p[3], base, a.Tq)
		b.ins("bar.sync", "0")
	})
	at0 := b.addu(a.rowOf(a.bb, j, a.Tk), tid)
	b.guarded(mine, false, "st.global.f32", addr(b.offset(p[7], at0, 4), 0), accK)
	b.guarded(mine, false, "st.global.f32", addr(b.offset(p[8], at0, 4), 0), accV)
	r.launch(b.kernel(), at.B*at.H*at.Tk, in(0), in(1), in(2), in(5), in(4), di, mask, dk, dv)
	return nil
}
