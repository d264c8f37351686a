// Command genvision writes kernels/vision_amd64.s and its Go declarations:
// the AVX-512 tile of the direct convolution (vision_direct.go), with avo
// (github.com/mmcloughlin/avo). The Go side is vision_amd64.go.
//
// convTile512rRvV computes R consecutive output positions (one output row
// of an NHWC convolution) × 16·V output channels, V ≤ 2, holding the R·V
// accumulators in zmm registers while it walks the taps of the window
// and, per tap, the input channels: each input value is broadcast from
// memory into the multiply-add with one or two vectors of 16 filter
// values. Nothing is packed: the input is read where it lies (Georganas et
// al., "Anatomy of High-Performance Deep Learning Convolutions on SIMD
// Architectures", SC 2018, the direct convolution's register blocking).
//
// filtTile512cCvV computes the filter gradient of one tap for C input
// channels × 16·V filters, summing x·dy over a rectangle of output
// positions with the C·V accumulators in registers (with V = 2, each
// input value broadcast once into a register for both vectors).
//
// stemTile512rRpP computes the filter gradient of R window rows × P
// (window column, input channel) pairs × 16 filters of a convolution with
// few input channels (a stem's), over an input staged with its padding.
//
// moments512 sums, per channel, the shifted values and their squares in
// float64, sixteen channels at a time (BatchNormalization's statistics).
//
// sums512 sums, per channel, g and g·x in float64, sixteen channels at a
// time: the gradients of BatchNormalization's shift and scale in one pass.
//
// wgBT512, wgAT512 and wgA512 are Winograd F(2×2, 3×3)'s tile transforms
// (winograd.go), sixteen channels at a time: Bᵀ·d·B of a 4×4 input tile,
// Aᵀ·m·A of a 4×4 product tile and A'·w·A'ᵀ of a 2×2 output-gradient tile.
// Their matrices hold only 0 and ±1, so each is adds and subtracts, in the
// order winograd.go's Go transform uses (the same bits). wg4BT512,
// wg4AT512 and wg4A512 are F(4×4, 3×3)'s (6×6, 6×6 to 4×4, 4×4 to 6×6),
// whose coefficients up to 8 multiply as wgCombine says.
//
//	go run ./internal/genvision -out vision_amd64.s -stubs vision_stub_amd64.go -pkg kernels
package main

