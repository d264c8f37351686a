// Command genelem writes kernels/elementwise_amd64.s and its Go
// declarations: float32 elementwise loops in AVX2 (eight lanes, four
// vectors per iteration), with avo (github.com/mmcloughlin/avo). The Go side
// (elementwise_amd64.go) calls them for the whole multiples of 32 elements
// and finishes the tail in Go.
//
//	go run ./internal/genelem -out elementwise_amd64.s -stubs elementwise_stub_amd64.go -pkg kernels
package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// unroll is the number of ymm vectors per loop iteration: 32 floats.
const unroll = 4

func main() {
	ConstraintExpr("!purego")
	for _, op := range []struct {
		name string
		inst func(a, b, dst Op) // dst = b OP a in AVX operand order: VADDPS a, b, dst -> dst = b + a
	}{
		{"add", func(a, b, d Op) { VADDPS(a, b, d) }},
		{"sub", func(a, b, d Op) { VSUBPS(a, b, d) }},
		{"mul", func(a, b, d Op) { VMULPS(a, b, d) }},
		{"div", func(a, b, d Op) { VDIVPS(a, b, d) }},
	} {
		// (no max/min: VMAXPS and VMINPS drop a NaN operand, Go's max and
		// min propagate it)
		vv(op.name, op.inst)
		vs(op.name, op.inst, false)
		vs(op.name, op.inst, true)
	}
	unary("sqrt", func(x reg.VecVirtual, d reg.VecVirtual, _ reg.VecVirtual) { VSQRTPS(x, d) })
	// relu: d = 0 > x ? 0 : x, so a NaN x stays NaN, as in the Go loop
	unary("relu", func(x reg.VecVirtual, d reg.VecVirtual, zero reg.VecVirtual) { VMAXPS(x, zero, d) })
	reluGrad()
	lstmGrad(false)
	lstmGrad(true)
	Generate()
}

// vv: dst[i] = a[i] op b[i].
func vv(name string, inst func(a, b, d Op)) {
	TEXT(name+"VV32", NOSPLIT, "func(dst, a, b *float32, n int)")
	Doc(name + "VV32 sets dst[i] = a[i] " + name + " b[i] for i < n; n is a multiple of 32.")
	Pragma("noescape")
	dst, a, b, n := Load(Param("dst"), GP64()), Load(Param("a"), GP64()), Load(Param("b"), GP64()), Load(Param("n"), GP64())
	loop(n, func(off int) {
		x, y := YMM(), YMM()
		VMOVUPS(Mem{Base: a, Disp: off}, x)
		VMOVUPS(Mem{Base: b, Disp: off}, y)
		inst(y, x, x) // x = a op b
		VMOVUPS(x, Mem{Base: dst, Disp: off})
	}, dst, a, b)
	VZEROUPPER()
	RET()
}

// vs: dst[i] = a[i] op s (scalarLeft: dst[i] = s op a[i]).
func vs(name string, inst func(a, b, d Op), scalarLeft bool) {
	fn, doc := name+"VS32", " sets dst[i] = a[i] "+name+" s"
	if scalarLeft {
		fn, doc = name+"SV32", " sets dst[i] = s "+name+" a[i]"
	}
	TEXT(fn, NOSPLIT, "func(dst, a *float32, s float32, n int)")
	Doc(fn + doc + " for i < n; n is a multiple of 32.")
	Pragma("noescape")
	dst, a, n := Load(Param("dst"), GP64()), Load(Param("a"), GP64()), Load(Param("n"), GP64())
	s := YMM()
	VBROADCASTSS(Load(Param("s"), XMM()), s)
	loop(n, func(off int) {
		x := YMM()
		VMOVUPS(Mem{Base: a, Disp: off}, x)
		if scalarLeft {
			inst(x, s, x) // x = s op x
		} else {
			inst(s, x, x) // x = x op s
		}
		VMOVUPS(x, Mem{Base: dst, Disp: off})
	}, dst, a)
	VZEROUPPER()
	RET()
}

