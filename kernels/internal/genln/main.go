// Command genln writes kernels/layernorm_amd64.s and its Go declarations:
// the float32 layer normalization's row loops (kernels/layernorm.go) in
// AVX-512, eight float64 lanes at a time (n a multiple of 8; Go finishes
// the tail), with avo (github.com/mmcloughlin/avo).
//
//   - lnSum512, lnSumSq512: a row's sum, and its sum of squared deviations
//     from m, in float64 lanes, then the lanes added by halving.
//   - lnFwd512: y = float32((x - m)·rs)·gamma + beta, the float32 product
//     and sum rounded apart, as the Go loop does.
//   - lnBwdSums512: the backward pass's row sums of g = dy·gamma and of
//     g·x̂, and dgamma += dy·x̂, dbeta += dy, element by element in float64
//     (multiplies and adds rounded apart, as in Go, so dgamma and dbeta
//     take the Go loop's bits).
//   - lnBwdDx512: dx = float32(rs·(dy·gamma - sg - x̂·sgx)), in the Go
//     loop's order of operations.
//
// Only the row sums add in another order than the Go loop's.
//
//	go run ./internal/genln -out layernorm_amd64.s -stubs layernorm_stub_amd64.go -pkg kernels
package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("!purego")
	sum()
	sumSq()
	fwd()
	bwdSums()
	bwdDx()
	Generate()
}

// bcast loads the float64 parameter name into all eight lanes of a zmm.
func bcast(name string) reg.VecVirtual {
	z := ZMM()
	VBROADCASTSD(Load(Param(name), XMM()), z)
	return z
}

// reduce adds the eight lanes of acc by halving and returns the low xmm,
// lane 0 holding the sum.
func reduce(acc reg.VecVirtual) reg.VecVirtual {
	t := ZMM()
	VSHUFF64X2(U8(0x4e), acc, acc, t) // swap 256-bit halves
	VADDPD(t, acc, acc)
	VSHUFF64X2(U8(0xb1), acc, acc, t) // swap 128-bit quarters in each half
	VADDPD(t, acc, acc)
	VPERMILPD(U8(0x55), acc, t) // swap neighbours
	VADDPD(t, acc, acc)
	return acc
}

