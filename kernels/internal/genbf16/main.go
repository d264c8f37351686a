// Command genbf16 writes kernels/bgemm_amd64.s and its Go declarations: the
// bfloat16 GEMM of package kernels (MatMulBF16) for CPUs with AVX512_BF16,
// in Go assembly, with avo (github.com/mmcloughlin/avo).
//
// Run it through go generate in package kernels (see bgemm_amd64.go):
//
//	go run ./internal/genbf16 -out bgemm_amd64.s -stubs bgemm_stub_amd64.go -pkg kernels
//
// Micro-kernels. VDPBF16PS (evex.go) multiplies the two bfloat16s of each
// 32-bit lane of one register by those of another and adds both products to
// the float32 lane of the accumulator, so the packed panels hold pairs of
// consecutive k (a "K-pair" or VNNI layout, as oneDNN's bf16 brgemm packs B,
// and AMD's LPGEMM in BLIS's aocl_gemm addon reorders B for its 6×64
// bf16bf16f32of32 kernels on Zen 4, kernels/zen4/lpgemm/bf16bf16f32):
//
//	a: [ceil(k/2)][MR] uint32   lane i of pair p: a[i][2p] (low half), a[i][2p+1] (high half)
//	b: [ceil(k/2)][NR] uint32   lane j of pair p: b[2p][j] (low half), b[2p+1][j] (high half)
//	c: MR rows of NR float32, row stride ldc elements
//	C = A·B (load false) or C += A·B (load true)
//
// Per pair the kernel loads NR/16 vectors of B, broadcasts each of the MR
// lanes of A (VPBROADCASTD) and issues MR·NR/16 VDPBF16PS: the shape of the
// float32 kernels of internal/gen with twice the work per instruction. The
// 12×32 tile has 24 zmm accumulators, 2 for B and 6 rotating broadcasts (all
// 32 registers): 24 independent chains of VDPBF16PS, more than its latency
// times its throughput on current cores, against 2 vector loads and 12
// broadcasts per pair. On Zen 4 it runs at about 230 GFLOP/s per core with
// its panels in L1/L2 (BenchmarkBgemmMicroKernel), twice the float32
// kernel. (AOCL's 6×64 tile has as many accumulators; 12×32 is the tile
// Sgemm's scratch tile and blocking already fit.) A 12×16 tile serves
// products at most 16 columns wide.
//
// Packing. The routines read float32 operands in place, round each element
// to bfloat16 with integer operations, bit for bit as tensor.ToBFloat16
// (round to nearest even; NaN stays NaN, made quiet; subnormals kept), and
// pair them:
//   - bgemmPackPairs{32,16,12}: the w elements of a step are contiguous in
//     the source (op(B) not transposed, op(A) transposed): two source rows
//     make one pair row, interleaved with VPERMT2W;
//   - bgemmPackPairsTrans: the k elements are contiguous (op(A) not
//     transposed, op(B) transposed): 32 k of each of 16 rows are rounded,
//     packed into 16 pairs (VPERMT2W) and transposed as a 16×16 matrix of
//     32-bit pairs (the shuffles of internal/gen's packTrans).
//
// Rows or columns beyond the valid ones and the missing half of the last pair
// when k is odd are zero in both operands, so padding never meets an Inf.
package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("!purego")
	permTables()
	kernel(12, 2)
	kernel(12, 1)
	packPairs(32)
	packPairs(16)
	packPairs(12)
	packPairsTrans()
	Generate()
}

var zregs = []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7,
	reg.Z8, reg.Z9, reg.Z10, reg.Z11, reg.Z12, reg.Z13, reg.Z14, reg.Z15,
	reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23,
	reg.Z24, reg.Z25, reg.Z26, reg.Z27, reg.Z28, reg.Z29, reg.Z30, reg.Z31}

// Word permutations for VPERMT2W (index t < 32 picks word t of the first
// table, 32 + t word t of the second):
//   - permOdd picks the high words (bfloat16s) of 32 consecutive rounded
//     float32s, 16 from each table: 16 pairs of consecutive elements;
//   - permInterleave picks the high word of lane q of the first table (even
//     k) then that of the second (odd k): lane q becomes a pair.
var permOdd, permInterleave Mem

