package ptx

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The data-movement ops (graph/shape.go) and the gradients of slice and
// gather: one thread per output element, moving elements by their size
// (the values are never looked at) except where a sum is taken.
func init() {
	bySize := func(out, _ tensor.DType) bool { return movable(out) }
	register(graph.OpTranspose, renderer{dtypes: bySize, render: renderTranspose})
	register(graph.OpBroadcastTo, renderer{dtypes: bySize, render: renderBroadcastTo})
	register(graph.OpConcat, renderer{dtypes: bySize, render: renderConcat})
	register(graph.OpSlice, renderer{dtypes: bySize, render: renderSlice})
	register(graph.OpUnslice, renderer{dtypes: bySize, render: renderUnslice})
	register(graph.OpUnsliceAdd, renderer{dtypes: only32, render: renderUnslice})
	register(graph.OpGather, renderer{dtypes: func(out, in tensor.DType) bool { return movable(out) }, render: renderGather})
	register(graph.OpScatterAdd, renderer{dtypes: func(out, _ tensor.DType) bool { return out == tensor.Float32 }, render: renderScatterAdd})
	register(graph.OpOneHot, renderer{dtypes: func(out, _ tensor.DType) bool { return out == tensor.Float32 }, render: renderOneHot})
	register(graph.OpAssign, renderer{dtypes: bySize, render: renderAssign})
	register(graph.OpCacheWrite, renderer{dtypes: bySize, render: renderCacheWrite})
}

// strides returns shape's row-major strides.
func strides(shape []int) []int {
	s := make([]int, len(shape))
	st := 1
	for d := len(shape) - 1; d >= 0; d-- {
		s[d] = st
		st *= shape[d]
	}
	return s
}

// renderTranspose renders out = x permuted: output axis k is x's axis
// Perm[k].
func renderTranspose(r *req) error {
	it := r.it
	g := it.Move
	n := tensor.Shape(it.Shape).Size()
	size := it.DType.Size()
	xs := strides(g.XShape)
	st := make([]int, len(g.Perm))
	for k, a := range g.Perm {
		st[k] = xs[a]
	}
	b, p, i := r.elementwiseKernel("transpose", 2, n)
	off := b.xOffset(i, it.Shape, st)
	b.moveElem(size, b.offset(p[0], i, size), b.offset(p[1], off, size))
	r.launch(b.kernel(), blocks(n), out(), in(0))
	return nil
}

// renderBroadcastTo renders x broadcast to the output's shape.
func renderBroadcastTo(r *req) error {
	it := r.it
	n := tensor.Shape(it.Shape).Size()
	size := it.DType.Size()
	b, p, i := r.elementwiseKernel("broadcast_to", 2, n)
	off := b.stridedOffsets(i, it.Shape, it.Broadcast.AStrides)[0]
	b.moveElem(size, b.offset(p[0], i, size), b.offset(p[1], off, size))
	r.launch(b.kernel(), blocks(n), out(), in(0))
	return nil
}

// renderAssign renders the copy of a value (in1) into a variable (the
// output, in0's buffer).
func renderAssign(r *req) error {
	it := r.it
	n := tensor.Shape(it.Shape).Size()
	size := it.DType.Size()
	b, p, i := r.elementwiseKernel("assign", 2, n)
	b.moveElem(size, b.offset(p[0], i, size), b.offset(p[1], i, size))
	r.launch(b.kernel(), blocks(n), out(), in(1))
	return nil
}

// renderConcat renders one launch per part: part k [Outer, Inners[k]]
// lands at column offset Σ_{j<k} Inners[j] of the output [Outer, Σ Inners].
func renderConcat(r *req) error {
	it := r.it
	g := it.Move
	size := it.DType.Size()
	total := 0
	for _, w := range g.Inners {
		total += w
	}
	at := 0
	for k, w := range g.Inners {
		n := g.Outer * w
		if n == 0 {
			continue
		}
		// the part's column is the argument's offset: parts of one width
		// share a kernel
		b, p, i := r.elementwiseKernel("concat", 2, n)
		b.note = fmt.Sprintf("concat: a part [%d, %d] of %s into rows of %d", g.Outer, w, it.DType, total)
		o, j := b.divu(i, w), b.remu(i, w)
		dst := b.madu(o, total, j)
		b.moveElem(size, b.offset(p[0], dst, size), b.offset(p[1], i, size))
		r.launch(b.kernel(), blocks(n), out().at(int64(at*size)), in(k))
		at += w
	}
	return nil
}