// loop emits a loop over n (a multiple of 8) with body(off) for the eight
// elements at float offset off, then advance.
func loop(name string, n reg.Register, body func(), advance func()) {
	Label(name + "_loop")
	CMPQ(n, U8(8))
	JL(LabelRef(name + "_done"))
	body()
	advance()
	SUBQ(U8(8), n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
}

func sum() {
	TEXT("lnSum512", NOSPLIT, "func(x *float32, n int) float64")
	Pragma("noescape")
	Doc("lnSum512 returns the float64 sum of x[j], j < n (a multiple of 8), in eight lanes.")
	x, n := Load(Param("x"), GP64()), Load(Param("n"), GP64())
	acc := ZMM()
	VXORPD(acc, acc, acc)
	loop("sum", n, func() {
		t := ZMM()
		VCVTPS2PD(Mem{Base: x}, t)
		VADDPD(t, acc, acc)
	}, func() { ADDQ(U8(32), x) })
	r := reduce(acc)
	VZEROUPPER()
	Store(r.AsX(), ReturnIndex(0))
	RET()
}

func sumSq() {
	TEXT("lnSumSq512", NOSPLIT, "func(x *float32, n int, m float64) float64")
	Pragma("noescape")
	Doc("lnSumSq512 returns the float64 sum of (x[j] - m)², j < n (a multiple of 8), in eight lanes.")
	x, n := Load(Param("x"), GP64()), Load(Param("n"), GP64())
	m := bcast("m")
	acc := ZMM()
	VXORPD(acc, acc, acc)
	loop("sumsq", n, func() {
		t := ZMM()
		VCVTPS2PD(Mem{Base: x}, t)
		VSUBPD(m, t, t)
		VMULPD(t, t, t)
		VADDPD(t, acc, acc)
	}, func() { ADDQ(U8(32), x) })
	r := reduce(acc)
	VZEROUPPER()
	Store(r.AsX(), ReturnIndex(0))
	RET()
}

// xhat sets t = (x - m)·rs in float64 from the eight floats at x.
func xhat(x reg.Register, m, rs reg.VecVirtual) reg.VecVirtual {
	t := ZMM()
	VCVTPS2PD(Mem{Base: x}, t)
	VSUBPD(m, t, t)
	VMULPD(rs, t, t)
	return t
}

func fwd() {
	TEXT("lnFwd512", NOSPLIT, "func(y, x, gamma, beta *float32, n int, m, rs float64)")
	Pragma("noescape")
	Doc("lnFwd512 sets y[j] = float32((x[j] - m)·rs)·gamma[j] + beta[j] for j < n (a multiple of 8).")
	y, x := Load(Param("y"), GP64()), Load(Param("x"), GP64())
	gamma, beta, n := Load(Param("gamma"), GP64()), Load(Param("beta"), GP64()), Load(Param("n"), GP64())
	m, rs := bcast("m"), bcast("rs")
	loop("fwd", n, func() {
		h := YMM()
		VCVTPD2PS(xhat(x, m, rs), h)
		VMULPS(Mem{Base: gamma}, h, h)
		VADDPS(Mem{Base: beta}, h, h)
		VMOVUPS(h, Mem{Base: y})
	}, func() {
		for _, p := range []reg.Register{y, x, gamma, beta} {
			ADDQ(U8(32), p)
		}
	})
	VZEROUPPER()
	RET()
}

func bwdSums() {
	TEXT("lnBwdSums512", NOSPLIT, "func(x, dy, gamma *float32, dgamma, dbeta *float64, n int, m, rs float64) (sg, sgx float64)")
	Pragma("noescape")
	Doc("lnBwdSums512 returns the sums of g = dy[j]·gamma[j] and of g·x̂, x̂ = (x[j] - m)·rs, and adds dy[j]·x̂ to dgamma[j] and dy[j] to dbeta[j], for j < n (a multiple of 8).")
	x, dy, gamma := Load(Param("x"), GP64()), Load(Param("dy"), GP64()), Load(Param("gamma"), GP64())
	dg, db, n := Load(Param("dgamma"), GP64()), Load(Param("dbeta"), GP64()), Load(Param("n"), GP64())
	m, rs := bcast("m"), bcast("rs")
	sg, sgx := ZMM(), ZMM()
	VXORPD(sg, sg, sg)
	VXORPD(sgx, sgx, sgx)
	loop("sums", n, func() {
		h := xhat(x, m, rs)
		d, g, t := ZMM(), ZMM(), ZMM()
		VCVTPS2PD(Mem{Base: dy}, d)
		VCVTPS2PD(Mem{Base: gamma}, g)
		VMULPD(d, g, g) // g = dy·gamma
		VADDPD(g, sg, sg)
		VMULPD(h, g, t)
		VADDPD(t, sgx, sgx)
		VMULPD(h, d, t) // dgamma += dy·x̂
		VADDPD(Mem{Base: dg}, t, t)
		VMOVUPD(t, Mem{Base: dg})
		VADDPD(Mem{Base: db}, d, d) // dbeta += dy
		VMOVUPD(d, Mem{Base: db})
	}, func() {
		for _, p := range []reg.Register{x, dy, gamma} {
			ADDQ(U8(32), p)
		}
		ADDQ(U8(64), dg)
		ADDQ(U8(64), db)
	})
	a, b := reduce(sg), reduce(sgx)
	VZEROUPPER()
	Store(a.AsX(), ReturnIndex(0))
	Store(b.AsX(), ReturnIndex(1))
	RET()
}

func bwdDx() {
	TEXT("lnBwdDx512", NOSPLIT, "func(dx, x, dy, gamma *float32, n int, m, rs, sg, sgx float64)")
	Pragma("noescape")
	Doc("lnBwdDx512 sets dx[j] = float32(rs·(dy[j]·gamma[j] - sg - x̂·sgx)), x̂ = (x[j] - m)·rs, for j < n (a multiple of 8).")
	dx, x, dy, gamma := Load(Param("dx"), GP64()), Load(Param("x"), GP64()), Load(Param("dy"), GP64()), Load(Param("gamma"), GP64())
	n := Load(Param("n"), GP64())
	m, rs, sg, sgx := bcast("m"), bcast("rs"), bcast("sg"), bcast("sgx")
	loop("dx", n, func() {
		h := xhat(x, m, rs)
		d, g := ZMM(), ZMM()
		VCVTPS2PD(Mem{Base: dy}, d)
		VCVTPS2PD(Mem{Base: gamma}, g)
		VMULPD(g, d, d)  // dy·gamma
		VSUBPD(sg, d, d) // - sg
		VMULPD(sgx, h, h)
		VSUBPD(h, d, d) // - x̂·sgx
		VMULPD(rs, d, d)
		o := YMM()
		VCVTPD2PS(d, o)
		VMOVUPS(o, Mem{Base: dx})
	}, func() {
		for _, p := range []reg.Register{dx, x, dy, gamma} {
			ADDQ(U8(32), p)
		}
	})
	VZEROUPPER()
	RET()
}
