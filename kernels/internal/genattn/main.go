// Command genattn writes kernels/attention_amd64.s and its Go declarations:
// the row operations of the attention kernels (attention_rows.go) in
// AVX-512 (sixteen lanes, a k-mask for the last partial vector) and in
// AVX2+FMA (eight lanes, VMASKMOVPS for the last partial vector), with avo
// (github.com/mmcloughlin/avo).
//
//   - attnMax: the largest of n floats (n >= 1).
//   - attnExp: p[j] = e^(p[j] - sub) for j < n, and their sum.
//   - attnDS: ds[j] = p[j]·(ds[j] - di), the softmax gradient of a row.
//   - attnMask512: p[j] = -Inf where the boolean mask m[j] is 0.
//   - attnDrop512: p[j] *= Z_j, the dropout mask of DropoutMask
//     (SplitMix64's finalizer of x0 + j·step), eight 64-bit lanes at a
//     time with AVX512DQ's VPMULLQ.
//
// e^x is Cody and Waite's reduction x = n·ln 2 + r, |r| <= ln 2 / 2, with
// ln 2 split in two (C1 + C2), and Cephes' degree-5 minimax polynomial for
// (e^r - 1 - r)/r² (S. Moshier, Cephes Math Library, expf.c): within about
// one ulp of e^x for normal results. The argument is clamped to
// [-104, 89] first (NaN passes), so e^-Inf is +0, e^+Inf is +Inf and
// results below the smallest float32 round to subnormals or 0. AVX-512
// scales by 2^n with VSCALEFPS; AVX2 multiplies by 2^⌊n/2⌋ and 2^⌈n/2⌉
// built in the exponent bits, which covers the same range.
//
// Sums are accumulated lane-wise in vector order and then reduced by
// halving the vector, so a row's sum is the same on every call.
//
//	go run ./internal/genattn -out attention_amd64.s -stubs attention_stub_amd64.go -pkg kernels
package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The constants of e^x.
const (
	expLo = -104.0 // e^-104 < 2^-150: rounds to +0
	expHi = 89.0   // e^89 > MaxFloat32: +Inf
	log2e = 1.44269504088896341
	expC1 = 0.693359375     // ln 2 = C1 + C2, C1 exact in 9 bits
	expC2 = -2.12194440e-4  // ln 2 - C1
	expP0 = 1.9875691500e-4 // Cephes expf.c, highest degree first
	expP1 = 1.3981999507e-3
	expP2 = 8.3334519073e-3
	expP3 = 4.1665795894e-2
	expP4 = 1.6666665459e-1
	expP5 = 5.0000001201e-1
)

// expConsts names the constants of e^x, in a fixed order (the generated
// file must not depend on map order).
var expConsts = []struct {
	name string
	v    float32
}{
	{"lo", expLo}, {"hi", expHi}, {"log2e", log2e}, {"c1", expC1}, {"c2", expC2},
	{"p0", expP0}, {"p1", expP1}, {"p2", expP2}, {"p3", expP3}, {"p4", expP4}, {"p5", expP5}, {"one", 1},
}

func main() {
	ConstraintExpr("!purego")
	// vector tables for the AVX2 loops (memory operands, sixteen ymm
	// registers being too few to hold every constant)
	ymmConst = map[string]Mem{}
	for _, k := range expConsts {
		ymmConst[k.name] = vectorTable("attnf32_"+k.name, math.Float32bits(k.v))
	}
	ymmConst["bias"] = vectorTable("attni32_bias", 127)
	iota8 := GLOBL("attni32_iota", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(i))
	}
	ymmConst["iota"] = iota8
	iota64 = GLOBL("attni64_iota", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(8*i, U64(i))
	}

	max512()
	exp512()
	ds512()
	drop512()
	mask512()
	maxAVX2()
	expAVX2()
	dsAVX2()
	Generate()
}

var (
	ymmConst map[string]Mem
	iota64   Mem // 0, 1, ..., 7 in 64-bit lanes
)