import (
	"fmt"
	"math"
	"slices"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// tileRows are the tile heights generated, for each width V of 1 and 2.
var tileRows = []int{12, 8, 4, 2, 1}

// filtChannels are the channel blocks of the filter gradient's tiles, for
// V = 1 and 2.
var filtChannels = [2][]int{{16, 8, 4}, {12, 8, 4}}

func filtTile(cb, nv int) {
	name := fmt.Sprintf("filtTile512c%dv%d", cb, nv)
	TEXT(name, NOSPLIT, "func(dw, x, dy *float32, rows, cols, xcol, xrow, dycol, dyrow, ldw int, acc bool)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets (with acc: adds to) dw[c·ldw + j], c < %d, j < %d, the sum over", name, cb, 16*nv),
		"the rows × cols positions (i, k) of x[i·xrow + k·xcol + c]·dy[i·dyrow + k·dycol + j],",
		"row by row (strides in bytes; ldw in floats; rows, cols >= 1).")
	dw, x, dy := Load(Param("dw"), reg.RDI), Load(Param("x"), reg.RSI), Load(Param("dy"), reg.RDX)
	rows, xcol, xrow := Load(Param("rows"), reg.R8), Load(Param("xcol"), reg.R10), Load(Param("xrow"), reg.R11)
	dycol, dyrow, ldw := Load(Param("dycol"), reg.R12), Load(Param("dyrow"), reg.R13), Load(Param("ldw"), reg.R14)
	SHLQ(U8(2), ldw)
	xp, dp, k, t := reg.RAX, reg.RBX, reg.RCX, reg.R15
	zs := []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7, reg.Z8, reg.Z9, reg.Z10, reg.Z11,
		reg.Z12, reg.Z13, reg.Z14, reg.Z15, reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23}
	acc := make([][]reg.VecPhysical, cb)
	for c := range acc {
		acc[c] = zs[c*nv : c*nv+nv]
	}
	// the accumulators start at zero, or at dw with acc
	accFlag := Load(Param("acc"), reg.R9.As8())
	MOVQ(dw, t)
	CMPB(accFlag, U8(0))
	JE(LabelRef("zero"))
	for c := 0; c < cb; c++ {
		for v := 0; v < nv; v++ {
			VMOVUPS(Mem{Base: t, Disp: 64 * v}, acc[c][v])
		}
		if c < cb-1 {
			ADDQ(ldw, t)
		}
	}
	JMP(LabelRef("row"))
	Label("zero")
	for c := 0; c < cb; c++ {
		for _, a := range acc[c] {
			VXORPS(a, a, a)
		}
	}
	b := []reg.VecPhysical{reg.Z28, reg.Z29}
	Label("row")
	MOVQ(x, xp)
	MOVQ(dy, dp)
	Load(Param("cols"), k)
	Label("col")
	for v := 0; v < nv; v++ {
		VMOVUPS(Mem{Base: dp, Disp: 64 * v}, b[v])
	}
	for c := 0; c < cb; c++ {
		if nv == 1 {
			VFMADD231PS_BCST(Mem{Base: xp, Disp: 4 * c}, b[0], acc[c][0])
			continue
		}
		// one broadcast for both vectors of filters: half the loads
		s := []reg.VecPhysical{reg.Z24, reg.Z25, reg.Z26, reg.Z27}[c%4]
		VBROADCASTSS(Mem{Base: xp, Disp: 4 * c}, s)
		for v := 0; v < nv; v++ {
			VFMADD231PS(s, b[v], acc[c][v])
		}
	}
	ADDQ(xcol, xp)
	ADDQ(dycol, dp)
	DECQ(k)
	JNZ(LabelRef("col"))
	ADDQ(xrow, x)
	ADDQ(dyrow, dy)
	DECQ(rows)
	JNZ(LabelRef("row"))
	for c := 0; c < cb; c++ {
		for v := 0; v < nv; v++ {
			VMOVUPS(acc[c][v], Mem{Base: dw, Disp: 64 * v})
		}
		if c < cb-1 {
			ADDQ(ldw, dw)
		}
	}
	VZEROUPPER()
	RET()
}

// stemPairs is the most window columns × channels (KW·C) of one window
// row the stem tiles take: the accumulators of R rows of them, R·KW·C ≤
// 27, stay in zmm registers with one more for dy.
const stemPairs = 27

