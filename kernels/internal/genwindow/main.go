// Command genwindow writes kernels/window_amd64.s and its Go declarations:
// loops over the windows of channels-last (NHWC) images in AVX-512, sixteen
// channels per zmm register, with avo (github.com/mmcloughlin/avo). The Go
// side is window_amd64.go.
//
//   - poolMax512, poolMaxGrad512: max pooling and its gradient over one
//     window, for the whole multiples of sixteen channels.
//   - col2imRow512: col2im's additions for a run of windows.
//   - sumCols512xN: column sums of a matrix (the bias gradient), N·16
//     columns at a time.
//   - packT12512: the transposed im2col panels of the filter gradient's
//     product, twelve floats of a window row at a time.
//
// Both pooling loops visit the window's cells in the order the caller lists them
// (row-major) and select, per channel, the value of the reference rule of
// pool.go: a cell replaces the best so far when it is greater, or when it
// is a NaN and the best is not, so the first maximum wins ties and the first
// NaN wins over everything.
//
//	go run ./internal/genwindow -out window_amd64.s -stubs window_stub_amd64.go -pkg kernels
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// VCMPPS predicates.
const (
	cmpEQOQ   = 0x00 // equal, ordered, quiet
	cmpUnordQ = 0x03 // either operand NaN
	cmpNLEUQ  = 0x06 // not less or equal: greater, or either NaN
	cmpOrdQ   = 0x07 // neither operand NaN
	cmpGTOQ   = 0x1e // greater, ordered, quiet
)

func main() {
	ConstraintExpr("!purego")
	poolMax()
	poolMaxGrad()
	col2imRow()
	for _, b := range []int{4, 2, 1} {
		sumCols(b)
	}
	packT12()
	Generate()
}

// best sets v to the selected value of 16 channels of the window whose cells
// start at x + offs[i]*4 (i < cells, cells >= 1). It uses s, K1 and K2 and
// the registers i, o.
func best(x, offs, cells, i, o reg.Register, v, s reg.VecPhysical, label string) {
	MOVQ(Mem{Base: offs}, o)
	VMOVUPS(Mem{Base: x, Index: o, Scale: 4}, v)
	MOVQ(U32(1), i)
	Label(label)
	CMPQ(i, cells)
	JGE(LabelRef(label + "_done"))
	MOVQ(Mem{Base: offs, Index: i, Scale: 8}, o)
	VMOVUPS(Mem{Base: x, Index: o, Scale: 4}, s)
	// K1 = v is not NaN; K1 &= s > v or s is NaN: take s
	VCMPPS(U8(cmpOrdQ), v, v, reg.K1)
	VCMPPS(U8(cmpNLEUQ), v, s, reg.K1, reg.K1)
	VBLENDMPS(s, v, reg.K1, v)
	INCQ(i)
	JMP(LabelRef(label))
	Label(label + "_done")
}

func poolMax() {
	TEXT("poolMax512", NOSPLIT, "func(dst, x *float32, offs *int, cells, blocks int)")
	Pragma("noescape")
	Doc("poolMax512 sets dst[16b+j] to the selected value of x[offs[i]+16b+j] over",
		"i < cells (cells >= 1), for j < 16 and b < blocks.")
	dst, x := Load(Param("dst"), reg.RDI), Load(Param("x"), reg.RSI)
	offs, cells := Load(Param("offs"), reg.R8), Load(Param("cells"), reg.R9)
	blocks := Load(Param("blocks"), reg.R10)
	i, o := reg.R11, reg.R12
	Label("block")
	CMPQ(blocks, U8(0))
	JE(LabelRef("done"))
	best(x, offs, cells, i, o, reg.Z0, reg.Z1, "cell")
	VMOVUPS(reg.Z0, Mem{Base: dst})
	ADDQ(U8(64), dst)
	ADDQ(U8(64), x)
	DECQ(blocks)
	JMP(LabelRef("block"))
	Label("done")
	VZEROUPPER()
	RET()
}