// vectorTable declares a 32-byte table of eight copies of the 32-bit word v.
func vectorTable(name string, v uint32) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(v))
	}
	return m
}

// bcast512 returns a zmm register holding v in every lane. (The constant
// is stored as its bits: the assembler reads no -Inf.)
func bcast512(name string, v float32) reg.VecVirtual {
	m, ok := scalars[name]
	if !ok {
		m = ConstData("attn512_"+name, U32(math.Float32bits(v)))
		scalars[name] = m
	}
	z := ZMM()
	VBROADCASTSS(m, z)
	return z
}

// scalars are the 4-byte constants declared so far, by name.
var scalars = map[string]Mem{}

// tailMask512 sets k to the low n bits (1 <= n <= 15 in the register).
func tailMask512(n reg.Register, k reg.OpmaskPhysical) {
	t, ones := GP64(), GP64()
	MOVQ(I32(-1), ones)
	BZHIQ(n, ones, t)
	KMOVW(t.As32(), k)
}

// reduce512 combines the sixteen lanes of acc with op (VMAXPS or VADDPS) by
// halving, into lane 0 of the result's low xmm.
func reduce512(acc reg.VecVirtual, op func(a, b, d Op)) reg.VecVirtual {
	t := ZMM()
	VSHUFF32X4(U8(0x4e), acc, acc, t) // swap 256-bit halves
	op(t, acc, acc)
	VSHUFF32X4(U8(0xb1), acc, acc, t) // swap 128-bit quarters in each half
	op(t, acc, acc)
	VPERMILPS(U8(0x4e), acc, t) // swap 64-bit pairs
	op(t, acc, acc)
	VPERMILPS(U8(0xb1), acc, t) // swap neighbours
	op(t, acc, acc)
	return acc
}

func max512() {
	TEXT("attnMax512", NOSPLIT, "func(p *float32, n int) float32")
	Pragma("noescape")
	Doc("attnMax512 returns the largest of p[j], j < n (n >= 1).")
	p, n := Load(Param("p"), GP64()), Load(Param("n"), GP64())
	acc := bcast512("neginf", float32(math.Inf(-1)))
	Label("loop")
	CMPQ(n, U8(16))
	JL(LabelRef("tail"))
	VMAXPS(Mem{Base: p}, acc, acc)
	ADDQ(U8(64), p)
	SUBQ(U8(16), n)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("reduce"))
	tailMask512(n, reg.K1)
	v := ZMM()
	VMOVUPS_Z(Mem{Base: p}, reg.K1, v)
	VMAXPS(v, acc, reg.K1, acc)
	Label("reduce")
	r := reduce512(acc, func(a, b, d Op) { VMAXPS(a, b, d) })
	VZEROUPPER()
	Store(r.AsX(), ReturnIndex(0))
	RET()
}

// exp512Body sets e = e^(x - sub) lane-wise (x is overwritten), zeroing the
// lanes outside k when k is not nil.
func exp512Body(x, e reg.VecVirtual, c map[string]reg.VecVirtual, k Op) {
	nv, z, y := ZMM(), ZMM(), ZMM()
	VSUBPS(c["sub"], x, x)
	VMAXPS(x, c["lo"], x) // lo > x ? lo : x, so NaN stays
	VMINPS(x, c["hi"], x)
	VMULPS(c["log2e"], x, nv)
	VRNDSCALEPS(U8(0), nv, nv) // n = round(x·log2 e), nearest even
	VFNMADD231PS(c["c1"], nv, x)
	VFNMADD231PS(c["c2"], nv, x) // r = x - n·C1 - n·C2
	VMULPS(x, x, z)
	VMOVAPS(c["p0"], y)
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5"} {
		VFMADD213PS(c[p], x, y) // y = y·r + p
	}
	VFMADD213PS(x, z, y) // y = y·r² + r
	VADDPS(c["one"], y, y)
	if k == nil {
		VSCALEFPS(nv, y, e) // e = y·2^n
	} else {
		VSCALEFPS_Z(nv, y, k, e)
	}
}

