package cpu

import (
	"slices"
	"unsafe"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// Weights packed once for many products (kernels.PackB).
//
// An unrolled recurrence multiplies the same recurrent kernel by each
// step's state: 127 products of 32 rows for the reference lstm's forward
// pass, and as many by its transpose for the states' gradients. Each
// product packed the kernel again (1 MiB for the lstm), which moves as
// many bytes as its multiply-adds take in time. Here the float32 products
// that read one buffer as op(b) with the same shape and transpose form a
// group while no instruction between them writes that buffer. The first
// product of a group in each run packs op(b) into the engine's persistent
// scratch, and every product of the group reads that packing. The bits
// are the packed product's (the same loops, over the same blocks), so
// runs under the rule keep them.
//
// Groups whose lifetimes do not overlap share the packing area (first
// fit), which Target.Scratch adds to the products' packing buffers: it is
// on the ledger and in the plan. A forced product algorithm (packed1,
// tiles, tiles1) turns grouping off, so that what is forced is what runs;
// the area stays reserved, so that plans do not depend on the choice.

// minPackGroup is the least number of products worth a packing of their
// own: below it, packing per product costs no more than keeping one.
const minPackGroup = 8

// packGroup is the products that share one packing of op(b).
type packGroup struct {
	buf     int // the buffer read as b
	transB  bool
	n, k    int
	members []int // instruction indices, in order
	off     int   // floats into the packing area
}

func (g *packGroup) floats() int { return alignFloats(kernels.PackedBLen(g.n, g.k)) }

// alignFloats rounds n floats up to a 64-byte multiple.
func alignFloats(n int) int { return (n + 15) &^ 15 }

// packable reports whether it is a float32 product read by b as one 2-D
// matrix, and returns its rows.
func packable(it *compile.Instr) (m int, ok bool) {
	g := it.MatMul
	if it.Op != graph.OpMatMul || it.DType != tensor.Float32 || g == nil || g.BF16 || len(it.In) != 2 {
		return 0, false
	}
	switch {
	case g.SharedB && !g.TransA:
		return g.M * g.Batch, true // one product over the batch (see matmul)
	case g.Batch == 1:
		return g.M, true
	}
	return 0, false
}

// packGroups finds the groups of instrs and places their packings in one
// area; it returns them and the area's floats.
func packGroups(instrs []compile.Instr) ([]*packGroup, int) {
	type key struct {
		buf    int
		transB bool
		n, k   int
	}
	open := map[key]*packGroup{}
	var all []*packGroup
	closeBuf := func(buf int) {
		for k := range open {
			if buf < 0 || k.buf == buf {
				delete(open, k)
			}
		}
	}
	for i := range instrs {
		it := &instrs[i]
		if _, ok := packable(it); ok {
			g := it.MatMul
			k := key{it.In[1], g.TransB, g.N, g.K}
			grp := open[k]
			if grp == nil {
				grp = &packGroup{buf: k.buf, transB: k.transB, n: k.n, k: k.k}
				open[k] = grp
				all = append(all, grp)
			}
			grp.members = append(grp.members, i)
		}
		// a write to b ends its groups: later products pack it again
		if it.Op.Started() || it.Op.WaitsFor() != graph.OpInvalid {
			closeBuf(-1)
		}
		closeBuf(it.Out)
		for _, p := range it.Parts {
			if p >= 0 {
				closeBuf(p)
			}
		}
	}
	var groups []*packGroup
	for _, g := range all {
		if len(g.members) >= minPackGroup {
			groups = append(groups, g)
		}
	}
	// first fit: a group takes the lowest offset clear of every placed
	// group whose products overlap its own in time
	total := 0
	for i, g := range groups {
		size, lo, hi := g.floats(), g.members[0], g.members[len(g.members)-1]
		var taken [][2]int
		for _, h := range groups[:i] {
			if h.members[0] <= hi && lo <= h.members[len(h.members)-1] {
				taken = append(taken, [2]int{h.off, h.off + h.floats()})
			}
		}
		slices.SortFunc(taken, func(a, b [2]int) int { return a[0] - b[0] })
		off := 0
		for _, t := range taken {
			if off+size <= t[0] {
				break
			}
			off = max(off, t[1])
		}
		g.off = off
		total = max(total, off+size)
	}
	return groups, total
}

// packedBytes returns the bytes of packing area instrs need (with room to
// align it). It is reserved under every choice, so that the plan does not
// depend on the choice (a forced algorithm leaves it unused).
func packedBytes(instrs []compile.Instr) int64 {
	_, floats := packGroups(instrs)
	if floats == 0 {
		return 0
	}
	return int64(floats)*4 + 64
}

// packing reports whether products share packings under choices c.
func packing(c *Choices) bool { return c == nil || c.forceMM == kernels.MatMulPacked }

// bindPacked rebinds the products of each group over area (the packing
// area's bytes): the first packs op(b), every one reads the packing.
func bindPacked(bound []Bound, groups []*packGroup, area []byte) {
	if len(groups) == 0 {
		return
	}
	off := 0
	for uintptr(unsafe.Pointer(unsafe.SliceData(area[off:])))%64 != 0 {
		off++
	}
	floats := unsafe.Slice((*float32)(unsafe.Pointer(&area[off])), (len(area)-off)/4)
	for _, g := range groups {
		packed := floats[g.off : g.off+kernels.PackedBLen(g.n, g.k)]
		for j, i := range g.members {
			b := &bound[i]
			m, _ := packable(b.Instr)
			dst, x, y := tensor.As[float32](b.out), tensor.As[float32](b.in[0]), tensor.As[float32](b.in[1])
			n, k, transA, transB, pool := g.n, g.k, b.MatMul.TransA, g.transB, b.pool
			if j == 0 {
				b.run = func() error {
					kernels.PackB(packed, y, n, k, transB)
					kernels.SgemmPackedOn(pool, dst, x, packed, m, n, k, transA, transB, false)
					return nil
				}
			} else {
				b.run = func() error {
					kernels.SgemmPackedOn(pool, dst, x, packed, m, n, k, transA, transB, false)
					return nil
				}
			}
			b.prepacked, b.mmAlgo = true, nil
		}
	}
}