func poolMaxGrad() {
	TEXT("poolMaxGrad512", NOSPLIT, "func(dx, x, dy *float32, offs *int, cells, blocks int, acc, relu bool)")
	Pragma("noescape")
	Doc("poolMaxGrad512 routes dy[16b+j] to the cell of x[offs[i]+16b+j], i < cells",
		"(cells >= 1), that poolMax512 selects, for j < 16 and b < blocks: with acc,",
		"dx[offs[i]+16b+j] += dy[16b+j] at the selected cell (the others keep their",
		"value); without, every cell of dx is written: 0 + dy at the selected one,",
		"0 elsewhere. With relu, dy counts as 0 where the selected value is not",
		"above 0 (the gradient of a relu whose output x is).")
	dx, x, dy := Load(Param("dx"), reg.RDI), Load(Param("x"), reg.RSI), Load(Param("dy"), reg.RDX)
	offs, cells := Load(Param("offs"), reg.R8), Load(Param("cells"), reg.R9)
	blocks := Load(Param("blocks"), reg.R10)
	acc := Load(Param("acc"), reg.R13.As8())
	relu := Load(Param("relu"), reg.R14.As8())
	i, o := reg.R11, reg.R12
	v, s, g, t, zero := reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4
	VXORPS(zero, zero, zero)
	Label("block")
	CMPQ(blocks, U8(0))
	JE(LabelRef("done"))
	best(x, offs, cells, i, o, v, s, "cell")
	VMOVUPS(Mem{Base: dy}, g)
	CMPB(relu, U8(0))
	JE(LabelRef("relu_done"))
	VCMPPS(U8(cmpGTOQ), zero, v, reg.K4) // K4 = v > 0
	VMOVUPS_Z(g, reg.K4, g)
	Label("relu_done")
	KXORW(reg.K3, reg.K3, reg.K3) // K3: channels already routed
	XORQ(i, i)
	Label("route")
	CMPQ(i, cells)
	JGE(LabelRef("route_done"))
	MOVQ(Mem{Base: offs, Index: i, Scale: 8}, o)
	VMOVUPS(Mem{Base: x, Index: o, Scale: 4}, s)
	// K1 = (s == v or s is NaN) and not yet routed; only NaN equals a NaN v,
	// and an ordered v means no cell is NaN.
	VCMPPS(U8(cmpUnordQ), s, s, reg.K2)
	VCMPPS(U8(cmpEQOQ), v, s, reg.K1)
	KORW(reg.K2, reg.K1, reg.K1)
	KANDNW(reg.K1, reg.K3, reg.K1) // K1 = ^K3 & K1
	KORW(reg.K1, reg.K3, reg.K3)
	CMPB(acc, U8(0))
	JE(LabelRef("write"))
	VMOVUPS(Mem{Base: dx, Index: o, Scale: 4}, t)
	VADDPS(g, t, reg.K1, t) // t += g where K1
	JMP(LabelRef("store"))
	Label("write")
	VADDPS_Z(g, zero, reg.K1, t) // t = 0 + g where K1, else 0
	Label("store")
	VMOVUPS(t, Mem{Base: dx, Index: o, Scale: 4})
	INCQ(i)
	JMP(LabelRef("route"))
	Label("route_done")
	ADDQ(U8(64), dx)
	ADDQ(U8(64), x)
	ADDQ(U8(64), dy)
	DECQ(blocks)
	JMP(LabelRef("block"))
	Label("done")
	VZEROUPPER()
	RET()
}

func col2imRow() {
	TEXT("col2imRow512", NOSPLIT, "func(d, s *float32, windows, dstep, sstep, segs, dstride, sstride, n int)")
	Pragma("noescape")
	Doc("col2imRow512 adds, for w < windows, k < segs and i < n, in that loop",
		"order, s[w·sstep + k·sstride + i] into d[w·dstep + k·dstride + i] (d + s).")
	d, s := Load(Param("d"), reg.RDI), Load(Param("s"), reg.RSI)
	windows := Load(Param("windows"), reg.R8)
	dstep, sstep := Load(Param("dstep"), reg.R9), Load(Param("sstep"), reg.R10)
	dstride, sstride := Load(Param("dstride"), reg.R12), Load(Param("sstride"), reg.R13)
	n := Load(Param("n"), reg.R14)
	for _, r := range []reg.Register{dstep, sstep, dstride, sstride} {
		SHLQ(U8(2), r)
	}
	// K1: the lanes of the last, partial block of a segment (none when n is
	// a multiple of 16); R15: the whole blocks.
	tmp, blocks := reg.RAX, reg.R15
	MOVQ(n, tmp)
	ANDQ(U8(15), tmp)
	MOVQ(I32(-1), reg.RBX)
	BZHIQ(tmp, reg.RBX, tmp)
	KMOVW(tmp.As32(), reg.K1)
	MOVQ(n, blocks)
	SHRQ(U8(4), blocks)
	dp, sp, k := reg.RCX, reg.RDX, reg.R11
	p1, p2, j := reg.RAX, reg.R14, reg.RBX
	v, w := reg.Z0, reg.Z1
	Label("window")
	CMPQ(windows, U8(0))
	JE(LabelRef("done"))
	MOVQ(d, dp)
	MOVQ(s, sp)
	Load(Param("segs"), k)
	Label("seg")
	CMPQ(k, U8(0))
	JE(LabelRef("seg_done"))
	MOVQ(dp, p1)
	MOVQ(sp, p2)
	MOVQ(blocks, j)
	Label("block")
	CMPQ(j, U8(0))
	JE(LabelRef("tail"))
	VMOVUPS(Mem{Base: p1}, v)
	VADDPS(Mem{Base: p2}, v, v)
	VMOVUPS(v, Mem{Base: p1})
	ADDQ(U8(64), p1)
	ADDQ(U8(64), p2)
	DECQ(j)
	JMP(LabelRef("block"))
	Label("tail")
	KORTESTW(reg.K1, reg.K1)
	JZ(LabelRef("seg_next"))
	VMOVUPS_Z(Mem{Base: p1}, reg.K1, v)
	VMOVUPS_Z(Mem{Base: p2}, reg.K1, w)
	VADDPS(w, v, v)
	VMOVUPS(v, reg.K1, Mem{Base: p1})
	Label("seg_next")
	ADDQ(dstride, dp)
	ADDQ(sstride, sp)
	DECQ(k)
	JMP(LabelRef("seg"))
	Label("seg_done")
	ADDQ(dstep, d)
	ADDQ(sstep, s)
	DECQ(windows)
	JMP(LabelRef("window"))
	Label("done")
	VZEROUPPER()
	RET()
}