// stemTile generates stemTile512rRpP: the filter gradient of R window
// rows × P (window column, channel) pairs × 16 filters over a padded
// input, for inputs with few channels (a stem's). In an NHWC input staged
// with its padding, the KW·C pairs of one window row are P consecutive
// floats, and the R rows are xtap bytes apart, so the R·P accumulators
// read each input value by a broadcast from memory and dy's 16 filters
// once per position.
func stemTile(rows, pairs int) {
	name := fmt.Sprintf("stemTile512r%dp%d", rows, pairs)
	TEXT(name, NOSPLIT, "func(dw, x, dy *float32, rows, cols, xcol, xrow, xtap, dycol, dyrow, ldw int, acc bool)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets (with acc: adds to) dw[(r·%d + j)·ldw + k], r < %d, j < %d, k < 16,", name, pairs, rows, pairs),
		"the sum over the rows × cols positions (i, c) of",
		"x[i·xrow + c·xcol + r·xtap + 4·j]·dy[i·dyrow + c·dycol + 4·k], row by row",
		"(offsets and strides in bytes; ldw in floats; rows, cols >= 1).")
	t := reg.R15
	accFlag := Load(Param("acc"), t.As8())
	dw, x, dy := Load(Param("dw"), reg.RDI), Load(Param("x"), reg.RSI), Load(Param("dy"), reg.RDX)
	nrows, xcol, xrow := Load(Param("rows"), reg.R8), Load(Param("xcol"), reg.R10), Load(Param("xrow"), reg.R11)
	xtap := Load(Param("xtap"), reg.R9)
	dycol, dyrow, ldw := Load(Param("dycol"), reg.R12), Load(Param("dyrow"), reg.R13), Load(Param("ldw"), reg.R14)
	SHLQ(U8(2), ldw)
	xp, dp, k := reg.RAX, reg.RBX, reg.RCX
	zs := []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7, reg.Z8, reg.Z9, reg.Z10, reg.Z11,
		reg.Z12, reg.Z13, reg.Z14, reg.Z15, reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23,
		reg.Z24, reg.Z25, reg.Z26}
	acc := zs[:rows*pairs]
	CMPB(accFlag, U8(0))
	JE(LabelRef("zero"))
	MOVQ(dw, t)
	for i, a := range acc {
		VMOVUPS(Mem{Base: t}, a)
		if i < len(acc)-1 {
			ADDQ(ldw, t)
		}
	}
	JMP(LabelRef("row"))
	Label("zero")
	for _, a := range acc {
		VXORPS(a, a, a)
	}
	b := reg.Z31
	Label("row")
	MOVQ(x, xp)
	MOVQ(dy, dp)
	Load(Param("cols"), k)
	Label("col")
	VMOVUPS(Mem{Base: dp}, b)
	for r := 0; r < rows; r++ {
		m := Mem{Base: xp}
		switch r {
		case 1:
			m = Mem{Base: xp, Index: xtap, Scale: 1}
		case 2:
			m = Mem{Base: xp, Index: xtap, Scale: 2}
		}
		for j := 0; j < pairs; j++ {
			m.Disp = 4 * j
			VFMADD231PS_BCST(m, b, acc[r*pairs+j])
		}
	}
	ADDQ(xcol, xp)
	ADDQ(dycol, dp)
	DECQ(k)
	JNZ(LabelRef("col"))
	ADDQ(xrow, x)
	ADDQ(dyrow, dy)
	DECQ(nrows)
	JNZ(LabelRef("row"))
	for i, a := range acc {
		VMOVUPS(a, Mem{Base: dw})
		if i < len(acc)-1 {
			ADDQ(ldw, dw)
		}
	}
	VZEROUPPER()
	RET()
}

func main() {
	ConstraintExpr("!purego")
	for _, v := range []int{1, 2} {
		for _, r := range tileRows {
			convTile(r, v)
		}
	}
	for _, v := range []int{1, 2} {
		for _, c := range filtChannels[v-1] {
			filtTile(c, v)
		}
	}
	for p := 1; p <= 9; p++ {
		stemTile(3, p)
	}
	for p := 1; p <= stemPairs; p++ {
		stemTile(1, p)
	}
	moments()
	sums()
	for _, t := range wgTransforms {
		wgTransform(t.name, t.doc, t.m)
	}
	Generate()
}