// renderSlice renders x[Starts:Ends].
func renderSlice(r *req) error {
	it := r.it
	g := it.Move
	n := tensor.Shape(it.Shape).Size()
	size := it.DType.Size()
	xs := strides(g.XShape)
	start := 0
	for d, s := range g.Starts {
		start += s * xs[d]
	}
	// the start is the argument's offset, so every slice of one shape
	// shares a kernel (a recurrence's time steps)
	b, p, i := r.elementwiseKernel("slice", 2, n)
	b.note = fmt.Sprintf("slice %v of %s%v", it.Shape, it.DType, g.XShape)
	off := b.xOffset(i, it.Shape, xs)
	b.moveElem(size, b.offset(p[0], i, size), b.offset(p[1], off, size))
	r.launch(b.kernel(), blocks(n), out(), in(0).at(int64(start*size)))
	return nil
}

// renderUnslice renders zeros with x (in0) at [Starts, Ends) (unslice),
// or acc (in0) with x (in1) added there (unslice_add, float32, in place
// when the output is acc's buffer): the zeros (or acc's copy), then one
// thread per element of x, whose region's start is the argument's offset
// (so the regions of one shape share a kernel).
func renderUnslice(r *req) error {
	it := r.it
	g := it.Move
	n := tensor.Shape(it.Shape).Size()
	size := it.DType.Size()
	add := it.Op == graph.OpUnsliceAdd
	x := in(0)
	if add {
		x = in(1)
		if len(it.In) == 0 || it.Out != it.In[0] {
			r.copyAll(n, size, in(0))
		}
	} else {
		r.fill(n, size)
	}
	region := make([]int, len(it.Shape))
	start := 0
	os := strides(it.Shape)
	for d := range region {
		region[d] = g.Ends[d] - g.Starts[d]
		start += g.Starts[d] * os[d]
	}
	m := tensor.Shape(region).Size()
	if m == 0 {
		return nil
	}
	family := "unslice"
	if add {
		family = "unslice_add"
	}
	b, p, i := r.elementwiseKernel(family, 2, m)
	b.note = fmt.Sprintf("%s: %s%v into rows of %v", family, it.DType, region, it.Shape)
	dst := b.offset(p[0], b.xOffset(i, region, os), size)
	if add {
		v := b.load(tensor.Float32, dst)
		b.store(tensor.Float32, dst, b.addF(v, b.load(tensor.Float32, b.offset(p[1], i, 4))))
	} else {
		b.moveElem(size, dst, b.offset(p[1], i, size))
	}
	r.launch(b.kernel(), blocks(m), out().at(int64(start*size)), x)
	return nil
}

// copyAll appends a launch copying n elements of size bytes from src to
// the output.
func (r *req) copyAll(n, size int, src Arg) {
	if n == 0 {
		return
	}
	b := newBuilder(r.arch, "copy", Block)
	b.note = fmt.Sprintf("copy, %d elements of %d bytes", n, size)
	p := b.paramsN(2)
	i := b.globalIndex()
	b.exitUnless(i, n)
	b.moveElem(size, b.offset(p[0], i, size), b.offset(p[1], i, size))
	r.launch(b.kernel(), blocks(n), out(), src)
}

// renderGather renders rows of params (in0 [V, RowSize]) at int32
// indices (in1): an index outside [0, V) writes zeros and is reported in
// the error record (position: the index's, value: the index).
func renderGather(r *req) error {
	it := r.it
	row := it.Move.RowSize
	n := tensor.Shape(it.Shape).Size()
	size := it.DType.Size()
	if row == 0 || n == 0 {
		return nil
	}
	vocab := r.inLen(0) / row
	b, p, i := r.elementwiseKernel("gather", 4, n)
	k, c := b.divu(i, row), b.remu(i, row)
	idx := b.r32()
	b.ins("ld.global.u32", idx, addr(b.offset(p[2], k, 4), 0))
	bad := b.pred()
	b.ins("setp.ge.u32", bad, idx, u32i(vocab)) // a negative index is a large u32
	dst := b.offset(p[0], i, size)
	ok := b.newLabel()
	b.bra(bad, true, ok)
	b.storeZero(size, dst)
	lead := b.pred()
	b.ins("setp.eq.u32", lead, c, "0")
	b.reportBad(p[3], lead, k, idx)
	b.ins("ret")
	b.label(ok)
	b.moveElem(size, dst, b.offset(p[1], b.madu(idx, row, c), size))
	r.launch(b.kernel(), blocks(n), out(), in(0), in(1), errRecord())
	r.out.Checks = true
	return nil
}

