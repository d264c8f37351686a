package main

import "fmt"

// An encoder for the register-register form of the EVEX-encoded AVX-512
// instructions that neither Go's assembler (Go 1.26) nor avo v0.5.0 knows,
// so that the generator can emit them as raw bytes (BYTE directives).
//
// Layout (Intel SDM Vol. 2A, §2.7.1 "Instruction Format and EVEX"), for
// "OP zmm(dst), zmm(src1), zmm(src2)" in Intel operand order, i.e.
// "OP src2, src1, dst" in Go's and AT&T's:
//
//	62 P0 P1 P2 opcode ModRM
//
//	P0 = R̄ X̄ B̄ R̄' 0 m m m  R̄, R̄': bits 3 and 4 of dst (ModRM.reg), inverted;
//	                        B̄, X̄: bits 3 and 4 of src2 (ModRM.rm; in the
//	                        register form X extends rm), inverted;
//	                        mmm: opcode map (1: 0F, 2: 0F38, 3: 0F3A)
//	P1 = W v̄ v̄ v̄ v̄ 1 p p    vvvv: bits 0-3 of src1, inverted;
//	                        pp: implied prefix (0: none, 1: 66, 2: F3, 3: F2)
//	P2 = z L'L b V̄' a a a   z=0 (merge), L'L=10 (512 bits), b=0 (no
//	                        broadcast or rounding), V̄': bit 4 of src1,
//	                        inverted; aaa=000 (no write mask)
//	ModRM = 11 reg rm       mod=11: register operands; reg: bits 0-2 of
//	                        dst; rm: bits 0-2 of src2
//
// The reference encodings in evex_test.go come from GNU as and objdump.

// evexOp is one EVEX instruction: its opcode byte and the fields that fix it.
type evexOp struct {
	name   string
	opcode byte
	pp     byte // implied prefix: 0 none, 1 66, 2 F3, 3 F2
	mmm    byte // opcode map: 1 0F, 2 0F38, 3 0F3A
	w      byte // EVEX.W
}

// vdpbf16ps is VDPBF16PS zmm1, zmm2, zmm3/m512/m32bcst: EVEX.512.F3.0F38.W0
// 52 /r (Intel SDM Vol. 2C, "VDPBF16PS: Dot Product of BF16 Pairs
// Accumulated Into Packed Single Precision"). For each 32-bit lane i,
//
//	zmm1.fp32[i] += zmm2.bf16[2i+1]·zmm3.bf16[2i+1] + zmm2.bf16[2i]·zmm3.bf16[2i]
//
// as two fused multiply-adds (odd pair first), rounding to nearest even,
// with denormal inputs treated as zero and denormal results flushed to zero
// whatever MXCSR says.
var vdpbf16ps = evexOp{name: "VDPBF16PS", opcode: 0x52, pp: 2, mmm: 2, w: 0}

// encode512 returns the six bytes of op with 512-bit registers zmm(dst),
// zmm(src1), zmm(src2) (Intel operand order), no mask, no broadcast.
func (op evexOp) encode512(dst, src1, src2 int) [6]byte {
	for _, r := range []int{dst, src1, src2} {
		if r < 0 || r > 31 {
			panic(fmt.Sprintf("%s: register zmm%d out of range", op.name, r))
		}
	}
	inv := func(r, bit int) byte { return byte(^r>>bit) & 1 }
	p0 := inv(dst, 3)<<7 | inv(src2, 4)<<6 | inv(src2, 3)<<5 | inv(dst, 4)<<4 | op.mmm&7
	p1 := op.w<<7 | byte(^src1&15)<<3 | 1<<2 | op.pp&3
	p2 := byte(0b10)<<5 | inv(src1, 4)<<3
	modrm := byte(0b11)<<6 | byte(dst&7)<<3 | byte(src2&7)
	return [6]byte{0x62, p0, p1, p2, op.opcode, modrm}
}
