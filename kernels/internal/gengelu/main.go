// Command gengelu writes kernels/gelu_amd64.s and its Go declarations: the
// exact GELU and its gradient over float32 in AVX-512 (sixteen lanes, two
// vectors a loop iteration, whole vectors only; Go finishes the tail), with
// avo (github.com/mmcloughlin/avo).
//
//   - geluFwd512: y = x·Φ(x) = h + h·erf(x/√2), h = x/2.
//   - geluBwd512: d = g·(Φ(x) + x·φ(x)), φ(x) = e^(-x²/2)/√(2π).
//
// erf is the rational approximation of kernels.erf32 (Eigen's
// generic_fast_erf_float: t·P(t²)/Q(t²) over t clamped to [-4, 4]),
// evaluated in float32 with FMA. e^x is attention's (genattn): Cody and
// Waite's reduction with ln 2 split in two and Cephes' expf polynomial,
// scaled by 2^n with VSCALEFPS; its argument -x²/2 is clamped below at
// -104, where e^x is 0 in float32.
//
//	go run ./internal/gengelu -out gelu_amd64.s -stubs gelu_stub_amd64.go -pkg kernels
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
	v    float64
}{
	{"half", 0.5}, {"rsqrt2", 1 / math.Sqrt2}, {"lim", 4}, {"neglim", -4},
	// erf: P (odd, highest degree first) and Q (even)
	{"a13", -2.72614225801306e-10}, {"a11", 2.77068142495902e-08}, {"a9", -2.10102402082508e-06},
	{"a7", -5.69250639462346e-05}, {"a5", -7.34990630326855e-04}, {"a3", -2.95459980854025e-03},
	{"a1", -1.60960333262415e-02},
	{"b8", -1.45660718464996e-05}, {"b6", -2.13374055278905e-04}, {"b4", -1.68282697438203e-03},
	{"b2", -7.37332916720468e-03}, {"b0", -1.42647390514189e-02},
	// e^x
	{"lo", -104}, {"log2e", 1.44269504088896341}, {"c1", 0.693359375}, {"c2", -2.12194440e-4},
	{"p0", 1.9875691500e-4}, {"p1", 1.3981999507e-3}, {"p2", 8.3334519073e-3}, {"p3", 4.1665795894e-2},
	{"p4", 1.6666665459e-1}, {"p5", 5.0000001201e-1}, {"one", 1},
	{"rsqrt2pi", 0.3989422804014327},
}

func main() {
	ConstraintExpr("!purego")
	fwd()
	bwd()
	Generate()
}

// load broadcasts the named constants into zmm registers; the polynomials'
// coefficients stay in memory (tables of sixteen copies, read as operands:
// thirty-two registers do not hold them all beside two vectors' work).
func load(names ...string) map[string]Op {
	c := map[string]Op{}
	for _, k := range consts {
		for _, n := range names {
			if n != k.name {
				continue
			}
			if poly(n) {
				c[n] = table(n, math.Float32bits(float32(k.v)))
				continue
			}
			m, ok := scalars[n]
			if !ok {
				m = ConstData("gelu512_"+k.name, U32(math.Float32bits(float32(k.v))))
				scalars[n] = m
			}
			z := ZMM()
			VBROADCASTSS(m, z)
			c[k.name] = z
		}
	}
	return c
}

// poly reports whether a constant is a polynomial coefficient.
func poly(name string) bool {
	return name[0] == 'a' || name[0] == 'b' || (name[0] == 'p' && len(name) == 2)
}

var tables, scalars = map[string]Mem{}, map[string]Mem{}

// table declares (once) a 64-byte table of sixteen copies of v.
func table(name string, v uint32) Mem {
	if m, ok := tables[name]; ok {
		return m
	}
	m := GLOBL("gelu512t_"+name, RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(v))
	}
	tables[name] = m
	return m
}

var erfNames = []string{"rsqrt2", "lim", "neglim", "a13", "a11", "a9", "a7", "a5", "a3", "a1", "b8", "b6", "b4", "b2", "b0"}

