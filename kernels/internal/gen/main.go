// Command gen writes kernels/gemm_amd64.s and its Go declarations: the
// register-blocked float32 GEMM micro-kernels of package kernels, in Go
// assembly, with avo (github.com/mmcloughlin/avo).
//
// Run it through go generate in package kernels (see gemm_amd64.go):
//
//	go run ./internal/gen -out gemm_amd64.s -stubs gemm_stub_amd64.go -pkg kernels
//
// Each micro-kernel computes one MR×NR tile of C from a packed A micro-panel
// and a packed B micro-panel (Van Zee & van de Geijn, "BLIS: A Framework for
// Rapidly Instantiating BLAS Functionality", ACM TOMS 41(3), 2015, §3):
//
//	a: [k][MR]  MR consecutive elements of a column of op(A) per step p
//	b: [k][NR]  NR consecutive elements of a row of op(B) per step p
//	c: MR rows of NR elements, row stride ldc elements
//	C = A·B (load false) or C += A·B (load true)
//
// The MR×NR accumulators live in vector registers for the whole k loop.
// Rows of C lie along the vectors (NR = vectors per row × lanes), and each
// element of A is broadcast to a register that multiplies the vectors of B,
// so C is stored with unaligned full-width row stores and no transposition.
//
// Shapes, for two FMA pipes with 4-cycle latency (Zen 4, Skylake-X):
//   - AVX-512, 12×32: 24 zmm accumulators (two vectors per row), 2 zmm for
//     the row of B, 6 rotating zmm for broadcasts of A: 32 registers, 24
//     independent FMAs per step against 2 vector loads and 12 broadcasts.
//     It runs at the FMA peak with its panels in L1/L2
//     (BenchmarkSgemmMicroKernel). BLIS uses the same tile on Zen 4 (its
//     32×12 in column-major terms).
//   - AVX-512, 12×16, for products with at most 16 columns (a classifier's
//     output layer), where a 32-wide tile would compute mostly padding.
//   - AVX2+FMA, 6×16: 12 ymm accumulators, 2 for B, 2 for broadcasts: all 16
//     ymm registers (BLIS's Haswell sgemm tile).
//
// It also writes the AVX-512 packing routines (packCopy, packTrans) that
// package kernels uses for full micro-panels.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// kernel describes one micro-kernel shape.
type kernel struct {
	name   string
	mr     int // rows of the tile: elements of A broadcast per step
	nv     int // vectors per row of the tile
	lanes  int // float32 lanes per vector (16 for zmm, 8 for ymm)
	vec    func(i int) reg.VecPhysical
	unroll int // steps of p per iteration of the main loop
	bcast  int // number of rotating broadcast registers
}

func main() {
	ConstraintExpr("!purego")
	zmm := func(i int) reg.VecPhysical { return zregs[i] }
	ymm := func(i int) reg.VecPhysical { return yregs[i] }
	generate(kernel{name: "sgemmKernelAVX512", mr: 12, nv: 2, lanes: 16, vec: zmm, unroll: 4, bcast: 6})
	generate(kernel{name: "sgemmKernelAVX512N16", mr: 12, nv: 1, lanes: 16, vec: zmm, unroll: 4, bcast: 6})
	generate(kernel{name: "sgemmKernelAVX2", mr: 6, nv: 2, lanes: 8, vec: ymm, unroll: 4, bcast: 2})
	packCopy("sgemmPackCopy32AVX512", 32)
	packCopy("sgemmPackCopy16AVX512", 16)
	packCopy("sgemmPackCopy12AVX512", 12)
	packTrans("sgemmPackTransAVX512")
	Generate()
}