func permTables() {
	permOdd = GLOBL("bgemmPermOdd", RODATA|NOPTR)
	for t := 0; t < 32; t++ {
		DATA(2*t, U16(2*t+1))
	}
	permInterleave = GLOBL("bgemmPermInterleave", RODATA|NOPTR)
	for q := 0; q < 16; q++ {
		DATA(4*q, U16(2*q+1))
		DATA(4*q+2, U16(32+2*q+1))
	}
}

// dot emits VDPBF16PS zmm(acc), zmm(src1), zmm(src2) as one line of BYTE
// directives followed by the instruction in Go's operand order as a comment.
// avo prints an instruction without operands as its opcode, verbatim, so
// the line goes in as the opcode of an operand-less instruction; it names no
// register, which is fine here, where every register is physical and
// nothing is allocated.
func dot(acc, src1, src2 int) {
	var line strings.Builder
	for i, b := range vdpbf16ps.encode512(acc, src1, src2) {
		if i > 0 {
			line.WriteString("; ")
		}
		fmt.Fprintf(&line, "BYTE $0x%02x", b)
	}
	fmt.Fprintf(&line, " // VDPBF16PS Z%d, Z%d, Z%d", src2, src1, acc)
	Instruction(&ir.Instruction{Opcode: line.String()})
}

// kernel writes bgemmKernel{mr}x{16·nv}: the mr×(16·nv) tile from kp pairs.
func kernel(mr, nv int) {
	const unroll = 4
	nr := 16 * nv
	name := fmt.Sprintf("bgemmKernel%dx%d", mr, nr)
	nacc := mr * nv
	nbc := min(6, 32-nacc-nv)
	if nbc < 2 {
		panic(name + ": too few registers for broadcasts")
	}
	acc := func(i, v int) int { return i*nv + v }
	bv := func(v int) int { return nacc + v }
	bc := func(i int) int { return nacc + nv + i%nbc }

	TEXT(name, NOSPLIT, "func(kp int, a, b *uint32, c *float32, ldc int, load bool)")
	Doc(fmt.Sprintf("%s sets the %d×%d float32 tile c (row stride ldc) to a·b, or adds", name, mr, nr),
		fmt.Sprintf("a·b to it when load is set, for a packed [kp][%d] and b packed [kp][%d] in", mr, nr),
		"pairs of bfloat16 (lane low half: even k, high half: odd k); kp >= 1.")
	Comment("Requires AVX512_BF16 too: VDPBF16PS, emitted as bytes, which avo cannot see.")
	kp, pa, pb, pc, ldc := reg.RCX, reg.RAX, reg.RBX, reg.RDI, reg.RSI
	Load(Param("kp"), kp)
	Load(Param("a"), pa)
	Load(Param("b"), pb)
	Load(Param("c"), pc)
	Load(Param("ldc"), ldc)
	SHLQ(U8(2), ldc)

	Comment("Zero the accumulators and prefetch the rows of c.")
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			z := zregs[acc(i, v)]
			VPXORD(z, z, z)
		}
	}
	row := reg.R8
	MOVQ(pc, row)
	for i := 0; i < mr; i++ {
		PREFETCHT0(Mem{Base: row})
		if nr*4 > 64 {
			PREFETCHT0(Mem{Base: row, Disp: nr*4 - 4})
		}
		if i < mr-1 {
			ADDQ(ldc, row)
		}
	}

	step := func(u int) {
		for v := 0; v < nv; v++ {
			VMOVDQU32(Mem{Base: pb, Disp: u*nr*4 + v*64}, zregs[bv(v)])
		}
		for i := 0; i < mr; i++ {
			VPBROADCASTD(Mem{Base: pa, Disp: (u*mr + i) * 4}, zregs[bc(i)])
			for v := 0; v < nv; v++ {
				dot(acc(i, v), bv(v), bc(i))
			}
		}
	}

	n4 := reg.RDX
	MOVQ(kp, n4)
	SHRQ(U8(2), n4)
	ANDQ(U32(unroll-1), kp)
	TESTQ(n4, n4)
	JZ(LabelRef(name + "_tail"))
	Label(name + "_loop")
	for u := 0; u < unroll; u++ {
		step(u)
	}
	ADDQ(U32(unroll*mr*4), pa)
	ADDQ(U32(unroll*nr*4), pb)
	DECQ(n4)
	JNZ(LabelRef(name + "_loop"))

	Label(name + "_tail")
	TESTQ(kp, kp)
	JZ(LabelRef(name + "_store"))
	Label(name + "_tailloop")
	step(0)
	ADDQ(U32(mr*4), pa)
	ADDQ(U32(nr*4), pb)
	DECQ(kp)
	JNZ(LabelRef(name + "_tailloop"))

	Label(name + "_store")
	flag := reg.R9B
	Load(Param("load"), flag)
	TESTB(flag, flag)
	JZ(LabelRef(name + "_overwrite"))
	Comment("c += a·b")
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			z := zregs[acc(i, v)]
			VADDPS(Mem{Base: pc, Disp: v * 64}, z, z)
			VMOVUPS(z, Mem{Base: pc, Disp: v * 64})
		}
		if i < mr-1 {
			ADDQ(ldc, pc)
		}
	}
	VZEROUPPER()
	RET()
	Label(name + "_overwrite")
	Comment("c = a·b")
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			VMOVUPS(zregs[acc(i, v)], Mem{Base: pc, Disp: v * 64})
		}
		if i < mr-1 {
			ADDQ(ldc, pc)
		}
	}
	VZEROUPPER()
	RET()
}