func convTile(rows, nv int) {
	name := fmt.Sprintf("convTile512r%dv%d", rows, nv)
	TEXT(name, NOSPLIT, "func(y, x, w *float32, xoff, woff *int, taps, cin, xstride, ldw, ldy int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets y[r·ldy + j] = Σ_{t < taps, c < cin} x[xoff[t]/4 + r·xstride + c]·w[woff[t]/4 + c·ldw + j]", name),
		fmt.Sprintf("for r < %d and j < %d (xoff, woff in bytes; strides in floats; cin >= 1), summing", rows, 16*nv),
		"over taps, then channels, in order.")
	y, x, w := Load(Param("y"), reg.RDI), Load(Param("x"), reg.RSI), Load(Param("w"), reg.RDX)
	xoff, woff := Load(Param("xoff"), reg.R8), Load(Param("woff"), reg.R9)
	taps, cin := Load(Param("taps"), reg.R10), Load(Param("cin"), reg.R11)
	xstride, ldw, ldy := Load(Param("xstride"), reg.R12), Load(Param("ldw"), reg.R13), Load(Param("ldy"), reg.R14)
	for _, r := range []reg.Register{xstride, ldw, ldy} {
		SHLQ(U8(2), r)
	}
	xp, wp, p, c := reg.RAX, reg.RBX, reg.RCX, reg.R15
	acc := make([][]reg.VecPhysical, rows)
	zs := []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7, reg.Z8, reg.Z9, reg.Z10, reg.Z11,
		reg.Z12, reg.Z13, reg.Z14, reg.Z15, reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23}
	for r := range acc {
		acc[r] = zs[r*nv : r*nv+nv]
		for _, a := range acc[r] {
			VXORPS(a, a, a)
		}
	}
	b := []reg.VecPhysical{reg.Z28, reg.Z29}
	Label("tap")
	CMPQ(taps, U8(0))
	JE(LabelRef("store"))
	MOVQ(Mem{Base: xoff}, xp)
	ADDQ(x, xp)
	MOVQ(Mem{Base: woff}, wp)
	ADDQ(w, wp)
	MOVQ(cin, c)
	Label("channel")
	for v := 0; v < nv; v++ {
		VMOVUPS(Mem{Base: wp, Disp: 64 * v}, b[v])
	}
	MOVQ(xp, p)
	for r := 0; r < rows; r++ {
		for v := 0; v < nv; v++ {
			VFMADD231PS_BCST(Mem{Base: p}, b[v], acc[r][v])
		}
		if r < rows-1 {
			ADDQ(xstride, p)
		}
	}
	ADDQ(U8(4), xp)
	ADDQ(ldw, wp)
	DECQ(c)
	JNZ(LabelRef("channel"))
	ADDQ(U8(8), xoff)
	ADDQ(U8(8), woff)
	DECQ(taps)
	JMP(LabelRef("tap"))
	Label("store")
	for r := 0; r < rows; r++ {
		for v := 0; v < nv; v++ {
			VMOVUPS(acc[r][v], Mem{Base: y, Disp: 64 * v})
		}
		if r < rows-1 {
			ADDQ(ldy, y)
		}
	}
	VZEROUPPER()
	RET()
}

// loadSums and storeSums move a block of the column sums, 16 channels
// of s1 and of s2 as float64, into a1, b1 and a2, b2 and back (storeSums
// then steps s1 and s2 to the next block).
func loadSums(s1, s2 reg.Register, a1, b1, a2, b2 reg.VecPhysical) {
	VMOVUPD(Mem{Base: s1}, a1)
	VMOVUPD(Mem{Base: s1, Disp: 64}, b1)
	VMOVUPD(Mem{Base: s2}, a2)
	VMOVUPD(Mem{Base: s2, Disp: 64}, b2)
}

func storeSums(s1, s2 reg.Register, a1, b1, a2, b2 reg.VecPhysical) {
	VMOVUPD(a1, Mem{Base: s1})
	VMOVUPD(b1, Mem{Base: s1, Disp: 64})
	VMOVUPD(a2, Mem{Base: s2})
	VMOVUPD(b2, Mem{Base: s2, Disp: 64})
	ADDQ(U8(128), s1)
	ADDQ(U8(128), s2)
}

// widen converts the 16 float32s of v to float64s in lo and hi.
func widen(v, lo, hi reg.VecPhysical) {
	VCVTPS2PD(v.AsY(), lo)
	VEXTRACTF32X8(U8(1), v, hi.AsY())
	VCVTPS2PD(hi.AsY(), hi)
}

// sumSets is the rows' sets of sums that moments512 and sums512 keep
// apart: row r adds into set r mod sumSets, and the sets add up as (0 + 1)
// + (2 + 3) at the end. Four chains of additions instead of one: a row's
// additions no longer wait on the row before's.
const sumSets = 4

// quadLoop emits the row loop of moments512 and sums512 over r rows from
// the pointers ps (each stepped by stride bytes a row), row k of each four
// running body(k) into set k; the last rows mod 4 run into sets 0, 1 and
// 2.
func quadLoop(r reg.Register, ps []reg.Register, stride reg.Register, body func(k int)) {
	Label("quad")
	CMPQ(r, U8(sumSets))
	JL(LabelRef("tail"))
	for k := 0; k < sumSets; k++ {
		body(k)
		if k < sumSets-1 {
			for _, p := range ps {
				ADDQ(stride, p)
			}
		}
	}
	for _, p := range ps {
		ADDQ(stride, p)
	}
	SUBQ(U8(sumSets), r)
	JMP(LabelRef("quad"))
	Label("tail")
	for k := 0; k < sumSets-1; k++ {
		TESTQ(r, r)
		JZ(LabelRef("done"))
		body(k)
		for _, p := range ps {
			ADDQ(stride, p)
		}
		DECQ(r)
	}
	Label("done")
}

