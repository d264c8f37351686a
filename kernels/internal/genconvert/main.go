// Command genconvert writes kernels/convert_amd64.s and its Go
// declarations: the float32 <-> float16 and float32 <-> bfloat16 casts of
// mixed precision, with avo (github.com/mmcloughlin/avo), in two tiers:
//
//   - x8 (AVX2 + F16C, ymm): eight elements a vector, four vectors (32
//     elements) a loop iteration.
//   - x16 (AVX-512F, and AVX-512BW for the bfloat16 pack; zmm): sixteen
//     elements a vector, four vectors (64 elements) a loop iteration.
//
// float16 uses the F16C conversions (VCVTPS2PH with imm8 = 0: round to
// nearest even from the immediate, not MXCSR; VCVTPH2PS, exact). bfloat16
// is integer work, the vector form of tensor.ToBFloat16: widening puts the
// 16 bits in the high half of a 32-bit lane (zero-extend, shift left 16);
// narrowing adds 0x7fff plus the lowest kept bit and shifts right 16
// (round to nearest even), replaces NaN lanes by the truncated bits with
// the 0x0040 quiet bit set, and packs the 32-bit lanes to 16 bits
// (VPACKUSDW, which never saturates as every value is below 0x10000, then
// VPERMQ to undo its per-128-bit-lane order).
// VCVTNEPS2BF16 is not used: it flushes subnormal inputs to zero, which
// tensor.ToBFloat16 does not.
//
// The Go side (convert_amd64.go) calls them for the whole blocks and
// finishes the tail in Go.
//
//	go run ./internal/genconvert -out convert_amd64.s -stubs convert_stub_amd64.go -pkg kernels
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// unroll is the number of vectors per loop iteration.
const unroll = 4

// tier describes one vector width.
type tier struct {
	suffix string                // x8 or x16
	lanes  int                   // float32 lanes per vector
	vec    func() reg.VecVirtual // a fresh vector register
}

var (
	ymm = tier{"x8", 8, YMM}
	zmm = tier{"x16", 16, ZMM}
)

func main() {
	ConstraintExpr("!purego")
	for _, t := range []tier{ymm, zmm} {
		f32ToF16(t)
		f16ToF32(t)
		bf16ToF32(t)
	}
	f32ToBF16x8()
	f32ToBF16x16()
	Generate()
}

// block is the element count of one loop iteration.
func (t tier) block() int { return t.lanes * unroll }

// header declares fn(dst *D, src *S, n int) and loads its arguments.
func header(t tier, name, dstT, srcT, what string) (dst, src, n reg.Register) {
	TEXT(name, NOSPLIT, fmt.Sprintf("func(dst *%s, src *%s, n int)", dstT, srcT))
	Doc(fmt.Sprintf("%s sets dst[i] = %s for i < n; n is a multiple of %d.", name, what, t.block()))
	return Load(Param("dst"), GP64()), Load(Param("src"), GP64()), Load(Param("n"), GP64())
}

// f32ToF16: VCVTPS2PH, round to nearest even (imm8 = 0).
func f32ToF16(t tier) {
	dst, src, n := header(t, "f32ToF16"+t.suffix, "uint16", "float32", "float16(src[i]) (round to nearest even)")
	loop(t, n, func(u int) {
		v := t.vec()
		VMOVUPS(Mem{Base: src, Disp: 4 * t.lanes * u}, v)
		VCVTPS2PH(U8(0), v, Mem{Base: dst, Disp: 2 * t.lanes * u})
	}, step{dst, 2}, step{src, 4})
	VZEROUPPER()
	RET()
}

// f16ToF32: VCVTPH2PS, exact.
func f16ToF32(t tier) {
	dst, src, n := header(t, "f16ToF32"+t.suffix, "float32", "uint16", "float32(src[i]) (exact)")
	loop(t, n, func(u int) {
		v := t.vec()
		VCVTPH2PS(Mem{Base: src, Disp: 2 * t.lanes * u}, v)
		VMOVUPS(v, Mem{Base: dst, Disp: 4 * t.lanes * u})
	}, step{dst, 4}, step{src, 2})
	VZEROUPPER()
	RET()
}

// bf16ToF32: zero-extend each 16-bit value into a 32-bit lane, shift it to
// the high half.
func bf16ToF32(t tier) {
	dst, src, n := header(t, "bf16ToF32"+t.suffix, "float32", "uint16", "float32 with src[i] as its high 16 bits (exact)")
	loop(t, n, func(u int) {
		v := t.vec()
		VPMOVZXWD(Mem{Base: src, Disp: 2 * t.lanes * u}, v)
		VPSLLD(U8(16), v, v)
		VMOVUPS(v, Mem{Base: dst, Disp: 4 * t.lanes * u})
	}, step{dst, 4}, step{src, 2})
	VZEROUPPER()
	RET()
}

// broadcast32 returns a ymm holding c in every 32-bit lane (AVX2 has no
// broadcast from a general register).
func broadcast32(c uint32) reg.VecVirtual {
	r, x, y := GP32(), XMM(), YMM()
	MOVL(U32(c), r)
	VMOVD(r, x)
	VPBROADCASTD(x, y)
	return y
}