func exp512() {
	TEXT("attnExp512", NOSPLIT, "func(p *float32, n int, sub float32) float32")
	Pragma("noescape")
	Doc("attnExp512 sets p[j] = e^(p[j] - sub) for j < n and returns their sum.")
	p, n := Load(Param("p"), GP64()), Load(Param("n"), GP64())
	c := map[string]reg.VecVirtual{}
	c["sub"] = ZMM()
	VBROADCASTSS(Load(Param("sub"), XMM()), c["sub"])
	for _, k := range expConsts {
		c[k.name] = bcast512(k.name, k.v)
	}
	acc := ZMM()
	VXORPS(acc, acc, acc)
	// two vectors at a time, whose long dependency chains then overlap;
	// the sum adds them in order, as one vector at a time would
	Label("loop2")
	CMPQ(n, U8(32))
	JL(LabelRef("loop"))
	x0, e0, x1, e1 := ZMM(), ZMM(), ZMM(), ZMM()
	VMOVUPS(Mem{Base: p}, x0)
	VMOVUPS(Mem{Base: p, Disp: 64}, x1)
	exp512Body(x0, e0, c, nil)
	exp512Body(x1, e1, c, nil)
	VMOVUPS(e0, Mem{Base: p})
	VMOVUPS(e1, Mem{Base: p, Disp: 64})
	VADDPS(e0, acc, acc)
	VADDPS(e1, acc, acc)
	ADDQ(U8(128), p)
	SUBQ(U8(32), n)
	JMP(LabelRef("loop2"))
	Label("loop")
	CMPQ(n, U8(16))
	JL(LabelRef("tail"))
	x, e := ZMM(), ZMM()
	VMOVUPS(Mem{Base: p}, x)
	exp512Body(x, e, c, nil)
	VMOVUPS(e, Mem{Base: p})
	VADDPS(e, acc, acc)
	ADDQ(U8(64), p)
	SUBQ(U8(16), n)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("reduce"))
	tailMask512(n, reg.K1)
	xt, et := ZMM(), ZMM()
	VMOVUPS_Z(Mem{Base: p}, reg.K1, xt)
	exp512Body(xt, et, c, reg.K1)
	VMOVUPS(et, reg.K1, Mem{Base: p})
	VADDPS(et, acc, acc)
	Label("reduce")
	r := reduce512(acc, func(a, b, d Op) { VADDPS(a, b, d) })
	VZEROUPPER()
	Store(r.AsX(), ReturnIndex(0))
	RET()
}

func ds512() {
	TEXT("attnDS512", NOSPLIT, "func(ds, p *float32, n int, di float32)")
	Pragma("noescape")
	Doc("attnDS512 sets ds[j] = p[j]·(ds[j] - di) for j < n.")
	ds, p, n := Load(Param("ds"), GP64()), Load(Param("p"), GP64()), Load(Param("n"), GP64())
	div := ZMM()
	VBROADCASTSS(Load(Param("di"), XMM()), div)
	Label("loop")
	CMPQ(n, U8(16))
	JL(LabelRef("tail"))
	x := ZMM()
	VMOVUPS(Mem{Base: ds}, x)
	VSUBPS(div, x, x)
	VMULPS(Mem{Base: p}, x, x)
	VMOVUPS(x, Mem{Base: ds})
	ADDQ(U8(64), ds)
	ADDQ(U8(64), p)
	SUBQ(U8(16), n)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	tailMask512(n, reg.K1)
	xt, pt := ZMM(), ZMM()
	VMOVUPS_Z(Mem{Base: ds}, reg.K1, xt)
	VMOVUPS_Z(Mem{Base: p}, reg.K1, pt)
	VSUBPS(div, xt, xt)
	VMULPS(pt, xt, xt)
	VMOVUPS(xt, reg.K1, Mem{Base: ds})
	Label("done")
	VZEROUPPER()
	RET()
}

