package kernels

import "github.com/headroom-ml/headroom/tensor"

// MatMulBF16: the matrix product of the mixed-precision policy, with
// bfloat16 operands and float32 accumulation ("bf16 compute, f32
// accumulate", as oneDNN's bf16 matmul and JAX's default precision on TPUs).
//
// Numerics. Each element of op(A) and op(B) is rounded to bfloat16 as it is
// packed, bit for bit as tensor.ToBFloat16 (round to nearest even; a NaN
// stays NaN and is made quiet; ±Inf stay; subnormals are rounded, not
// flushed). The product of two bfloat16s is exact in float32 (8-bit
// significands), and products are summed in float32. So the result is
// Sgemm's on the rounded operands, up to the order of the sums.
//
// Layout (AVX512_BF16 path). VDPBF16PS multiplies the two bfloat16s of a
// 32-bit lane by those of another lane and adds both to a float32 lane, so
// the packed panels hold consecutive k in pairs (oneDNN's "VNNI" layout for
// bf16 weights; Intel SDM Vol. 2C, VDPBF16PS):
//
//	A micro-panel: [ceil(kc/2)][MR] uint32, lane i of pair p = (a[i][2p], a[i][2p+1])
//	B micro-panel: [ceil(kc/2)][NR] uint32, lane j of pair p = (b[2p][j], b[2p+1][j])
//
// low half first. An odd kc leaves the high half of the last pair zero in
// both operands. Packing rounds and pairs in one pass over the operands, in
// place, for every transpose variant (internal/genbf16).
//
// Tile and blocking. The micro-kernel is a 12×32 tile of float32
// accumulators in 24 zmm registers (2 for the pair of B vectors, 6 rotating
// broadcasts of A pairs), as Sgemm's AVX-512 tile, each instruction now doing
// 32 multiply-adds instead of 16; a 12×16 tile serves products at most 16
// columns wide. The loops are Sgemm's (gemm.go: GotoBLAS/BLIS's five loops,
// regions of C per thread on the same Pool and packing buffers): the
// product runs as an Sgemm whose tier packs pairs and whose micro-kernel is
// VDPBF16PS. Cache blocks count elements of k (bgemmKC, bgemmMC, bgemmNC):
// a bfloat16 element takes 2 bytes, so the A micro-panel (12·KC·2 bytes),
// B block (KC·NC·2) and A panel (MC·KC·2) are half the size in bytes of
// Sgemm's with the same counts, which lets KC double for the same cache
// footprint (fewer passes over C). The panels sit in the float32 packing
// buffers at Sgemm's offsets (an A micro-panel of kc steps at 12·kc floats),
// each using its first half.
//
// Fallback. Without AVX512_BF16 (or in a purego build) the same loops run
// the active float32 tier's micro-kernel on panels packed by its own
// routines and then rounded to bfloat16 in place: the same numerics.
//
// The two paths differ where VDPBF16PS differs from a float32 FMA: it adds
// the two products of a pair to the accumulator in its own order (odd k
// first), treats subnormal bfloat16 inputs as zero and flushes subnormal
// sums to zero (Intel SDM; so on Zen 4, TestMatMulBF16Subnormals). So the
// two paths agree within float32 summation error, not bit for bit, and an
// operand or partial sum below 2^-126 (1.2e-38) in magnitude counts as zero
// on the AVX512_BF16 path only. The fallback is Sgemm of the rounded
// operands bit for bit (TestMatMulBF16FallbackIsSgemm).
//
// Determinism: like Sgemm, the split over threads never splits a sum, so
// results are bit-identical for any thread count on one path.

// MatMulBF16On sets dst = op(a)·op(b), or adds it to dst when accumulate
// is set, with every element of a and b rounded to bfloat16 and the
// products summed in float32, on pool p, and returns dst:
//
//	dst:   [m, n]
//	op(a): [m, k]; a is stored [m, k] row-major, or [k, m] when transA
//	op(b): [k, n]; b is stored [k, n], or [n, k] when transB
//
// a and b are read in place and not changed. dst must not overlap a or b. It
// runs on p's threads and packing memory as SgemmOn does, and allocates
// nothing after the first call. It uses
// AVX512_BF16 where the CPU has it, else a portable path with the same
// numerics (see the file comment for the one exception: subnormals). It
// panics if a size is negative or a length does not match.
func MatMulBF16On(p *Pool, dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
	checkMatMul("MatMulBF16", len(dst), len(a), len(b), m, n, k)
	if emptyProduct(dst, m, n, k, accumulate) {
		return dst
	}
	tier := bgemmTier(n)
	blk := tier.blk
	if gemmBlockOverride != nil {
		blk = *gemmBlockOverride
	}
	p.run(gemmCall{
		tier: tier, blk: blk,
		dst: dst, a: a, b: b, m: m, n: n, k: k,
		transA: transA, transB: transB, accumulate: accumulate,
	})
	return dst
}