// roundConsts are the registers of the rounding constants, broadcast to
// every lane.
type roundConsts struct {
	bias, one, qbit reg.VecPhysical // 0x7fff, 1, 0x00400000
}

// load broadcasts the constants, using tmp.
func (c roundConsts) load(tmp reg.GPPhysical) {
	for _, x := range []struct {
		v uint32
		z reg.VecPhysical
	}{{0x7fff, c.bias}, {1, c.one}, {0x00400000, c.qbit}} {
		MOVL(U32(x.v), tmp.As32())
		VPBROADCASTD(tmp.As32(), x.z)
	}
}

// round sets out to the float32 bits of x rounded to bfloat16 in their high
// half (the low half is garbage), as tensor.ToBFloat16: x + 0x7fff + (bit
// 16 of x) carries into the kept bits exactly when the dropped half is above
// one half, or one half and the kept half is odd; a NaN instead gets its
// quiet bit (bit 22) set, so that truncation cannot make it an infinity.
// k is clobbered.
func round(x, out reg.VecPhysical, c roundConsts, k reg.OpmaskPhysical) {
	VPSRLD(U8(16), x, out)
	VPANDD(c.one, out, out)
	VPADDD(c.bias, out, out)
	VPADDD(x, out, out)
	VFPCLASSPSZ(U8(0x81), x, k) // QNaN | SNaN
	VPORD(c.qbit, x, k, out)
}