// mix64 applies SplitMix64's finalizer to the eight lanes of z, with t as
// scratch and c1, c2 its multipliers.
func mix64(z, t, c1, c2 reg.VecVirtual) {
	VPSRLQ(U8(30), z, t)
	VPXORQ(t, z, z)
	VPMULLQ(c1, z, z)
	VPSRLQ(U8(27), z, t)
	VPXORQ(t, z, z)
	VPMULLQ(c2, z, z)
	VPSRLQ(U8(31), z, t)
	VPXORQ(t, z, z)
}

// bcastQ returns a zmm register holding the 64-bit v in every lane.
func bcastQ(v reg.Register) reg.VecVirtual {
	z := ZMM()
	VPBROADCASTQ(v, z)
	return z
}

func drop512() {
	TEXT("attnDrop512", NOSPLIT, "func(p *float32, n int, x0, step, threshold uint64, keep float32)")
	Pragma("noescape")
	Doc("attnDrop512 multiplies p[j], j < n, by 0 where mix64(x0 + j·step)>>11 < threshold",
		"and by keep elsewhere (DropoutMask's draw).")
	p, n := Load(Param("p"), GP64()), Load(Param("n"), GP64())
	step := Load(Param("step"), GP64())
	x0 := bcastQ(Load(Param("x0"), GP64()))
	thr := bcastQ(Load(Param("threshold"), GP64()))
	keep := ZMM()
	VBROADCASTSS(Load(Param("keep"), XMM()), keep)
	c := GP64()
	MOVQ(U64(0xbf58476d1ce4e5b9), c)
	c1 := bcastQ(c)
	MOVQ(U64(0x94d049bb133111eb), c)
	c2 := bcastQ(c)
	// xa: x0 + l·step for lanes l < 8; xb: the next eight; inc: 16·step
	steps := bcastQ(step)
	xa, xb, inc := ZMM(), ZMM(), ZMM()
	VPMULLQ(iota64, steps, xa)
	VPADDQ(x0, xa, xa)
	VPSLLQ(U8(3), steps, inc)
	VPADDQ(inc, xa, xb)
	VPSLLQ(U8(1), inc, inc)
	ha, hb, t, v := ZMM(), ZMM(), ZMM(), ZMM()
	hash := func() { // K3 = the lanes kept, of xa (low byte) and xb
		VMOVDQA64(xa, ha)
		VMOVDQA64(xb, hb)
		mix64(ha, t, c1, c2)
		mix64(hb, t, c1, c2)
		VPSRLQ(U8(11), ha, ha)
		VPSRLQ(U8(11), hb, hb)
		VPCMPUQ(U8(5), thr, ha, reg.K1) // ha >= threshold: kept
		VPCMPUQ(U8(5), thr, hb, reg.K2)
		KUNPCKBW(reg.K1, reg.K2, reg.K3) // K3 = K2 << 8 | K1
	}
	Label("loop")
	CMPQ(n, U8(16))
	JL(LabelRef("tail"))
	hash()
	VMULPS_Z(Mem{Base: p}, keep, reg.K3, v)
	VMOVUPS(v, Mem{Base: p})
	VPADDQ(inc, xa, xa)
	VPADDQ(inc, xb, xb)
	ADDQ(U8(64), p)
	SUBQ(U8(16), n)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	hash()
	tailMask512(n, reg.K4)
	KANDW(reg.K4, reg.K3, reg.K3)
	VMOVUPS_Z(Mem{Base: p}, reg.K4, v)
	VMULPS_Z(v, keep, reg.K3, v)
	VMOVUPS(v, reg.K4, Mem{Base: p})
	Label("done")
	VZEROUPPER()
	RET()
}