// foldSets adds sets 1-3 of each sum into set 0 as (0 + 1) + (2 + 3).
func foldSets(acc [sumSets][4]reg.VecPhysical) {
	for i := 0; i < 4; i++ {
		VADDPD(acc[1][i], acc[0][i], acc[0][i])
		VADDPD(acc[3][i], acc[2][i], acc[2][i])
		VADDPD(acc[2][i], acc[0][i], acc[0][i])
	}
}

// startSets loads set 0 of the sums from s1 and s2 and clears sets 1-3.
func startSets(s1, s2 reg.Register, acc [sumSets][4]reg.VecPhysical) {
	loadSums(s1, s2, acc[0][0], acc[0][1], acc[0][2], acc[0][3])
	for k := 1; k < sumSets; k++ {
		for i := 0; i < 4; i++ {
			VXORPD(acc[k][i], acc[k][i], acc[k][i])
		}
	}
}

// endSets adds up the sets and stores them (foldSets, storeSums), steps
// the block's two input pointers a and b to the next 16 channels, and
// loops to "block" while blocks remain; then returns.
func endSets(s1, s2 reg.Register, acc [sumSets][4]reg.VecPhysical, a, b, blocks reg.Register) {
	foldSets(acc)
	storeSums(s1, s2, acc[0][0], acc[0][1], acc[0][2], acc[0][3])
	ADDQ(U8(64), a)
	ADDQ(U8(64), b)
	DECQ(blocks)
	JNZ(LabelRef("block"))
	VZEROUPPER()
	RET()
}

// sumRegs returns the accumulators: set k's a1, b1, a2, b2 from Z16 on.
func sumRegs() (acc [sumSets][4]reg.VecPhysical) {
	zs := []reg.VecPhysical{reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23,
		reg.Z24, reg.Z25, reg.Z26, reg.Z27, reg.Z28, reg.Z29, reg.Z30, reg.Z31}
	for k := range acc {
		for i := range acc[k] {
			acc[k][i] = zs[4*k+i]
		}
	}
	return acc
}

func moments() {
	TEXT("moments512", NOSPLIT, "func(s1, s2 *float64, x, shift *float32, rows, stride, blocks int)")
	Pragma("noescape")
	Doc("moments512 adds, for j < 16·blocks, Σ_{r < rows} d and Σ d·d in float64, d = x[r·stride + j] - shift[j]",
		"(in float32), to s1[j] and s2[j]: row r into set r mod 4 of the sums, set 0 starting from s1 and s2,",
		"the sets added as (0 + 1) + (2 + 3) (rows >= 1; stride in floats).")
	s1, s2 := Load(Param("s1"), reg.RDI), Load(Param("s2"), reg.RSI)
	x, shift := Load(Param("x"), reg.RDX), Load(Param("shift"), reg.R8)
	rows, stride, blocks := Load(Param("rows"), reg.R9), Load(Param("stride"), reg.R10), Load(Param("blocks"), reg.R11)
	SHLQ(U8(2), stride)
	p, r := reg.RAX, reg.RCX
	sh := reg.Z0
	tmp := [sumSets][3]reg.VecPhysical{{reg.Z1, reg.Z2, reg.Z3}, {reg.Z4, reg.Z5, reg.Z6}, {reg.Z7, reg.Z8, reg.Z9}, {reg.Z10, reg.Z11, reg.Z12}}
	acc := sumRegs()
	Label("block")
	startSets(s1, s2, acc)
	VMOVUPS(Mem{Base: shift}, sh)
	MOVQ(x, p)
	MOVQ(rows, r)
	quadLoop(r, []reg.Register{p}, stride, func(k int) {
		v, lo, hi := tmp[k][0], tmp[k][1], tmp[k][2]
		a := acc[k]
		VMOVUPS(Mem{Base: p}, v)
		VSUBPS(sh, v, v) // v = x - shift
		widen(v, lo, hi)
		VADDPD(lo, a[0], a[0])
		VADDPD(hi, a[1], a[1])
		VFMADD231PD(lo, lo, a[2])
		VFMADD231PD(hi, hi, a[3])
	})
	endSets(s1, s2, acc, x, shift, blocks)
}