// packPairs writes bgemmPackPairs{w}: a micro-panel whose steps are
// contiguous rows of the source. The loads are masked to the valid lanes
// (masked-off lanes read nothing and are zero, which rounds to zero); the
// stores are full rows of the micro-panel (masked to 12 lanes for w = 12).
func packPairs(w int) {
	name := fmt.Sprintf("bgemmPackPairs%d", w)
	TEXT(name, NOSPLIT, "func(d *uint32, src *float32, ld, kc, valid int)")
	Doc(fmt.Sprintf("%s sets d[p·%d + j] to the bfloat16 pair (src[2p·ld + j], src[(2p+1)·ld + j])", name, w),
		fmt.Sprintf("for j < valid, and 0 for valid <= j < %d, for p < ceil(kc/2); the odd half", w),
		"of the last pair is 0 when kc is odd.")
	d, src, ld, kc := reg.RDI, reg.RSI, reg.RDX, reg.RCX
	Load(Param("d"), d)
	Load(Param("src"), src)
	Load(Param("ld"), ld)
	Load(Param("kc"), kc)
	SHLQ(U8(2), ld)
	mask, ones := reg.R10, reg.R11
	MOVQ(I32(-1), ones)
	Load(Param("valid"), mask)
	BZHIQ(mask, ones, mask)
	loadMask := []reg.OpmaskPhysical{reg.K1, reg.K2}
	KMOVW(mask.As32(), reg.K1)
	if w == 32 {
		SHRQ(U8(16), mask)
		KMOVW(mask.As32(), reg.K2)
	}
	storeMask := reg.K3
	MOVL(U32(1<<min(w, 16)-1), mask.As32())
	KMOVW(mask.As32(), storeMask)
	c := roundConsts{bias: reg.Z28, one: reg.Z29, qbit: reg.Z30}
	c.load(mask)
	perm := reg.Z31
	VMOVDQU64(permInterleave, perm)
	nv := (w + 15) / 16

	np := reg.R9
	MOVQ(kc, np)
	SHRQ(U8(1), np)
	ANDQ(U8(1), kc)
	TESTQ(np, np)
	JZ(LabelRef(name + "_tail"))
	Label(name + "_loop")
	for v := 0; v < nv; v++ {
		VMOVDQU32_Z(Mem{Base: src, Disp: 64 * v}, loadMask[v], zregs[v])
		VMOVDQU32_Z(Mem{Base: src, Index: ld, Scale: 1, Disp: 64 * v}, loadMask[v], zregs[2+v])
	}
	for v := 0; v < nv; v++ {
		lo, hi := zregs[4+v], zregs[6+v]
		round(zregs[v], lo, c, reg.K4)
		round(zregs[2+v], hi, c, reg.K5)
		VPERMT2W(hi, perm, lo)
		VMOVDQU32(lo, storeMask, Mem{Base: d, Disp: 64 * v})
	}
	LEAQ(Mem{Base: src, Index: ld, Scale: 2}, src)
	ADDQ(U32(w*4), d)
	DECQ(np)
	JNZ(LabelRef(name + "_loop"))

	Label(name + "_tail")
	TESTQ(kc, kc)
	JZ(LabelRef(name + "_done"))
	Comment("kc is odd: the last pair has no odd half.")
	for v := 0; v < nv; v++ {
		VMOVDQU32_Z(Mem{Base: src, Disp: 64 * v}, loadMask[v], zregs[v])
		round(zregs[v], zregs[4+v], c, reg.K4)
		VPSRLD(U8(16), zregs[4+v], zregs[4+v])
		VMOVDQU32(zregs[4+v], storeMask, Mem{Base: d, Disp: 64 * v})
	}
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// paramAddr returns the frame address of parameter name.
func paramAddr(name string) Mem {
	b, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// packPairsTrans writes bgemmPackPairsTrans: a micro-panel whose rows are
// contiguous in the source. Thirty-two steps (sixteen pairs) at a time, it
// loads 32 elements of each of the rows (the other registers stay zero),
// rounds them, packs each row's 32 bfloat16s into 16 pairs (VPERMT2W), and
// transposes the 16×16 block of pairs in registers with the four rounds of
// shuffles of internal/gen's packTrans, then stores one vector per pair,
// masked to lanes. The last kc mod 32 steps use masked loads, whose zeros
// fill the odd half of the last pair, and store only the pairs that exist.
func packPairsTrans() {
	const name = "bgemmPackPairsTrans"
	TEXT(name, NOSPLIT, "func(d *uint32, src *float32, ld, kc, dstride, rows, lanes int)")
	Doc(name+" sets d[p·dstride + r] to the bfloat16 pair (src[r·ld + 2p], src[r·ld + 2p+1])",
		"for r < rows, and 0 for rows <= r < lanes, for p < ceil(kc/2); rows <= lanes <= 16.",
		"The odd half of the last pair is 0 when kc is odd.")
	d, src, ld, kc, ds := reg.RDI, reg.RSI, reg.RDX, reg.RCX, reg.RBX
	Load(Param("d"), d)
	Load(Param("src"), src)
	Load(Param("ld"), ld)
	Load(Param("kc"), kc)
	Load(Param("dstride"), ds)
	SHLQ(U8(2), ld)
	SHLQ(U8(2), ds)
	storeMask, tailLo, tailHi := reg.K1, reg.K2, reg.K3
	tmp, ones := reg.R10, reg.R11
	MOVQ(I32(-1), ones)
	Load(Param("lanes"), tmp)
	BZHIQ(tmp, ones, tmp)
	KMOVW(tmp.As32(), storeMask)
	ANDQ(U8(31), kc) // kc mod 32 for the tail; the blocks come from the frame
	BZHIQ(kc, ones, tmp)
	KMOVW(tmp.As32(), tailLo)
	SHRQ(U8(16), tmp)
	KMOVW(tmp.As32(), tailHi)
	tailPairs := reg.R9
	LEAQ(Mem{Base: kc, Disp: 1}, tailPairs)
	SHRQ(U8(1), tailPairs)
	n32 := reg.R13
	Load(Param("kc"), n32)
	SHRQ(U8(5), n32)
	rows := paramAddr("rows")

	in, t := zregs[:16], zregs[16:]
	c := roundConsts{bias: t[0], one: t[1], qbit: t[2]}
	perm, x0, x1, h := t[3], t[4], t[5], t[6]
	rowp := reg.R12
	// load reads 32 steps of each of the rows (masked when masked is set)
	// into in as 16 pairs; the other registers are zero.
	load := func(label string, masked bool) {
		for r := 0; r < 16; r++ {
			VPXORD(in[r], in[r], in[r])
		}
		c.load(reg.RAX)
		VMOVDQU64(permOdd, perm)
		MOVQ(src, rowp)
		for r := 0; r < 16; r++ {
			CMPQ(rows, U8(r))
			JLE(LabelRef(label))
			if masked {
				VMOVDQU32_Z(Mem{Base: rowp}, tailLo, x0)
				VMOVDQU32_Z(Mem{Base: rowp, Disp: 64}, tailHi, x1)
			} else {
				VMOVDQU32(Mem{Base: rowp}, x0)
				VMOVDQU32(Mem{Base: rowp, Disp: 64}, x1)
			}
			round(x0, in[r], c, reg.K4)
			round(x1, h, c, reg.K5)
			VPERMT2W(h, perm, in[r])
			if r < 15 {
				ADDQ(ld, rowp)
			}
		}
		Label(label)
	}
	transpose := func() {
		for i := 0; i < 16; i += 2 {
			VPUNPCKLDQ(in[i+1], in[i], t[i])
			VPUNPCKHDQ(in[i+1], in[i], t[i+1])
		}
		for i := 0; i < 16; i += 4 {
			VSHUFPS(U8(0x44), t[i+2], t[i], in[i])
			VSHUFPS(U8(0xEE), t[i+2], t[i], in[i+1])
			VSHUFPS(U8(0x44), t[i+3], t[i+1], in[i+2])
			VSHUFPS(U8(0xEE), t[i+3], t[i+1], in[i+3])
		}
		// in[4g+j] holds, per 128-bit lane l, rows 4g..4g+3 of pair 4l+j.
		for g := 0; g < 2; g++ {
			for j := 0; j < 4; j++ {
				VSHUFI32X4(U8(0x88), in[8*g+4+j], in[8*g+j], t[8*g+j])
				VSHUFI32X4(U8(0xDD), in[8*g+4+j], in[8*g+j], t[8*g+4+j])
			}
		}
		// t[8g+j] (j < 4): rows 8g..8g+7 of pairs j, 8+j; t[8g+4+j]: of 4+j, 12+j.
		for j := 0; j < 8; j++ {
			VSHUFI32X4(U8(0x88), t[8+j], t[j], in[j])
			VSHUFI32X4(U8(0xDD), t[8+j], t[j], in[8+j])
		}
		// in[p] is pair p: its 16 rows.
	}
	dp := reg.R8
	store := func(count reg.Register) {
		MOVQ(d, dp)
		for p := 0; p < 16; p++ {
			if count != nil {
				CMPQ(count, U8(p))
				JLE(LabelRef(name + "_done"))
			}
			VMOVDQU32(in[p], storeMask, Mem{Base: dp})
			ADDQ(ds, dp)
		}
	}

	TESTQ(n32, n32)
	JZ(LabelRef(name + "_tail"))
	Label(name + "_loop")
	load(name+"_loaded", false)
	transpose()
	store(nil)
	ADDQ(U32(128), src)
	MOVQ(dp, d)
	DECQ(n32)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_tail")
	TESTQ(kc, kc)
	JZ(LabelRef(name + "_done"))
	load(name+"_tailloaded", true)
	transpose()
	store(tailPairs)
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
