package kernels

// Products with op(B) packed once (PackB) and read by many products: the
// recurrent kernel of an unrolled recurrence is the second operand of one
// product per step (B = 32 rows each for the reference lstm), and packing
// it for each of them moves as many bytes as the product's
// multiply-adds take in time. PackB lays op(B) out whole in the blocks and
// micro-panels Sgemm's loops read (gemm_pack.go), and SgemmPackedOn runs
// the same loops over it, so the results are Sgemm's bits.
//
// The layout depends on the tier that runs products of n columns and on
// the blocking, both fixed for the process (a test's block override must
// be the same for PackB and the products that read its output):
//
//	block p of KC rows (the last may be shorter): ceil(n/NR) micro-panels
//	[kc][NR], at p·KC·ceil(n/NR)·NR; micro-panel q at q·NR·kc within it.

// PackedBLen returns the floats PackB writes for op(b) of k rows and n
// columns.
func PackedBLen(n, k int) int {
	if sgemmExternal != nil {
		return k * n
	}
	nr := gemmTierFor(n).nr
	return k * ceilDiv(n, nr) * nr
}

// PackB packs op(b) [k, n] into dst (PackedBLen(n, k) floats) for
// SgemmPackedOn and returns dst. b is stored [k, n], or [n, k] when
// transB. It allocates nothing and panics if a length does not match.
func PackB(dst, b []float32, n, k int, transB bool) []float32 {
	if n < 0 || k < 0 {
		panicf("PackB: negative size n=%d k=%d", n, k)
	}
	checkLen("PackB", "b", len(b), k*n)
	checkLen("PackB", "dst", len(dst), PackedBLen(n, k))
	if sgemmExternal != nil {
		copy(dst, b)
		return dst
	}
	c := gemmBlocks(n)
	c.b, c.n, c.k, c.transB = b, n, k, transB
	nr := c.tier.nr
	kcs := blockSize(max(k, 1), c.blk.kc, 1)
	for pc := 0; pc < k; pc += kcs {
		kc := min(kcs, k-pc)
		c.packB(dst[pc*ceilDiv(n, nr)*nr:], pc, kc, 0, n, nr)
	}
	return dst
}

// SgemmPackedOn is SgemmOn with op(b) given packed by PackB (b, transB and
// the sizes as they were for PackB): dst = op(a)·op(b), or dst += with
// accumulate. The bits are SgemmOn's.
func SgemmPackedOn(p *Pool, dst, a, bp []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
	if m < 0 || n < 0 || k < 0 {
		panicf("SgemmPacked: negative size m=%d n=%d k=%d", m, n, k)
	}
	checkLen("SgemmPacked", "a", len(a), m*k)
	checkLen("SgemmPacked", "packed b", len(bp), PackedBLen(n, k))
	checkLen("SgemmPacked", "dst", len(dst), m*n)
	if emptyProduct(dst, m, n, k, accumulate) {
		return dst
	}
	if sgemmExternal != nil {
		sgemmExternal(dst, a, bp, m, n, k, transA, transB, accumulate)
		return dst
	}
	c := gemmBlocks(n)
	c.dst, c.a, c.bPacked = dst, a, bp
	c.m, c.n, c.k = m, n, k
	c.transA, c.transB, c.accumulate = transA, transB, accumulate
	p.run(c)
	return dst
}

// gemmBlocks returns a call with the tier and blocking of products of n
// columns.
func gemmBlocks(n int) gemmCall {
	tier := gemmTierFor(n)
	blk := tier.blk
	if gemmBlockOverride != nil {
		blk = *gemmBlockOverride
	}
	return gemmCall{tier: tier, blk: blk}
}