// sumCols: dst[16b+j] = Σ_r x[r·stride + 16b + j] for b < blocks, summed in
// row order from +0, as SumRows' loop.
func sumCols(blocks int) {
	name := fmt.Sprintf("sumCols512x%d", blocks)
	TEXT(name, NOSPLIT, "func(dst, x *float32, rows, stride int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets dst[i] = Σ_r x[r·stride + i] for i < %d, adding the rows in order", name, 16*blocks),
		"to +0 (stride in floats).")
	dst, x := Load(Param("dst"), reg.RDI), Load(Param("x"), reg.RSI)
	rows, stride := Load(Param("rows"), reg.R8), Load(Param("stride"), reg.R9)
	SHLQ(U8(2), stride)
	acc := []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3}[:blocks]
	for _, a := range acc {
		VXORPS(a, a, a)
	}
	Label("row")
	CMPQ(rows, U8(0))
	JE(LabelRef("done"))
	for b, a := range acc {
		VADDPS(Mem{Base: x, Disp: 64 * b}, a, a)
	}
	ADDQ(stride, x)
	DECQ(rows)
	JMP(LabelRef("row"))
	Label("done")
	for b, a := range acc {
		VMOVUPS(a, Mem{Base: dst, Disp: 64 * b})
	}
	VZEROUPPER()
	RET()
}

func packT12() {
	TEXT("packT12512", NOSPLIT, "func(d *float32, panel int, src *float32, sstep, positions, groups int)")
	Pragma("noescape")
	Doc("packT12512 copies, for p < positions and q < groups, the 12 floats",
		"src[p·sstep + 12q ...] to d[q·panel + 12p ...] (strides in floats).")
	d, panel := Load(Param("d"), reg.RDI), Load(Param("panel"), reg.R8)
	src, sstep := Load(Param("src"), reg.RSI), Load(Param("sstep"), reg.R9)
	positions, groups := Load(Param("positions"), reg.R10), Load(Param("groups"), reg.R11)
	SHLQ(U8(2), panel)
	SHLQ(U8(2), sstep)
	MOVL(U32(0xfff), reg.EAX)
	KMOVW(reg.EAX, reg.K1)
	s, dd, q := reg.RCX, reg.RDX, reg.RBX
	Label("pos")
	CMPQ(positions, U8(0))
	JE(LabelRef("done"))
	MOVQ(src, s)
	MOVQ(d, dd)
	MOVQ(groups, q)
	Label("group")
	CMPQ(q, U8(0))
	JE(LabelRef("group_done"))
	VMOVUPS_Z(Mem{Base: s}, reg.K1, reg.Z0)
	VMOVUPS(reg.Z0, reg.K1, Mem{Base: dd})
	ADDQ(U8(48), s)
	ADDQ(panel, dd)
	DECQ(q)
	JMP(LabelRef("group"))
	Label("group_done")
	ADDQ(sstep, src)
	ADDQ(U8(48), d)
	DECQ(positions)
	JMP(LabelRef("pos"))
	Label("done")
	VZEROUPPER()
	RET()
}