// renderScatterAdd renders zeros [V, RowSize] with each row of rows (in1)
// added at its int32 index (in0): a fill, then one thread per element of
// rows adding with an atomic float32 add (red.global.add), so rows that
// share an index sum in no fixed order. An index outside [0, V) is
// skipped and reported.
func renderScatterAdd(r *req) error {
	it := r.it
	row := it.Move.RowSize
	n := tensor.Shape(it.Shape).Size()
	r.fill(n, 4)
	if row == 0 {
		return nil
	}
	vocab, m := n/row, r.inLen(0)*row
	if m == 0 {
		return nil
	}
	b, p, i := r.elementwiseKernel("scatter_add", 4, m)
	k, c := b.divu(i, row), b.remu(i, row)
	idx := b.r32()
	b.ins("ld.global.u32", idx, addr(b.offset(p[1], k, 4), 0))
	bad := b.pred()
	b.ins("setp.ge.u32", bad, idx, u32i(vocab))
	lead := b.pred()
	b.ins("setp.eq.u32", lead, c, "0")
	b.ins("and.pred", lead, lead, bad)
	b.reportBad(p[3], lead, k, idx)
	b.guarded(bad, false, "ret")
	v := b.load(tensor.Float32, b.offset(p[2], i, 4))
	b.ins("red.global.add.f32", addr(b.offset(p[0], b.madu(idx, row, c), 4), 0), v)
	r.launch(b.kernel(), blocks(m), out(), in(0), in(1), errRecord())
	r.out.Checks = true
	return nil
}

// renderOneHot renders [..., Depth] = (index == j) from int32 indices
// (in0); an index outside [0, Depth) gives a row of zeros, as the host's.
func renderOneHot(r *req) error {
	it := r.it
	depth := it.Move.Depth
	n := tensor.Shape(it.Shape).Size()
	b, p, i := r.elementwiseKernel("one_hot", 2, n)
	k, j := b.divu(i, depth), b.remu(i, depth)
	idx := b.r32()
	b.ins("ld.global.u32", idx, addr(b.offset(p[1], k, 4), 0))
	hit := b.pred()
	b.ins("setp.eq.u32", hit, idx, j)
	b.store(tensor.Float32, b.offset(p[0], i, 4), b.selpF32(f32i(1), f32i(0), hit))
	r.launch(b.kernel(), blocks(n), out(), in(0))
	return nil
}

// fill appends a launch that zeroes the output's n elements of size bytes.
func (r *req) fill(n, size int) {
	if n == 0 {
		return
	}
	b := newBuilder(r.arch, "fill", Block)
	b.note = fmt.Sprintf("zeros, %d elements of %d bytes", n, size)
	p := b.paramsN(1)
	i := b.globalIndex()
	b.exitUnless(i, n)
	b.storeZero(size, b.offset(p[0], i, size))
	r.launch(b.kernel(), blocks(n), out())
}

// renderCacheWrite renders x [B, n, ...] (in1) written over rows [pos,
// pos+n) of the cache [B, L, ...] (in0), pos an int32 read at run time
// (in2): the cache's copy unless the output is its buffer (a write in
// place), then one thread per element of x. A position that does not fit
// writes nothing and is reported (position: pos, value: n). When n is L
// the output is x's own buffer: nothing to do.
func renderCacheWrite(r *req) error {
	it := r.it
	size := it.DType.Size()
	L, n := it.Shape[1], it.Move.XShape[1]
	total := tensor.Shape(it.Shape).Size()
	if len(it.In) > 1 && it.Out == it.In[1] {
		return nil
	}
	if len(it.In) == 0 || it.Out != it.In[0] {
		r.copyAll(total, size, in(0))
	}
	m := tensor.Shape(it.Move.XShape).Size()
	if m == 0 {
		return nil
	}
	row := m / max(1, it.Shape[0]*n) // elements of one position
	b, p, i := r.elementwiseKernel("cache_write", 4, m)
	pos := b.r32()
	b.ins("ld.global.u32", pos, addr(p[2], 0))
	end, bad := b.r32(), b.pred()
	b.ins("add.s32", end, pos, u32i(n))
	b.ins("setp.gt.u32", bad, end, u32i(L)) // a negative position is a large u32
	lead := b.pred()
	b.ins("setp.eq.u32", lead, i, "0")
	b.ins("and.pred", lead, lead, bad)
	b.reportBad(p[3], lead, pos, u32i(n))
	b.guarded(bad, false, "ret")
	per := n * row
	bi, rest := b.divu(i, per), b.remu(i, per)
	dst := b.addu(b.madu(bi, L*row, rest), b.mulu(pos, row))
	b.moveElem(size, b.offset(p[0], dst, size), b.offset(p[1], i, size))
	r.launch(b.kernel(), blocks(m), out(), in(1), in(2), errRecord())
	r.out.Checks = true
	return nil
}