// erf sets e = erf(x/√2) lane-wise.
func erf(x, e reg.VecVirtual, c map[string]Op) {
	t, t2, q := ZMM(), ZMM(), ZMM()
	VMULPS(c["rsqrt2"], x, t)
	VMINPS(c["lim"], t, t)
	VMAXPS(c["neglim"], t, t)
	VMULPS(t, t, t2)
	VMOVUPS(c["a13"], e)
	for _, a := range []string{"a11", "a9", "a7", "a5", "a3", "a1"} {
		VFMADD213PS(c[a], t2, e) // e = e·t² + a
	}
	VMULPS(t, e, e)
	VMOVUPS(c["b8"], q)
	for _, b := range []string{"b6", "b4", "b2", "b0"} {
		VFMADD213PS(c[b], t2, q)
	}
	VDIVPS(q, e, e) // e = p/q
}

// loop emits the two-vector loop over n (a multiple of 16) with body.
func loop(n reg.Register, body func(off int), advance func()) {
	Label("loop2")
	CMPQ(n, U8(32))
	JL(LabelRef("loop"))
	body(0)
	body(64)
	advance()
	advance()
	SUBQ(U8(32), n)
	JMP(LabelRef("loop2"))
	Label("loop")
	CMPQ(n, U8(16))
	JL(LabelRef("done"))
	body(0)
	advance()
	SUBQ(U8(16), n)
	JMP(LabelRef("loop"))
	Label("done")
	VZEROUPPER()
	RET()
}

func fwd() {
	TEXT("geluFwd512", NOSPLIT, "func(dst, x *float32, n int)")
	Pragma("noescape")
	Doc("geluFwd512 sets dst[j] = x[j]·Φ(x[j]) for j < n (a multiple of 16).")
	dst, x, n := Load(Param("dst"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
	c := load(append([]string{"half"}, erfNames...)...)
	loop(n, func(off int) {
		v, e, h := ZMM(), ZMM(), ZMM()
		VMOVUPS(Mem{Base: x, Disp: off}, v)
		erf(v, e, c)
		VMULPS(c["half"], v, h)
		VFMADD213PS(h, h, e) // e = h·erf + h
		VMOVUPS(e, Mem{Base: dst, Disp: off})
	}, func() {
		ADDQ(U8(64), x)
		ADDQ(U8(64), dst)
	})
}

func bwd() {
	TEXT("geluBwd512", NOSPLIT, "func(dst, x, dy *float32, n int)")
	Pragma("noescape")
	Doc("geluBwd512 sets dst[j] = dy[j]·(Φ(x[j]) + x[j]·φ(x[j])) for j < n (a multiple of 16).")
	dst, x, g, n := Load(Param("dst"), GP64()), Load(Param("x"), GP64()), Load(Param("dy"), GP64()), Load(Param("n"), GP64())
	names := append([]string{"half", "lo", "log2e", "c1", "c2", "p0", "p1", "p2", "p3", "p4", "p5", "one", "rsqrt2pi"}, erfNames...)
	c := load(names...)
	loop(n, func(off int) {
		v, e, a, nv, z, y := ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM()
		VMOVUPS(Mem{Base: x, Disp: off}, v)
		erf(v, e, c)
		VFMADD213PS(c["half"], c["half"], e) // Φ = erf/2 + 1/2
		// a = -x²/2, clamped below; y = e^a
		VMULPS(v, v, a)
		VMULPS(c["half"], a, a)
		VPXORD(z, z, z)
		VSUBPS(a, z, a)
		VMAXPS(c["lo"], a, a)
		VMULPS(c["log2e"], a, nv)
		VRNDSCALEPS(U8(0), nv, nv) // n = round(a·log2 e)
		VFNMADD231PS(c["c1"], nv, a)
		VFNMADD231PS(c["c2"], nv, a) // r = a - n·C1 - n·C2
		VMULPS(a, a, z)
		VMOVUPS(c["p0"], y)
		for _, p := range []string{"p1", "p2", "p3", "p4", "p5"} {
			VFMADD213PS(c[p], a, y)
		}
		VFMADD213PS(a, z, y) // y·r² + r
		VADDPS(c["one"], y, y)
		VSCALEFPS(nv, y, y) // e^a
		VMULPS(c["rsqrt2pi"], y, y)
		VFMADD213PS(e, v, y) // Φ + x·φ
		VMULPS(Mem{Base: g, Disp: off}, y, y)
		VMOVUPS(y, Mem{Base: dst, Disp: off})
	}, func() {
		ADDQ(U8(64), x)
		ADDQ(U8(64), g)
		ADDQ(U8(64), dst)
	})
}