// unary: dst[i] = f(x[i]); zero holds 0 in every lane.
func unary(name string, f func(x, d, zero reg.VecVirtual)) {
	TEXT(name+"32", NOSPLIT, "func(dst, x *float32, n int)")
	Doc(name + "32 sets dst[i] = " + name + "(x[i]) for i < n; n is a multiple of 32.")
	Pragma("noescape")
	dst, x, n := Load(Param("dst"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
	zero := YMM()
	VXORPS(zero, zero, zero)
	loop(n, func(off int) {
		v := YMM()
		VMOVUPS(Mem{Base: x, Disp: off}, v)
		f(v, v, zero)
		VMOVUPS(v, Mem{Base: dst, Disp: off})
	}, dst, x)
	VZEROUPPER()
	RET()
}

// reluGrad: dst[i] = g[i] where x[i] > 0, else 0.
func reluGrad() {
	TEXT("reluGrad32", NOSPLIT, "func(dst, x, grad *float32, n int)")
	Doc("reluGrad32 sets dst[i] = grad[i] where x[i] > 0 and 0 elsewhere, for i < n; n is a multiple of 32.")
	Pragma("noescape")
	dst, x, g, n := Load(Param("dst"), GP64()), Load(Param("x"), GP64()), Load(Param("grad"), GP64()), Load(Param("n"), GP64())
	zero := YMM()
	VXORPS(zero, zero, zero)
	loop(n, func(off int) {
		v, m := YMM(), YMM()
		VMOVUPS(Mem{Base: x, Disp: off}, v)
		VCMPPS(U8(0x1e), zero, v, m) // m = v > 0 (GT_OQ): all ones where true
		VANDPS(Mem{Base: g, Disp: off}, m, m)
		VMOVUPS(m, Mem{Base: dst, Disp: off})
	}, dst, x, g)
	VZEROUPPER()
	RET()
}

// lstmGrad: the gradient of an LSTM step over m units of one row (m a
// multiple of 32; n the row's units, the distance between its gates), one
// vector of 8 at a time, each operation as kernels.LSTMCellGradRows does it
// in Go: dz's gates i, f, g, o from the activations' i, f, g, o, tanh(c)
// and dh, dc (and cPrev, and dcPrev written, with prev).
func lstmGrad(prev bool) {
	name, sig := "lstmGradFirst32", "func(dz, acts, dh, dc *float32, n, m int)"
	if prev {
		name, sig = "lstmGradPrev32", "func(dz, dcPrev, acts, dh, dc, cPrev *float32, n, m int)"
	}
	TEXT(name, NOSPLIT, sig)
	if prev {
		Doc(name + " writes an LSTM step's gradient dz and dcPrev for units [0, m) of a row of n units; m is a multiple of 32.")
	} else {
		Doc(name + " writes the gradient dz of an LSTM step without a previous state for units [0, m) of a row of n units; m is a multiple of 32.")
	}
	Pragma("noescape")
	dz, acts, dh, dc := Load(Param("dz"), GP64()), Load(Param("acts"), GP64()), Load(Param("dh"), GP64()), Load(Param("dc"), GP64())
	ptrs := []reg.Register{dz, acts, dh, dc}
	var dcp, cp reg.Register
	if prev {
		dcp, cp = Load(Param("dcPrev"), GP64()), Load(Param("cPrev"), GP64())
		ptrs = append(ptrs, dcp, cp)
	}
	n, m := Load(Param("n"), GP64()), Load(Param("m"), GP64())
	SHLQ(Imm(2), n) // the distance between gates, in bytes
	n2, n3, n4 := GP64(), GP64(), GP64()
	MOVQ(n, n2)
	ADDQ(n, n2)
	MOVQ(n2, n3)
	ADDQ(n, n3)
	MOVQ(n2, n4)
	ADDQ(n2, n4)
	one, bits := YMM(), GP32()
	MOVL(U32(0x3f800000), bits) // 1.0
	VMOVD(bits, one.AsX())
	VBROADCASTSS(one.AsX(), one)
	gate := func(base, off reg.Register) Mem {
		if off == nil {
			return Mem{Base: base}
		}
		return Mem{Base: base, Index: off, Scale: 1}
	}
	Label("loop")
	CMPQ(m, Imm(0))
	JE(LabelRef("done"))
	i, f, g, o, tc, dhv, dcv := YMM(), YMM(), YMM(), YMM(), YMM(), YMM(), YMM()
	VMOVUPS(gate(acts, nil), i)
	VMOVUPS(gate(acts, n), f)
	VMOVUPS(gate(acts, n2), g)
	VMOVUPS(gate(acts, n3), o)
	VMOVUPS(gate(acts, n4), tc)
	VMOVUPS(Mem{Base: dh}, dhv)
	VMOVUPS(Mem{Base: dc}, dcv)
	d, a, b := YMM(), YMM(), YMM()
	// dc' = dc + (dh·o)·(1 - tc·tc)
	VMULPS(tc, tc, b)
	VSUBPS(b, one, b)
	VMULPS(o, dhv, d)
	VMULPS(b, d, d)
	VADDPS(d, dcv, d)
	// dz_o = ((dh·tc)·o)·(1 - o)
	VMULPS(tc, dhv, a)
	VMULPS(o, a, a)
	VSUBPS(o, one, b)
	VMULPS(b, a, a)
	VMOVUPS(a, gate(dz, n3))
	// dz_i = ((dc'·g)·i)·(1 - i)
	VMULPS(g, d, a)
	VMULPS(i, a, a)
	VSUBPS(i, one, b)
	VMULPS(b, a, a)
	VMOVUPS(a, gate(dz, nil))
	// dz_g = (dc'·i)·(1 - g·g)
	VMULPS(i, d, a)
	VMULPS(g, g, b)
	VSUBPS(b, one, b)
	VMULPS(b, a, a)
	VMOVUPS(a, gate(dz, n2))
	if prev {
		// dz_f = ((dc'·cPrev)·f)·(1 - f), dcPrev = dc'·f
		VMULPS(Mem{Base: cp}, d, a)
		VMULPS(f, a, a)
		VSUBPS(f, one, b)
		VMULPS(b, a, a)
		VMOVUPS(a, gate(dz, n))
		VMULPS(f, d, a)
		VMOVUPS(a, Mem{Base: dcp})
	} else {
		VXORPS(a, a, a)
		VMOVUPS(a, gate(dz, n))
	}
	for _, p := range ptrs {
		ADDQ(Imm(32), p)
	}
	SUBQ(Imm(8), m)
	JMP(LabelRef("loop"))
	Label("done")
	VZEROUPPER()
	RET()
}

// loop runs body over n float32s (a multiple of 32), unroll vectors at a
// time, advancing every pointer.
func loop(n reg.Register, body func(off int), ptrs ...reg.Register) {
	Label("loop")
	CMPQ(n, Imm(0))
	JE(LabelRef("done"))
	for u := 0; u < unroll; u++ {
		body(32 * u)
	}
	for _, p := range ptrs {
		ADDQ(Imm(32*unroll), p)
	}
	SUBQ(Imm(8*unroll), n)
	JMP(LabelRef("loop"))
	Label("done")
}