func sums() {
	TEXT("sums512", NOSPLIT, "func(s1, s2 *float64, dy, x *float32, rows, stride, blocks int)")
	Pragma("noescape")
	Doc("sums512 adds, for j < 16·blocks, Σ_{r < rows} dy[r·stride + j] and Σ dy·x (each product in float64)",
		"to s1[j] and s2[j] in float64: row r into set r mod 4 of the sums, set 0 starting from s1 and s2,",
		"the sets added as (0 + 1) + (2 + 3) (rows >= 1; stride in floats).")
	s1, s2 := Load(Param("s1"), reg.RDI), Load(Param("s2"), reg.RSI)
	g, x := Load(Param("dy"), reg.RDX), Load(Param("x"), reg.R8) // (g names a register in Go assembly)
	rows, stride, blocks := Load(Param("rows"), reg.R9), Load(Param("stride"), reg.R10), Load(Param("blocks"), reg.R11)
	SHLQ(U8(2), stride)
	gp, xp, r := reg.RAX, reg.RBX, reg.RCX
	// two rows' temporaries, taken in turn
	tmp := [2][6]reg.VecPhysical{{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5}, {reg.Z6, reg.Z7, reg.Z8, reg.Z9, reg.Z10, reg.Z11}}
	acc := sumRegs()
	Label("block")
	startSets(s1, s2, acc)
	MOVQ(g, gp)
	MOVQ(x, xp)
	MOVQ(rows, r)
	quadLoop(r, []reg.Register{gp, xp}, stride, func(k int) {
		t := tmp[k%2]
		v, w, glo, ghi, xlo, xhi := t[0], t[1], t[2], t[3], t[4], t[5]
		a := acc[k]
		VMOVUPS(Mem{Base: gp}, v)
		VMOVUPS(Mem{Base: xp}, w)
		widen(v, glo, ghi)
		widen(w, xlo, xhi)
		VADDPD(glo, a[0], a[0])
		VADDPD(ghi, a[1], a[1])
		VFMADD231PD(glo, xlo, a[2])
		VFMADD231PD(ghi, xhi, a[3])
	})
	endSets(s1, s2, acc, g, x, blocks)
}