var (
	zregs = []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7,
		reg.Z8, reg.Z9, reg.Z10, reg.Z11, reg.Z12, reg.Z13, reg.Z14, reg.Z15,
		reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23,
		reg.Z24, reg.Z25, reg.Z26, reg.Z27, reg.Z28, reg.Z29, reg.Z30, reg.Z31}
	xregs = []reg.VecPhysical{reg.X0, reg.X1, reg.X2, reg.X3, reg.X4, reg.X5, reg.X6, reg.X7,
		reg.X8, reg.X9, reg.X10, reg.X11, reg.X12, reg.X13, reg.X14, reg.X15}
	yregs = []reg.VecPhysical{reg.Y0, reg.Y1, reg.Y2, reg.Y3, reg.Y4, reg.Y5, reg.Y6, reg.Y7,
		reg.Y8, reg.Y9, reg.Y10, reg.Y11, reg.Y12, reg.Y13, reg.Y14, reg.Y15}
)

func generate(kn kernel) {
	nr := kn.nv * kn.lanes
	vbytes := kn.lanes * 4
	nacc := kn.mr * kn.nv
	if nacc+kn.nv+kn.bcast > 32 || (kn.lanes == 8 && nacc+kn.nv+kn.bcast > 16) {
		panic(fmt.Sprintf("%s: %d accumulators, %d B and %d broadcast registers do not fit", kn.name, nacc, kn.nv, kn.bcast))
	}
	acc := func(i, v int) reg.VecPhysical { return kn.vec(i*kn.nv + v) }
	bv := func(v int) reg.VecPhysical { return kn.vec(nacc + v) }
	bc := func(i int) reg.VecPhysical { return kn.vec(nacc + kn.nv + i%kn.bcast) }

	TEXT(kn.name, NOSPLIT, "func(k int, a, b, c *float32, ldc int, load bool)")
	Doc(fmt.Sprintf("%s sets the %d×%d tile c (row stride ldc) to a·b, or adds a·b", kn.name, kn.mr, nr),
		fmt.Sprintf("to it when load is set, for a packed [k][%d] and b packed [k][%d]; k >= 1.", kn.mr, nr))
	k, pa, pb, pc, ldc := reg.RCX, reg.RAX, reg.RBX, reg.RDI, reg.RSI
	Load(Param("k"), k)
	Load(Param("a"), pa)
	Load(Param("b"), pb)
	Load(Param("c"), pc)
	Load(Param("ldc"), ldc)
	SHLQ(U8(2), ldc)

	Comment("Zero the accumulators and prefetch the rows of c.")
	for i := 0; i < kn.mr; i++ {
		for v := 0; v < kn.nv; v++ {
			VXORPS(acc(i, v), acc(i, v), acc(i, v))
		}
	}
	row := reg.R8
	MOVQ(pc, row)
	for i := 0; i < kn.mr; i++ {
		PREFETCHT0(Mem{Base: row})
		if nr*4 > 64 {
			PREFETCHT0(Mem{Base: row, Disp: nr*4 - 4})
		}
		if i < kn.mr-1 {
			ADDQ(ldc, row)
		}
	}

	step := func(u int) {
		for v := 0; v < kn.nv; v++ {
			VMOVUPS(Mem{Base: pb, Disp: u*nr*4 + v*vbytes}, bv(v))
		}
		for i := 0; i < kn.mr; i++ {
			VBROADCASTSS(Mem{Base: pa, Disp: (u*kn.mr + i) * 4}, bc(i))
			for v := 0; v < kn.nv; v++ {
				VFMADD231PS(bv(v), bc(i), acc(i, v))
			}
		}
	}

	n4 := reg.RDX
	MOVQ(k, n4)
	SHRQ(U8(bitsOf(kn.unroll)), n4)
	ANDQ(U32(kn.unroll-1), k)
	TESTQ(n4, n4)
	JZ(LabelRef(kn.name + "_tail"))
	Label(kn.name + "_loop")
	for u := 0; u < kn.unroll; u++ {
		step(u)
	}
	ADDQ(U32(kn.unroll*kn.mr*4), pa)
	ADDQ(U32(kn.unroll*nr*4), pb)
	DECQ(n4)
	JNZ(LabelRef(kn.name + "_loop"))

	Label(kn.name + "_tail")
	TESTQ(k, k)
	JZ(LabelRef(kn.name + "_store"))
	Label(kn.name + "_tailloop")
	step(0)
	ADDQ(U32(kn.mr*4), pa)
	ADDQ(U32(nr*4), pb)
	DECQ(k)
	JNZ(LabelRef(kn.name + "_tailloop"))

	Label(kn.name + "_store")
	flag := reg.R9B
	Load(Param("load"), flag)
	TESTB(flag, flag)
	JZ(LabelRef(kn.name + "_overwrite"))
	Comment("c += a·b")
	for i := 0; i < kn.mr; i++ {
		for v := 0; v < kn.nv; v++ {
			VADDPS(Mem{Base: pc, Disp: v * vbytes}, acc(i, v), acc(i, v))
			VMOVUPS(acc(i, v), Mem{Base: pc, Disp: v * vbytes})
		}
		if i < kn.mr-1 {
			ADDQ(ldc, pc)
		}
	}
	VZEROUPPER()
	RET()
	Label(kn.name + "_overwrite")
	Comment("c = a·b")
	for i := 0; i < kn.mr; i++ {
		for v := 0; v < kn.nv; v++ {
			VMOVUPS(acc(i, v), Mem{Base: pc, Disp: v * vbytes})
		}
		if i < kn.mr-1 {
			ADDQ(ldc, pc)
		}
	}
	VZEROUPPER()
	RET()
}

