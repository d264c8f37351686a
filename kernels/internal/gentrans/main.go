// Command gentrans writes kernels/trans_amd64.s and its Go declarations:
// Sigmoid and Tanh over float32 in AVX-512 (sixteen lanes, two vectors a
// loop iteration, a k-mask for the last partial vector), with avo
// (github.com/mmcloughlin/avo).
//
//   - sigmoid512: y = 1/(1+e^-x) for x >= 0 and e^x/(1+e^x) below, from
//     e = e^-|x| (never e^|x|, which overflows), so large |x| saturates to
//     exactly 1 or 0.
//   - tanh512: for |x| < 0.625, Cephes' odd minimax polynomial
//     x + x·z·P(z), z = x² (S. Moshier, Cephes Math Library, tanhf.c),
//     with x's sign bit, which keeps tiny x and -0 exact; above, sign(x)·(1-e)/(1+e) with
//     e = e^-2|x| (at most 0.29 there, so 1-e loses nothing).
//
// e^a (a <= 0) is attention's (genattn): Cody and Waite's reduction with
// ln 2 split in two and Cephes' expf polynomial, scaled by 2^n with
// VSCALEFPS, the argument clamped below at -104 (where e^a rounds to +0);
// the clamp keeps NaN, and every formula passes it on. The quotients are
// VDIVPS, rounded once.
//
//	go run ./internal/gentrans -out trans_amd64.s -stubs trans_stub_amd64.go -pkg kernels
package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// consts are the constants the loops keep in registers, in a fixed order
// (the generated file must not depend on map order).
var consts = []struct {
	name string
	v    float32
}{
	// e^a
	{"lo", -104}, {"log2e", 1.44269504088896341}, {"c1", 0.693359375}, {"c2", -2.12194440e-4},
	{"p0", 1.9875691500e-4}, {"p1", 1.3981999507e-3}, {"p2", 8.3334519073e-3}, {"p3", 4.1665795894e-2},
	{"p4", 1.6666665459e-1}, {"p5", 5.0000001201e-1}, {"one", 1},
	// tanh: the polynomial (highest degree first), its bound, -2
	{"t0", -5.70498872745e-3}, {"t1", 2.06390887954e-2}, {"t2", -5.37397155531e-2},
	{"t3", 1.33314422036e-1}, {"t4", -3.33332819422e-1}, {"small", 0.625}, {"negtwo", -2},
	// |x| and the sign bit
	{"abs", math.Float32frombits(0x7fffffff)}, {"sign", math.Float32frombits(0x80000000)},
}

func main() {
	ConstraintExpr("!purego")
	unary("sigmoid512", "sigmoid512 sets dst[j] = 1/(1+e^-x[j]) for j < n.", sigmoid, append(expNames, "sign"))
	unary("tanh512", "tanh512 sets dst[j] = tanh x[j] for j < n.", tanh,
		append(expNames, "t0", "t1", "t2", "t3", "t4", "small", "negtwo", "abs", "sign"))
	Generate()
}

var scalars = map[string]Mem{}

// load broadcasts the named constants into zmm registers.
func load(names ...string) map[string]reg.VecVirtual {
	c := map[string]reg.VecVirtual{}
	for _, k := range consts {
		for _, n := range names {
			if n != k.name {
				continue
			}
			m, ok := scalars[n]
			if !ok {
				m = ConstData("trans512_"+k.name, U32(math.Float32bits(k.v)))
				scalars[n] = m
			}
			z := ZMM()
			VBROADCASTSS(m, z)
			c[k.name] = z
		}
	}
	return c
}

// expNames are the constants of e^a.
var expNames = []string{"lo", "log2e", "c1", "c2", "p0", "p1", "p2", "p3", "p4", "p5", "one"}

// exp sets e = e^a lane-wise for a <= 0 (a is overwritten).
func exp(a, e reg.VecVirtual, c map[string]reg.VecVirtual) {
	nv, z := ZMM(), ZMM()
	VMAXPS(a, c["lo"], a) // lo > a ? lo : a, so NaN stays
	VMULPS(c["log2e"], a, nv)
	VRNDSCALEPS(U8(0), nv, nv) // n = round(a·log2 e), nearest even
	VFNMADD231PS(c["c1"], nv, a)
	VFNMADD231PS(c["c2"], nv, a) // r = a - n·C1 - n·C2
	VMULPS(a, a, z)
	VMOVAPS(c["p0"], e)
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5"} {
		VFMADD213PS(c[p], a, e) // e = e·r + p
	}
	VFMADD213PS(a, z, e) // e·r² + r
	VADDPS(c["one"], e, e)
	VSCALEFPS(nv, e, e) // e·2^n
}