// wgTransforms are Winograd's transforms, each applied on both sides of a
// tile (out = M·in·Mᵀ): F(2,3)'s, then F(4,3)'s; winograd.go holds the
// same matrices.
var wgTransforms = []struct {
	name, doc string
	m         [][]int
}{
	{"wgBT512", "Bᵀ·d·B (4×4 to 4×4)", [][]int{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}},
	{"wgAT512", "Aᵀ·m·A (4×4 to 2×2)", [][]int{{1, 1, 1, 0}, {0, 1, -1, -1}}},
	{"wgA512", "A'·w·A'ᵀ (2×2 to 4×4)", [][]int{{1, 0}, {1, 1}, {1, -1}, {0, 1}}},
	{"wg4BT512", "Bᵀ·d·B of F(4,3) (6×6 to 6×6)", [][]int{
		{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
		{0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}}},
	{"wg4AT512", "Aᵀ·m·A of F(4,3) (6×6 to 4×4)", [][]int{
		{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}},
	{"wg4A512", "A·w·Aᵀ of F(4,3) (4×4 to 6×6)", [][]int{
		{1, 0, 0, 0}, {1, 1, 1, 1}, {1, -1, 1, -1}, {1, 2, 4, 8}, {1, -2, 4, -8}, {0, 0, 0, 1}}},
}

// wgTransform writes name: out = M·in·Mᵀ for tiles of 16-channel vectors,
// over blocks blocks of 16 channels, for tiles tiles. in[a][b] lies at
// in + a·irow + b·icol floats, out[i][j] at out + i·orow + j·ocol; after a
// tile's blocks, in and out move on by inext and onext bytes (the Go side
// passes a tile's stride less the blocks' 64·blocks). Each row of M is one
// sum: its first positive term, then the others in order, added or
// subtracted (a coefficient c other than ±1 multiplies first: a power of
// two in a fused multiply-add, exact as the product is, any other in a
// product of its own, so that the Go side's float32 operations give the
// same bits). M·in stays in registers where they hold it (F(2,3)), else
// it goes through the stack a column at a time.
func wgTransform(name, doc string, m [][]int) {
	r, p := len(m), len(m[0]) // out is r×r, in p×p
	var mags []int            // the coefficients' magnitudes other than 1
	for _, row := range m {
		for _, c := range row {
			if a := abs(c); a > 1 && !slices.Contains(mags, a) {
				mags = append(mags, a)
			}
		}
	}
	// M·in in registers needs r·p of them beside a column (four), four
	// results, a spare for a product and the coefficients; else it goes
	// through the stack (a frame too large for NOSPLIT)
	spill := 4+r*p+5+len(mags) > 32
	flags := NOSPLIT
	if spill {
		flags = 0
	}
	TEXT(name, flags, "func(out, in *float32, orow, ocol, irow, icol, blocks, tiles, onext, inext int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets, for 16·blocks channels of tiles tiles, out = %s:", name, doc),
		"in[a][b] at in + a·irow + b·icol, out[i][j] at out + i·orow + j·ocol (strides in",
		"floats); after each tile, in and out move on by inext and onext bytes past its blocks.")
	out, in := Load(Param("out"), reg.RDI), Load(Param("in"), reg.RSI)
	orow, ocol := Load(Param("orow"), reg.R8), Load(Param("ocol"), reg.R9)
	irow, icol := Load(Param("irow"), reg.R10), Load(Param("icol"), reg.R11)
	tiles := Load(Param("tiles"), reg.R12)
	for _, s := range []reg.Register{orow, ocol, irow, icol} {
		SHLQ(U8(2), s)
	}
	ip, op, tmp, bc := reg.R13, reg.R14, reg.RAX, reg.RBX
	// column j of a row at base: 0, c, 2c, 4c, and 3c = (base + c) + 2c,
	// 5c = (base + c) + 4c
	at := func(base, c reg.Register, j int) Mem {
		switch j {
		case 0:
			return Mem{Base: base}
		case 1, 2, 4:
			return Mem{Base: base, Index: c, Scale: uint8(j)}
		case 3:
			LEAQ(Mem{Base: base, Index: c, Scale: 1}, tmp)
			return Mem{Base: tmp, Index: c, Scale: 2}
		case 5:
			LEAQ(Mem{Base: base, Index: c, Scale: 1}, tmp)
			return Mem{Base: tmp, Index: c, Scale: 4}
		}
		panic("wgTransform: a tile wider than 6")
	}
	zs := []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7, reg.Z8, reg.Z9,
		reg.Z10, reg.Z11, reg.Z12, reg.Z13, reg.Z14, reg.Z15, reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20,
		reg.Z21, reg.Z22, reg.Z23, reg.Z24, reg.Z25, reg.Z26, reg.Z27, reg.Z28, reg.Z29, reg.Z30, reg.Z31}
	// the coefficients other than ±1, broadcast into the last registers
	k := wgConsts{}
	next := len(zs) - 1
	for _, a := range mags {
		k = append(k, wgConst{a, zs[next]})
		MOVL(U32(math.Float32bits(float32(a))), tmp.As32())
		VPBROADCASTD(tmp.As32(), zs[next])
		next--
	}
	col := zs[0:p]                                             // one column of in
	t := func(i, b int) reg.VecPhysical { return zs[4+i*p+b] } // (M·in)[i][b]
	res, spare := zs[next-3:next+1], zs[next-4]                // the results
	var local Mem
	if spill {
		local = AllocLocal(64 * r * p)
		t = func(i, _ int) reg.VecPhysical { return zs[p+i] }
		res, spare = zs[p+r:p+r+4], zs[p+r+4]
	}
	tslot := func(i, b int) Mem { return local.Offset(64 * (i*p + b)) }
	Label("tile")
	Load(Param("blocks"), bc)
	Label("block")
	// the first pass, a column at a time: t[i][b] = Σ_a m[i][a]·in[a][b]
	for b := 0; b < p; b++ {
		MOVQ(in, ip)
		for a := 0; a < p; a++ {
			VMOVUPS(at(ip, icol, b), col[a])
			if a < p-1 {
				ADDQ(irow, ip)
			}
		}
		for i := 0; i < r; i++ {
			v := wgCombine(m[i], col, t(i, b), spare, k, true)
			if spill {
				VMOVUPS(v, tslot(i, b))
			}
		}
	}
	// the second pass, a row at a time: out[i][j] = Σ_b m[j][b]·t[i][b]
	MOVQ(out, op)
	for i := 0; i < r; i++ {
		row := make([]reg.VecPhysical, p)
		for b := range row {
			if spill {
				row[b] = col[b]
				VMOVUPS(tslot(i, b), row[b])
				continue
			}
			row[b] = t(i, b)
		}
		for j := 0; j < r; j++ {
			v := wgCombine(m[j], row, res[j%4], spare, k, false)
			VMOVUPS(v, at(op, ocol, j))
		}
		if i < r-1 {
			ADDQ(orow, op)
		}
	}
	ADDQ(U8(64), in)
	ADDQ(U8(64), out)
	DECQ(bc)
	JNZ(LabelRef("block"))
	Load(Param("inext"), tmp)
	ADDQ(tmp, in)
	Load(Param("onext"), tmp)
	ADDQ(tmp, out)
	DECQ(tiles)
	JNZ(LabelRef("tile"))
	VZEROUPPER()
	RET()
}