// Cache blocks of the AVX512_BF16 tier, in elements (see the file comment),
// within the float32 packing buffers (KC·MC <= gemmKC·gemmMC, KC·NC <=
// gemmKC·gemmNC; TestBgemmTierBlocking). With MR=12, NR=32:
//   - the A micro-panel, 12·KC·2 = 24 KiB, stays in L1 (32 KiB), as
//     Sgemm's does;
//   - the B block, KC·NC·2 = 384 KiB, stays in L2 (1 MiB);
//   - the A panel, MC·KC·2 = 1 MiB, stays in L3;
//   - k <= 1024 (every layer of the reference mlp) is one K block, so C is
//     written once.
//
// On the Zen 4 of issue 4 (one thread; 1024³, 2048³ and the mlp shapes of
// BenchmarkSgemm) the speed is flat within 2-3% over (KC, MC, NC) in
// (1024, 504, 192), (1024, 348, 192), (768, 672, 256), (512, 1020, 384),
// (384, 1356, 512), (256, 1020, 768): about 90% of the micro-kernel's
// speed, the rest being packing and the passes over C.
const (
	bgemmKC = 1024
	bgemmMC = 504
	bgemmNC = 192
)

// bgemmUseAsm routes MatMulBF16 to bgemmAsm where there is one; tests turn
// it off to run the fallback.
var bgemmUseAsm = bgemmAsm != nil

// bgemmTier returns the tier MatMulBF16 runs a product n columns wide on.
func bgemmTier(n int) gemmTier {
	var t gemmTier
	if bgemmUseAsm && bgemmAsm != nil {
		t = *bgemmAsm
	} else {
		t = bgemmFallback(gemmActive.name)
	}
	if t.narrow != nil && n <= t.narrow.nr {
		t = *t.narrow
	}
	return t
}

// bgemmFallbacks are gemmTiers with packing that rounds to bfloat16: the
// fallback of MatMulBF16 on each float32 tier.
var bgemmFallbacks = func() []gemmTier {
	var ts []gemmTier
	for _, t := range gemmTiers {
		ts = append(ts, roundingTier(t))
	}
	return ts
}()

// bgemmFallback returns the rounding version of the float32 tier named name.
func bgemmFallback(name string) gemmTier {
	for _, t := range bgemmFallbacks {
		if t.name == name {
			return t
		}
	}
	panic("kernels: no bfloat16 fallback for gemm tier " + name)
}

// roundingTier returns t (and its narrow tier) with packing routines that
// pack as t's do, then round the micro-panel to bfloat16 in place. The
// micro-kernel, tile and blocks are t's.
func roundingTier(t gemmTier) gemmTier {
	r := t
	r.gatherA = roundAfter(t.gatherA, t.mr, gatherRows)
	r.scatterA = roundAfter(t.scatterA, t.mr, scatterRows)
	r.gatherB = roundAfter(t.gatherB, t.nr, gatherRows)
	r.scatterB = roundAfter(t.scatterB, t.nr, scatterRows)
	if t.narrow != nil {
		n := roundingTier(*t.narrow)
		r.narrow = &n
	}
	return r
}

// roundAfter returns a packing routine for micro-panels of width w that
// packs with pack (or, when it is nil, with the Go loop goPack) and rounds
// the kc·w packed elements to bfloat16.
func roundAfter(pack func(d, src []float32, ld, kc, valid int), w int,
	goPack func(d []float32, w int, src []float32, ld, kc, valid int)) func(d, src []float32, ld, kc, valid int) {
	return func(d, src []float32, ld, kc, valid int) {
		if pack != nil {
			pack(d, src, ld, kc, valid)
		} else {
			goPack(d, w, src, ld, kc, valid)
		}
		roundBF16s(d[:kc*w])
	}
}

// roundBF16s rounds every element of x to bfloat16 (tensor.ToBFloat16) and
// widens it back to float32, in place.
func roundBF16s(x []float32) {
	for i, v := range x {
		x[i] = tensor.ToBFloat16(v).Float32()
	}
}