// f32ToBF16x8: the AVX2 narrowing. Per ymm u of eight float32 bit
// patterns:
//
//	t = u >> 16
//	r = (u + 0x7fff + (t & 1)) >> 16          round to nearest even
//	r = (u & 0x7fffffff) > 0x7f800000 ? t | 0x0040 : r   NaN stays quiet NaN
//
// then two such vectors pack to sixteen 16-bit values: VPACKUSDW works per
// 128-bit lane (values are below 0x10000, so it never saturates) and leaves
// the quadwords in the order a0-3 b0-3 a4-7 b4-7; VPERMQ $0xd8 puts them
// back as a0-7 b0-7.
func f32ToBF16x8() {
	t := ymm
	dst, src, n := header(t, "f32ToBF16x8", "uint16", "float32", "bfloat16(src[i]) (round to nearest even, NaN kept quiet)")
	one, bias, abs, inf, quiet := broadcast32(1), broadcast32(0x7fff), broadcast32(0x7fffffff), broadcast32(0x7f800000), broadcast32(0x0040)
	narrow := func(off int) reg.VecVirtual {
		u, sh, r, m := YMM(), YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: src, Disp: off}, u)
		VPSRLD(U8(16), u, sh)
		VPAND(one, sh, r)
		VPADDD(bias, r, r)
		VPADDD(u, r, r)
		VPSRLD(U8(16), r, r)
		VPAND(abs, u, m)
		VPCMPGTD(inf, m, m) // m = |u| > Inf as int32: NaN
		VPOR(quiet, sh, sh)
		VPBLENDVB(m, sh, r, r) // r = m ? sh : r
		return r
	}
	loop(t, n, func(u int) {
		if u%2 == 1 {
			return
		}
		a := narrow(32 * u)
		b := narrow(32 * (u + 1))
		VPACKUSDW(b, a, a)
		VPERMQ(U8(0xd8), a, a)
		VMOVDQU(a, Mem{Base: dst, Disp: 16 * u})
	}, step{dst, 2}, step{src, 4})
	VZEROUPPER()
	RET()
}

// f32ToBF16x16: the AVX-512 narrowing, as f32ToBF16x8 with a mask register
// for the NaN lanes. The pack is VPACKUSDW + VPERMQ (by an index vector)
// over pairs of vectors rather than VPMOVDW: VPMOVDW to memory measured
// 0.13-0.15 ns an element on Zen 4 against 0.09 for this (and for x8).
func f32ToBF16x16() {
	t := zmm
	dst, src, n := header(t, "f32ToBF16x16", "uint16", "float32", "bfloat16(src[i]) (round to nearest even, NaN kept quiet)")
	bcast := func(c uint32) reg.VecVirtual {
		r, z := GP32(), ZMM()
		MOVL(U32(c), r)
		VPBROADCASTD(r, z)
		return z
	}
	one, bias, abs, inf, quiet := bcast(1), bcast(0x7fff), bcast(0x7fffffff), bcast(0x7f800000), bcast(0x0040)
	// VPACKUSDW (AVX-512BW) packs per 128-bit lane, leaving the quadwords
	// as a0-3 b0-3 a4-7 b4-7 a8-11 b8-11 a12-15 b12-15; VPERMQ by the index
	// vector 0 2 4 6 1 3 5 7 puts them back in order.
	idxMem := GLOBL("bf16PackOrder", RODATA|NOPTR)
	for i, q := range []uint64{0, 2, 4, 6, 1, 3, 5, 7} {
		DATA(8*i, U64(q))
	}
	idx := ZMM()
	VMOVDQU64(idxMem, idx)
	narrow := func(off int) reg.VecVirtual {
		u, sh, r, m := ZMM(), ZMM(), ZMM(), ZMM()
		k := K()
		VMOVDQU32(Mem{Base: src, Disp: off}, u)
		VPSRLD(U8(16), u, sh)
		VPANDD(one, sh, r)
		VPADDD(bias, r, r)
		VPADDD(u, r, r)
		VPSRLD(U8(16), r, r)
		VPANDD(abs, u, m)
		VPCMPGTD(inf, m, k)    // k = NaN lanes
		VPORD(quiet, sh, k, r) // r = sh | 0x0040 in the NaN lanes
		return r
	}
	loop(t, n, func(i int) {
		if i%2 == 1 {
			return
		}
		a := narrow(64 * i)
		b := narrow(64 * (i + 1))
		VPACKUSDW(b, a, a)
		VPERMQ(a, idx, a)
		VMOVDQU64(a, Mem{Base: dst, Disp: 32 * i})
	}, step{dst, 2}, step{src, 4})
	VZEROUPPER()
	RET()
}

// step is a pointer the loop advances and the byte size of its elements.
type step struct {
	p    reg.Register
	size int
}

// loop runs body(u) for u < unroll over n elements (a multiple of the
// tier's block), then advances each pointer by a block of its elements.
func loop(t tier, n reg.Register, body func(u int), ptrs ...step) {
	Label("loop")
	CMPQ(n, Imm(0))
	JE(LabelRef("done"))
	for u := 0; u < unroll; u++ {
		body(u)
	}
	for _, s := range ptrs {
		ADDQ(U32(t.block()*s.size), s.p)
	}
	SUBQ(U32(t.block()), n)
	JMP(LabelRef("loop"))
	Label("done")
}