// wgConst is a coefficient's magnitude broadcast into a register.
type wgConst struct {
	c int
	z reg.VecPhysical
}

type wgConsts []wgConst

// reg returns the register that holds c, or nil.
func (k wgConsts) reg(c int) reg.VecPhysical {
	for _, x := range k {
		if x.c == c {
			return x.z
		}
	}
	return nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// wgCombine sets dst = Σ_k c[k]·v[k]: the first positive term, then the
// others in order, each added or subtracted; a coefficient c other than
// ±1 multiplies its term first (by the register k holds for |c|): in a
// fused multiply-add where |c| is a power of two (the product is exact),
// else into spare before the add. It returns the register that holds the
// sum: dst, or, for a single term of coefficient 1 without copy, that
// term's.
func wgCombine(c []int, v []reg.VecPhysical, dst, spare reg.VecPhysical, k wgConsts, copy bool) reg.VecPhysical {
	first := -1
	for i, x := range c {
		if x > 0 {
			first = i
			break
		}
	}
	if first < 0 {
		panic("wgCombine: a row without a positive term")
	}
	acc := v[first]
	if c[first] > 1 {
		VMULPS(v[first], k.reg(c[first]), dst)
		acc = dst
	}
	for i, x := range c {
		if i == first || x == 0 {
			continue
		}
		a := abs(x)
		switch {
		case a == 1 && x > 0:
			VADDPS(v[i], acc, dst)
		case a == 1:
			VSUBPS(v[i], acc, dst)
		case a&(a-1) == 0: // a power of two: acc ± a·v exactly
			if acc != dst {
				VMOVAPS(acc, dst)
			}
			if x > 0 {
				VFMADD231PS(v[i], k.reg(a), dst)
			} else {
				VFNMADD231PS(v[i], k.reg(a), dst)
			}
		default:
			VMULPS(v[i], k.reg(a), spare)
			if x > 0 {
				VADDPS(spare, acc, dst)
			} else {
				VSUBPS(spare, acc, dst)
			}
		}
		acc = dst
	}
	if acc != dst && copy {
		VMOVAPS(acc, dst)
		acc = dst
	}
	return acc
}