func mask512() {
	TEXT("attnMask512", NOSPLIT, "func(p *float32, m *uint8, n int)")
	Pragma("noescape")
	Doc("attnMask512 sets p[j] = -Inf where m[j] == 0, for j < n.")
	p, m, n := Load(Param("p"), GP64()), Load(Param("m"), GP64()), Load(Param("n"), GP64())
	neg := bcast512("neginf", float32(math.Inf(-1)))
	v := ZMM()
	Label("loop")
	CMPQ(n, U8(16))
	JL(LabelRef("tail"))
	VPMOVZXBD(Mem{Base: m}, v)
	VPTESTNMD(v, v, reg.K1) // K1: m[j] == 0
	VMOVUPS(neg, reg.K1, Mem{Base: p})
	ADDQ(U8(64), p)
	ADDQ(U8(16), m)
	SUBQ(U8(16), n)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	tailMask512(n, reg.K2)
	VPMOVZXBD_Z(Mem{Base: m}, reg.K2, v) // reads only the tail's bytes
	VPTESTNMD(v, v, reg.K2, reg.K1)
	VMOVUPS(neg, reg.K1, Mem{Base: p})
	Label("done")
	VZEROUPPER()
	RET()
}

// tailMaskAVX2 returns a ymm register whose lanes l < n are all ones (n in
// 1..7 in the register).
func tailMaskAVX2(n reg.Register) reg.VecVirtual {
	m, x := YMM(), XMM()
	MOVQ(n, x)
	VPBROADCASTD(x, m)
	VPCMPGTD(ymmConst["iota"], m, m) // n > lane
	return m
}

// reduceAVX2 combines the eight lanes of acc with op by halving.
func reduceAVX2(acc reg.VecVirtual, op func(a, b, d Op)) reg.VecVirtual {
	t := YMM()
	VPERM2F128(U8(0x01), acc, acc, t) // swap 128-bit halves
	op(t, acc, acc)
	VPERMILPS(U8(0x4e), acc, t)
	op(t, acc, acc)
	VPERMILPS(U8(0xb1), acc, t)
	op(t, acc, acc)
	return acc
}

func maxAVX2() {
	TEXT("attnMaxAVX2", NOSPLIT, "func(p *float32, n int) float32")
	Pragma("noescape")
	Doc("attnMaxAVX2 returns the largest of p[j], j < n (n >= 1).")
	p, n := Load(Param("p"), GP64()), Load(Param("n"), GP64())
	acc := YMM()
	VBROADCASTSS(ConstData("attn256_neginf", U32(math.Float32bits(float32(math.Inf(-1))))), acc)
	Label("loop")
	CMPQ(n, U8(8))
	JL(LabelRef("tail"))
	VMAXPS(Mem{Base: p}, acc, acc)
	ADDQ(U8(32), p)
	SUBQ(U8(8), n)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("reduce"))
	m := tailMaskAVX2(n)
	v := YMM()
	VMASKMOVPS(Mem{Base: p}, m, v)
	VBLENDVPS(m, v, acc, v) // lanes past n: acc, which max leaves as is
	VMAXPS(v, acc, acc)
	Label("reduce")
	r := reduceAVX2(acc, func(a, b, d Op) { VMAXPS(a, b, d) })
	VZEROUPPER()
	Store(r.AsX(), ReturnIndex(0))
	RET()
}

