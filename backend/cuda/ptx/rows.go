package ptx

import "fmt"

// Block-wide reductions and loops: the kernels that reduce a row (or a
// column) run one block per row, its elements strided over the block's
// threads, and combine the threads' partial results by a tree in shared
// memory with a barrier between levels. Every thread reaches every
// barrier: these kernels never return early.

// tid returns %tid.x (u32), read once per kernel.
func (b *builder) threadID() string { return b.special("%tid.x") }

// sharedBase returns the shared address of smem, reserving at least bytes.
func (b *builder) sharedBase(bytes int) string {
	b.shared = max(b.shared, bytes)
	r := b.r32()
	b.ins("mov.u32", r, "smem")
	return r
}

// reduceOp combines two values of a block reduction.
type reduceOp uint8

const (
	sumF64 reduceOp = iota // float64 sum
	maxF32                 // Go's max of float32 (NaN wins)
	sumF32                 // float32 sum
	maxF64                 // the max of float64 (NaN wins)
)

// blockReduce combines v (one value per thread of the block) with op and
// returns the result, the same in every thread. tid is %tid.x.
func (b *builder) blockReduce(v, tid string, op reduceOp) string {
	size, typ := 8, "f64"
	if op == maxF32 || op == sumF32 {
		size, typ = 4, "f32"
	}
	base := b.sharedBase(b.block * 8)
	mine := b.madu(tid, size, base)
	b.ins("st.shared."+typ, addr(mine, 0), v)
	b.ins("bar.sync", "0")
	for s := b.block / 2; s >= 1; s /= 2 {
		p := b.pred()
		b.ins("setp.lt.u32", p, tid, u32i(s))
		var x, y string
		if typ == "f64" {
			x, y = b.f64(), b.f64()
		} else {
			x, y = b.f32(), b.f32()
		}
		b.guarded(p, false, "ld.shared."+typ, x, addr(mine, 0))
		b.guarded(p, false, "ld.shared."+typ, y, addr(mine, s*size))
		var z string
		switch op {
		case sumF64:
			z = b.f64()
			b.guarded(p, false, "add.rn.f64", z, x, y)
		case sumF32:
			z = b.f32()
			b.guarded(p, false, "add.rn.f32", z, x, y)
		case maxF32:
			z = b.maxMin(true, x, y) // computed in every thread, stored by those below s
		case maxF64:
			z = b.maxF64(x, y)
		}
		b.guarded(p, false, "st.shared."+typ, addr(mine, 0), z)
		b.ins("bar.sync", "0")
	}
	var r string
	if typ == "f64" {
		r = b.f64()
	} else {
		r = b.f32()
	}
	b.ins("ld.shared."+typ, r, addr(base, 0))
	b.ins("bar.sync", "0") // the shared memory may be written again after this
	return r
}

// strided writes a loop over j = tid, tid + Block, ... < n: body is
// written once with j the loop's register.
func (b *builder) strided(tid string, n int, body func(j string)) {
	j := b.r32()
	b.ins("mov.u32", j, tid)
	top, end := b.newLabel(), b.newLabel()
	p := b.pred()
	b.label(top)
	b.ins("setp.ge.u32", p, j, u32i(n))
	b.bra(p, false, end)
	body(j)
	b.ins("add.s32", j, j, u32i(b.block))
	b.bra("", false, top)
	b.label(end)
}

// counted writes a loop over j = 0 ... n-1 (one thread's serial loop).
func (b *builder) counted(n int, body func(j string)) {
	j := b.r32()
	b.ins("mov.u32", j, "0")
	top, end := b.newLabel(), b.newLabel()
	p := b.pred()
	b.label(top)
	b.ins("setp.ge.u32", p, j, u32i(n))
	b.bra(p, false, end)
	body(j)
	b.ins("add.s32", j, j, "1")
	b.bra("", false, top)
	b.label(end)
}

// accF64 returns a float64 register set to v, to accumulate into in a
// loop (the loop's body writes the same register).
func (b *builder) accF64(v float64) string {
	r := b.f64()
	b.ins("mov.f64", r, f64i(v))
	return r
}

func (b *builder) accF32(v float32) string {
	r := b.f32()
	b.ins("mov.f32", r, f32i(v))
	return r
}

// reportBad records bad data in the error record at rec where p is true:
// the first reporter (an atomic compare-and-swap of the flag from 0 to 1)
// writes the position pos and the value val (u32 registers).
func (b *builder) reportBad(rec, p, pos, val string) {
	old, first := b.r32(), b.pred()
	b.ins("mov.u32", old, "1")
	b.guarded(p, false, "atom.global.cas.b32", old, addr(rec, 0), "0", "1")
	b.ins("setp.eq.u32", first, old, "0")
	b.guarded(first, false, "st.global.u32", addr(rec, 4), pos)
	b.guarded(first, false, "st.global.u32", addr(rec, 8), val)
}

// rowKernel starts a kernel of one block per row: it returns the builder,
// its parameters, the row (%ctaid.x) and the thread (%tid.x).
func (r *req) rowKernel(family string, params int) (*builder, []string, string, string) {
	b := newBuilder(r.arch, family, Block)
	b.note = fmt.Sprintf("%s %s%v", r.it.Op, r.it.DType, r.it.Shape)
	p := b.paramsN(params)
	return b, p, b.special("%ctaid.x"), b.threadID()
}

// maxF64 returns the larger of two float64, NaN if either is.
func (b *builder) maxF64(x, y string) string {
	gt, nan := b.pred(), b.pred()
	b.ins("setp.gt.f64", gt, x, y)
	r := b.selpF64(x, y, gt)
	b.ins("setp.nan.f64", nan, x, y)
	return b.selpF64(b.opF64("add.rn.f64", x, y), r, nan)
}