func bitsOf(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	if 1<<b != n {
		panic("unroll must be a power of two")
	}
	return b
}

// paramAddr returns the frame address of parameter name.
func paramAddr(name string) Mem {
	b, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// packCopy writes a micro-panel whose steps are contiguous rows of the
// source: d[p·w + j] = src[p·ld + j] for j < valid and 0 for valid <= j < w,
// p < kc (w = 32, 16 or 12). The loads are masked to valid lanes (masked-off
// lanes neither read memory nor fault), the stores are full.
func packCopy(name string, w int) {
	TEXT(name, NOSPLIT, "func(d, src *float32, ld, kc, valid int)")
	Doc(fmt.Sprintf("%s sets d[p·%d + j] = src[p·ld + j] for j < valid, and 0 for", name, w),
		fmt.Sprintf("valid <= j < %d, for p < kc.", w))
	d, src, ld, kc := reg.RDI, reg.RSI, reg.RDX, reg.RCX
	Load(Param("d"), d)
	Load(Param("src"), src)
	Load(Param("ld"), ld)
	Load(Param("kc"), kc)
	SHLQ(U8(2), ld)
	ld3 := reg.R8
	LEAQ(Mem{Base: ld, Index: ld, Scale: 2}, ld3)
	// Lane masks: bits [0, valid) of the row, 16 (zmm) or 8 and 4 (ymm, xmm)
	// at a time.
	mask, ones := reg.R10, reg.R11
	MOVQ(I32(-1), ones)
	Load(Param("valid"), mask)
	BZHIQ(mask, ones, mask)
	k1, k2 := reg.K1, reg.K2
	KMOVW(mask.As32(), k1)
	switch w {
	case 32:
		SHRQ(U8(16), mask)
	case 12:
		SHRQ(U8(8), mask)
	}
	KMOVW(mask.As32(), k2)
	n4 := reg.R9
	MOVQ(kc, n4)
	SHRQ(U8(2), n4)
	ANDQ(U8(3), kc)
	// move copies source row u (of four) to step u of d.
	move := func(u int) {
		row := func(disp int) Mem {
			switch u {
			case 0:
				return Mem{Base: src, Disp: disp}
			case 1:
				return Mem{Base: src, Index: ld, Scale: 1, Disp: disp}
			case 2:
				return Mem{Base: src, Index: ld, Scale: 2, Disp: disp}
			default:
				return Mem{Base: src, Index: ld3, Scale: 1, Disp: disp}
			}
		}
		switch w {
		case 32:
			VMOVUPS_Z(row(0), k1, zregs[2*u])
			VMOVUPS_Z(row(64), k2, zregs[2*u+1])
			VMOVUPS(zregs[2*u], Mem{Base: d, Disp: u * 128})
			VMOVUPS(zregs[2*u+1], Mem{Base: d, Disp: u*128 + 64})
		case 16:
			VMOVUPS_Z(row(0), k1, zregs[u])
			VMOVUPS(zregs[u], Mem{Base: d, Disp: u * 64})
		case 12:
			VMOVUPS_Z(row(0), k1, yregs[2*u])
			VMOVUPS_Z(row(32), k2, xregs[2*u+1])
			VMOVUPS(yregs[2*u], Mem{Base: d, Disp: u * 48})
			VMOVUPS(xregs[2*u+1], Mem{Base: d, Disp: u*48 + 32})
		default:
			panic("packCopy: unsupported width")
		}
	}
	TESTQ(n4, n4)
	JZ(LabelRef(name + "_tail"))
	Label(name + "_loop")
	for u := 0; u < 4; u++ {
		move(u)
	}
	ADDQ(U32(4*w*4), d)
	LEAQ(Mem{Base: src, Index: ld, Scale: 4}, src)
	DECQ(n4)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_tail")
	TESTQ(kc, kc)
	JZ(LabelRef(name + "_done"))
	Label(name + "_tailloop")
	move(0)
	ADDQ(U32(w*4), d)
	ADDQ(ld, src)
	DECQ(kc)
	JNZ(LabelRef(name + "_tailloop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// packTrans writes a micro-panel whose rows are contiguous in the source,
// transposed: d[p·dstride + r] = src[r·ld + p] for r < rows and p < kc, and 0
// for rows <= r < lanes (rows <= lanes <= 16). Sixteen steps at a time, it
// loads 16 elements of each of the rows (the other registers stay zero),
// transposes the 16×16 block in registers with the usual four rounds of
// unpack, in-lane and cross-lane shuffles (unpcklps/unpckhps, shufps, then
// shuff32x4 twice), and stores one vector per step, masked to lanes. The last
// kc mod 16 steps use masked loads and store only the steps that exist.
func packTrans(name string) {
	TEXT(name, NOSPLIT, "func(d, src *float32, ld, kc, dstride, rows, lanes int)")
	Doc(fmt.Sprintf("%s sets d[p·dstride + r] = src[r·ld + p] for r < rows, and 0 for", name),
		"rows <= r < lanes, for p < kc; rows <= lanes <= 16.")
	d, src, ld, kc, ds := reg.RDI, reg.RSI, reg.RDX, reg.RCX, reg.RBX
	Load(Param("d"), d)
	Load(Param("src"), src)
	Load(Param("ld"), ld)
	Load(Param("kc"), kc)
	Load(Param("dstride"), ds)
	SHLQ(U8(2), ld)
	SHLQ(U8(2), ds)
	ld3, ds3 := reg.R8, reg.R9
	LEAQ(Mem{Base: ld, Index: ld, Scale: 2}, ld3)
	LEAQ(Mem{Base: ds, Index: ds, Scale: 2}, ds3)
	storeMask, tailMask := reg.K1, reg.K2
	tmp, ones := reg.R10, reg.R11
	MOVQ(I32(-1), ones)
	Load(Param("lanes"), tmp)
	BZHIQ(tmp, ones, tmp)
	KMOVW(tmp.As32(), storeMask)
	ANDQ(U8(15), kc) // kc mod 16 for the tail; the chunks come from the frame
	BZHIQ(kc, ones, tmp)
	KMOVW(tmp.As32(), tailMask)
	n16 := reg.R11
	Load(Param("kc"), n16)
	SHRQ(U8(4), n16)
	rows := paramAddr("rows")

	in, t := zregs[:16], zregs[16:]
	bases := []reg.Register{reg.R12, reg.R13, reg.RAX, reg.R10}
	// load reads 16 steps of each of the rows (masked with k when k is not
	// nil); the other registers are zero.
	load := func(label string, k reg.Register) {
		for r := 0; r < 16; r++ {
			VXORPS(in[r], in[r], in[r])
		}
		MOVQ(src, bases[0])
		for g := 1; g < 4; g++ {
			LEAQ(Mem{Base: bases[g-1], Index: ld, Scale: 4}, bases[g])
		}
		for r := 0; r < 16; r++ {
			CMPQ(rows, U8(r))
			JLE(LabelRef(label))
			b := bases[r/4]
			var m Mem
			switch r % 4 {
			case 0:
				m = Mem{Base: b}
			case 1:
				m = Mem{Base: b, Index: ld, Scale: 1}
			case 2:
				m = Mem{Base: b, Index: ld, Scale: 2}
			default:
				m = Mem{Base: b, Index: ld3, Scale: 1}
			}
			if k == nil {
				VMOVUPS(m, in[r])
			} else {
				VMOVUPS_Z(m, k, in[r])
			}
		}
		Label(label)
	}
	transpose := func() {
		for i := 0; i < 16; i += 2 {
			VUNPCKLPS(in[i+1], in[i], t[i])
			VUNPCKHPS(in[i+1], in[i], t[i+1])
		}
		for i := 0; i < 16; i += 4 {
			VSHUFPS(U8(0x44), t[i+2], t[i], in[i])
			VSHUFPS(U8(0xEE), t[i+2], t[i], in[i+1])
			VSHUFPS(U8(0x44), t[i+3], t[i+1], in[i+2])
			VSHUFPS(U8(0xEE), t[i+3], t[i+1], in[i+3])
		}
		// in[4g+j] holds, per 128-bit lane l, rows 4g..4g+3 of column 4l+j.
		for h := 0; h < 2; h++ {
			for j := 0; j < 4; j++ {
				VSHUFF32X4(U8(0x88), in[8*h+4+j], in[8*h+j], t[8*h+j])
				VSHUFF32X4(U8(0xDD), in[8*h+4+j], in[8*h+j], t[8*h+4+j])
			}
		}
		// t[8h+j] (j < 4): rows 8h..8h+7 of columns j, 8+j; t[8h+4+j]: of 4+j, 12+j.
		for j := 0; j < 8; j++ {
			VSHUFF32X4(U8(0x88), t[8+j], t[j], in[j])
			VSHUFF32X4(U8(0xDD), t[8+j], t[j], in[8+j])
		}
		// in[c] is column c: the 16 rows of step c.
	}
	step := func(c int) Mem {
		var base reg.Register = d
		if c >= 4 {
			base = bases[c/4]
		}
		switch c % 4 {
		case 0:
			return Mem{Base: base}
		case 1:
			return Mem{Base: base, Index: ds, Scale: 1}
		case 2:
			return Mem{Base: base, Index: ds, Scale: 2}
		default:
			return Mem{Base: base, Index: ds3, Scale: 1}
		}
	}
	store := func(count reg.Register) {
		for g := 1; g < 4; g++ {
			var prev reg.Register = d
			if g > 1 {
				prev = bases[g-1]
			}
			LEAQ(Mem{Base: prev, Index: ds, Scale: 4}, bases[g])
		}
		for c := 0; c < 16; c++ {
			if count != nil {
				CMPQ(count, U8(c))
				JLE(LabelRef(name + "_done"))
			}
			VMOVUPS(in[c], storeMask, step(c))
		}
	}

	TESTQ(n16, n16)
	JZ(LabelRef(name + "_tail"))
	Label(name + "_loop")
	load(name+"_loaded", nil)
	transpose()
	store(nil)
	ADDQ(U8(64), src)
	LEAQ(Mem{Base: bases[3], Index: ds, Scale: 4}, d)
	DECQ(n16)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_tail")
	TESTQ(kc, kc)
	JZ(LabelRef(name + "_done"))
	load(name+"_tailloaded", tailMask)
	transpose()
	store(kc)
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