// sigmoid sets y = sigmoid(x) lane-wise.
func sigmoid(x, y reg.VecVirtual, c map[string]reg.VecVirtual) {
	a, e, d, s := ZMM(), ZMM(), ZMM(), ZMM()
	VORPS(c["sign"], x, a) // a = -|x|
	exp(a, e, c)
	VADDPS(c["one"], e, d)
	VDIVPS(d, c["one"], y)                 // 1/(1+e): x >= 0
	VDIVPS(d, e, s)                        // e/(1+e): x < 0
	VCMPPS(U8(0x11), c["zero"], x, reg.K2) // LT_OQ: x < 0 (not -0, not NaN)
	VBLENDMPS(s, y, reg.K2, y)
}

// tanh sets y = tanh x lane-wise.
func tanh(x, y reg.VecVirtual, c map[string]reg.VecVirtual) {
	ax, a, e, n, d, z, p := ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM()
	VANDPS(c["abs"], x, ax)
	VMULPS(c["negtwo"], ax, a)
	exp(a, e, c)
	VSUBPS(e, c["one"], n) // 1 - e
	VADDPS(c["one"], e, d) // 1 + e
	VDIVPS(d, n, y)
	VANDPS(c["sign"], x, a)
	VORPS(a, y, y) // sign(x)·(1-e)/(1+e)
	// |x| < 0.625: x + x·z·P(z)
	VMULPS(x, x, z)
	VMOVAPS(c["t0"], p)
	for _, t := range []string{"t1", "t2", "t3", "t4"} {
		VFMADD213PS(c[t], z, p) // p = p·z + t
	}
	VMULPS(z, p, p)
	VFMADD213PS(x, x, p)                     // p·x + x
	VORPS(a, p, p)                           // with x's sign: tanh -0 = -0
	VCMPPS(U8(0x11), c["small"], ax, reg.K2) // LT_OQ: |x| < 0.625 (not NaN)
	VBLENDMPS(p, y, reg.K2, y)
}

// unary emits name(dst, x *float32, n int): dst[j] = f(x[j]) for j < n,
// two vectors an iteration, then one, then the last partial vector under a
// k-mask.
func unary(name, doc string, f func(x, y reg.VecVirtual, c map[string]reg.VecVirtual), names []string) {
	TEXT(name, NOSPLIT, "func(dst, x *float32, n int)")
	Pragma("noescape")
	Doc(doc)
	dst, x, n := Load(Param("dst"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
	c := load(names...)
	c["zero"] = ZMM()
	VXORPS(c["zero"], c["zero"], c["zero"])
	Label(name + "_loop2")
	CMPQ(n, U8(32))
	JL(LabelRef(name + "_loop"))
	v0, y0, v1, y1 := ZMM(), ZMM(), ZMM(), ZMM()
	VMOVUPS(Mem{Base: x}, v0)
	VMOVUPS(Mem{Base: x, Disp: 64}, v1)
	f(v0, y0, c)
	f(v1, y1, c)
	VMOVUPS(y0, Mem{Base: dst})
	VMOVUPS(y1, Mem{Base: dst, Disp: 64})
	ADDQ(U8(128), x)
	ADDQ(U8(128), dst)
	SUBQ(U8(32), n)
	JMP(LabelRef(name + "_loop2"))
	Label(name + "_loop")
	CMPQ(n, U8(16))
	JL(LabelRef(name + "_tail"))
	v, y := ZMM(), ZMM()
	VMOVUPS(Mem{Base: x}, v)
	f(v, y, c)
	VMOVUPS(y, Mem{Base: dst})
	ADDQ(U8(64), x)
	ADDQ(U8(64), dst)
	SUBQ(U8(16), n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_tail")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	t, ones := GP64(), GP64()
	MOVQ(I32(-1), ones)
	BZHIQ(n, ones, t)
	KMOVW(t.As32(), reg.K1)
	vt, yt := ZMM(), ZMM()
	VMOVUPS_Z(Mem{Base: x}, reg.K1, vt)
	f(vt, yt, c)
	VMOVUPS(yt, reg.K1, Mem{Base: dst})
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