// expAVX2Body sets e = e^(x - sub) lane-wise (x is overwritten); lo and hi
// hold the clamp's bounds (registers: the first source of VMAXPS, which it
// returns when the other is NaN, cannot be in memory).
func expAVX2Body(x, e, sub, lo, hi reg.VecVirtual) {
	c := ymmConst
	nv, z, y, n1, n2 := YMM(), YMM(), YMM(), YMM(), YMM()
	VSUBPS(sub, x, x)
	VMAXPS(x, lo, x)
	VMINPS(x, hi, x)
	VMULPS(c["log2e"], x, nv)
	VROUNDPS(U8(0), nv, nv)
	VFNMADD231PS(c["c1"], nv, x)
	VFNMADD231PS(c["c2"], nv, x)
	VMULPS(x, x, z)
	VMOVUPS(c["p0"], y)
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5"} {
		VFMADD213PS(c[p], x, y)
	}
	VFMADD213PS(x, z, y)
	VADDPS(c["one"], y, y)
	// 2^n = 2^n1 · 2^n2, n1 = n >> 1, n2 = n - n1, each a normal float
	VCVTPS2DQ(nv, nv)
	VPSRAD(U8(1), nv, n1)
	VPSUBD(n1, nv, n2)
	VPADDD(c["bias"], n1, n1)
	VPADDD(c["bias"], n2, n2)
	VPSLLD(U8(23), n1, n1)
	VPSLLD(U8(23), n2, n2)
	VMULPS(n1, y, y)
	VMULPS(n2, y, e)
}

func expAVX2() {
	TEXT("attnExpAVX2", NOSPLIT, "func(p *float32, n int, sub float32) float32")
	Pragma("noescape")
	Doc("attnExpAVX2 sets p[j] = e^(p[j] - sub) for j < n and returns their sum.")
	p, n := Load(Param("p"), GP64()), Load(Param("n"), GP64())
	sub, lo, hi := YMM(), YMM(), YMM()
	VBROADCASTSS(Load(Param("sub"), XMM()), sub)
	VMOVUPS(ymmConst["lo"], lo)
	VMOVUPS(ymmConst["hi"], hi)
	acc := YMM()
	VXORPS(acc, acc, acc)
	Label("loop")
	CMPQ(n, U8(8))
	JL(LabelRef("tail"))
	x, e := YMM(), YMM()
	VMOVUPS(Mem{Base: p}, x)
	expAVX2Body(x, e, sub, lo, hi)
	VMOVUPS(e, Mem{Base: p})
	VADDPS(e, acc, acc)
	ADDQ(U8(32), p)
	SUBQ(U8(8), n)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("reduce"))
	m := tailMaskAVX2(n)
	xt, et := YMM(), YMM()
	VMASKMOVPS(Mem{Base: p}, m, xt)
	expAVX2Body(xt, et, sub, lo, hi)
	VANDPS(m, et, et)
	VMASKMOVPS(et, m, Mem{Base: p})
	VADDPS(et, acc, acc)
	Label("reduce")
	r := reduceAVX2(acc, func(a, b, d Op) { VADDPS(a, b, d) })
	VZEROUPPER()
	Store(r.AsX(), ReturnIndex(0))
	RET()
}

func dsAVX2() {
	TEXT("attnDSAVX2", NOSPLIT, "func(ds, p *float32, n int, di float32)")
	Pragma("noescape")
	Doc("attnDSAVX2 sets ds[j] = p[j]·(ds[j] - di) for j < n.")
	ds, p, n := Load(Param("ds"), GP64()), Load(Param("p"), GP64()), Load(Param("n"), GP64())
	div := YMM()
	VBROADCASTSS(Load(Param("di"), XMM()), div)
	Label("loop")
	CMPQ(n, U8(8))
	JL(LabelRef("tail"))
	x := YMM()
	VMOVUPS(Mem{Base: ds}, x)
	VSUBPS(div, x, x)
	VMULPS(Mem{Base: p}, x, x)
	VMOVUPS(x, Mem{Base: ds})
	ADDQ(U8(32), ds)
	ADDQ(U8(32), p)
	SUBQ(U8(8), n)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	m := tailMaskAVX2(n)
	xt, pt := YMM(), YMM()
	VMASKMOVPS(Mem{Base: ds}, m, xt)
	VMASKMOVPS(Mem{Base: p}, m, pt)
	VSUBPS(div, xt, xt)
	VMULPS(pt, xt, xt)
	VMASKMOVPS(xt, m, Mem{Base: ds})
	Label("done")
	VZEROUPPER()
	RET()
}
