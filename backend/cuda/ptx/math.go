package ptx

import "math"

// The transcendental functions. PTX has no exact exp or log (ex2.approx
// and lg2.approx are a few ulp off), and the host's kernels evaluate exp,
// log, tanh and the sigmoid in float64 and round once (package kernels),
// so the kernels do the same: each function below is float64 arithmetic
// with explicit rounding (.rn, which ptxas never contracts), accurate to
// about 1e-15, so that a float32 result rounds as the host's does but in
// the rarest cases. NaN propagates through each (the clamps compare, so a
// NaN is never clamped to a number).

// selpF64 returns p ? x : y.
func (b *builder) selpF64(x, y, p string) string {
	r := b.f64()
	b.ins("selp.f64", r, x, y, p)
	return r
}

func (b *builder) opF64(op, x, y string) string {
	r := b.f64()
	b.ins(op, r, x, y)
	return r
}

func (b *builder) fmaF64(x, y, z string) string {
	r := b.f64()
	b.ins("fma.rn.f64", r, x, y, z)
	return r
}

// clampF64 returns x limited to [lo, hi], NaN kept.
func (b *builder) clampF64(x string, lo, hi float64) string {
	p, q := b.pred(), b.pred()
	b.ins("setp.lt.f64", p, x, f64i(lo))
	x = b.selpF64(f64i(lo), x, p)
	b.ins("setp.gt.f64", q, x, f64i(hi))
	return b.selpF64(f64i(hi), x, q)
}

// The split of ln 2 of fdlibm (e_exp.c): ln2Hi has 21 trailing zero bits,
// so k·ln2Hi is exact for |k| < 2^21.
const (
	ln2Hi = 6.93147180369123816490e-01
	ln2Lo = 1.90821492927058770002e-10
)

// exp64 returns e^x (float64): x = k·ln 2 + r with k = rint(x/ln 2), |r| <=
// ln 2/2, e^r by its Taylor polynomial of degree 12 (truncation below
// 2e-16 there), scaled by 2^k in two factors so that no exponent field
// overflows before the product does.
func (b *builder) exp64(x string) string {
	x = b.clampF64(x, -800, 800)
	t := b.opF64("mul.rn.f64", x, f64i(math.Log2E))
	k := b.f64()
	b.ins("cvt.rni.f64.f64", k, t)
	nk := b.f64()
	b.ins("neg.f64", nk, k)
	r := b.fmaF64(nk, f64i(ln2Hi), x)
	r = b.fmaF64(nk, f64i(ln2Lo), r)
	fact := 1.0
	for i := 2; i <= 12; i++ {
		fact *= float64(i)
	}
	p := f64i(1 / fact) // 1/12!
	for i := 11; i >= 0; i-- {
		fact /= float64(max(i+1, 1))
		p = b.fmaF64(p, r, f64i(1/fact))
	}
	ki, k1, k2 := b.r32(), b.r32(), b.r32()
	b.ins("cvt.rzi.s32.f64", ki, k)
	b.ins("shr.s32", k1, ki, "1")
	b.ins("sub.s32", k2, ki, k1)
	res := b.opF64("mul.rn.f64", p, b.pow2(k1))
	return b.opF64("mul.rn.f64", res, b.pow2(k2))
}

// pow2 returns 2^k (float64) for an s32 k in [-1022, 1023].
func (b *builder) pow2(k string) string {
	w, e := b.r64(), b.r64()
	b.ins("cvt.s64.s32", w, k)
	b.ins("add.s64", w, w, "1023")
	b.ins("shl.b64", e, w, "52")
	f := b.f64()
	b.ins("mov.b64", f, e)
	return f
}

// log64 returns ln x (float64) for x a float64 of a normal magnitude (every
// float32, and every sum of them): x = 2^e·m with m in [√2/2, √2), ln m =
// 2·atanh(s) with s = (m-1)/(m+1), |s| <= 0.1716, by its series to s^19
// (truncation below 1e-17). ln 0 = -Inf, ln of a negative number NaN,
// ln +Inf = +Inf.
func (b *builder) log64(x string) string {
	bits, eb, mb := b.r64(), b.r64(), b.r64()
	b.ins("mov.b64", bits, x)
	b.ins("shr.u64", eb, bits, "52")
	b.ins("and.b64", mb, bits, "4503599627370495") // the mantissa's 52 bits
	b.ins("or.b64", mb, mb, "4607182418800017408") // with 1.0's exponent
	e := b.r32()
	b.ins("cvt.u32.u64", e, eb)
	b.ins("and.b32", e, e, "2047")
	b.ins("sub.s32", e, e, "1023")
	m := b.f64()
	b.ins("mov.b64", m, mb)
	big := b.pred()
	b.ins("setp.gt.f64", big, m, f64i(math.Sqrt2))
	m = b.selpF64(b.opF64("mul.rn.f64", m, f64i(0.5)), m, big)
	e1 := b.r32()
	b.ins("selp.s32", e1, "1", "0", big)
	e = b.addu(e, e1)
	f := b.opF64("sub.rn.f64", m, f64i(1))
	s := b.opF64("div.rn.f64", f, b.opF64("add.rn.f64", f, f64i(2)))
	z := b.opF64("mul.rn.f64", s, s)
	q := f64i(1.0 / 19)
	for n := 17; n >= 1; n -= 2 {
		q = b.fmaF64(q, z, f64i(1/float64(n)))
	}
	lm := b.opF64("mul.rn.f64", b.opF64("mul.rn.f64", s, f64i(2)), q)
	ed := b.f64()
	b.ins("cvt.rn.f64.s32", ed, e)
	lo := b.fmaF64(ed, f64i(ln2Lo), lm)
	res := b.fmaF64(ed, f64i(ln2Hi), lo)
	// the special values
	zero, neg, inf, nan := b.pred(), b.pred(), b.pred(), b.pred()
	b.ins("setp.eq.f64", zero, x, f64i(0))
	b.ins("setp.lt.f64", neg, x, f64i(0))
	b.ins("setp.eq.f64", inf, x, f64i(math.Inf(1)))
	b.ins("setp.nan.f64", nan, x, x)
	res = b.selpF64(f64i(math.Inf(-1)), res, zero)
	res = b.selpF64(f64i(math.NaN()), res, neg)
	res = b.selpF64(x, res, inf)
	return b.selpF64(x, res, nan)
}

// tanh64 returns tanh x (float64): the odd Taylor series to x^13 below
// |x| = 0.1 (truncation below 4e-17 relative), 1 - 2/(e^2|x| + 1) with
// x's sign above (cancellation costs at most a factor 10 there).
func (b *builder) tanh64(x string) string {
	a := b.f64()
	b.ins("abs.f64", a, x)
	z := b.opF64("mul.rn.f64", x, x)
	coef := []float64{-1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835, -1382.0 / 155925, 21844.0 / 6081075}
	p := f64i(coef[len(coef)-1])
	for i := len(coef) - 2; i >= 0; i-- {
		p = b.fmaF64(p, z, f64i(coef[i]))
	}
	small := b.fmaF64(b.opF64("mul.rn.f64", x, z), p, x)
	e := b.exp64(b.opF64("add.rn.f64", a, a))
	t := b.opF64("sub.rn.f64", f64i(1), b.opF64("div.rn.f64", f64i(2), b.opF64("add.rn.f64", e, f64i(1))))
	neg := b.pred()
	b.ins("setp.lt.f64", neg, x, f64i(0))
	nt := b.f64()
	b.ins("neg.f64", nt, t)
	large := b.selpF64(nt, t, neg)
	lt := b.pred()
	b.ins("setp.lt.f64", lt, a, f64i(0.1))
	return b.selpF64(small, large, lt)
}

// sigmoid64 returns 1/(1 + e^-x) (float64), as the host computes it:
// 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below.
func (b *builder) sigmoid64(x string) string {
	a := b.f64()
	b.ins("abs.f64", a, x)
	na := b.f64()
	b.ins("neg.f64", na, a)
	e := b.exp64(na) // e^-|x|
	one := b.opF64("add.rn.f64", f64i(1), e)
	pos := b.opF64("div.rn.f64", f64i(1), one)
	neg := b.opF64("div.rn.f64", e, one)
	p := b.pred()
	b.ins("setp.ge.f64", p, x, f64i(0))
	return b.selpF64(pos, neg, p)
}

// f32 arithmetic, rounded to nearest (.rn: never contracted into an fma,
// so each operation rounds as the host's float32 operation does).

func (b *builder) opF32(op, x, y string) string {
	r := b.f32()
	b.ins(op, r, x, y)
	return r
}
func (b *builder) addF(x, y string) string { return b.opF32("add.rn.f32", x, y) }
func (b *builder) subF(x, y string) string { return b.opF32("sub.rn.f32", x, y) }
func (b *builder) mulF(x, y string) string { return b.opF32("mul.rn.f32", x, y) }
func (b *builder) divF(x, y string) string { return b.opF32("div.rn.f32", x, y) }

func (b *builder) selpF32(x, y, p string) string {
	r := b.f32()
	b.ins("selp.f32", r, x, y, p)
	return r
}

// widen and narrow convert between float32 and float64 registers.
func (b *builder) widen(x string) string {
	r := b.f64()
	b.ins("cvt.f64.f32", r, x)
	return r
}
func (b *builder) narrow(x string) string {
	r := b.f32()
	b.ins("cvt.rn.f32.f64", r, x)
	return r
}

// erf32 is the host's float32 erf (kernels' erf32): x·P(x²)/Q(x²) over
// [-4, 4], Eigen's rational approximation, evaluated in float64 with the
// host's operations in its order (a product, then a sum: no fma).
func (b *builder) erf32(x32 string) string {
	x := b.clampF64(b.widen(x32), -4, 4)
	x2 := b.opF64("mul.rn.f64", x, x)
	poly := func(c []float64) string {
		p := b.opF64("add.rn.f64", b.opF64("mul.rn.f64", x2, f64i(c[0])), f64i(c[1]))
		for _, v := range c[2:] {
			p = b.opF64("add.rn.f64", b.opF64("mul.rn.f64", x2, p), f64i(v))
		}
		return p
	}
	p := poly([]float64{-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
		-7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02})
	q := poly([]float64{-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
		-1.42647390514189e-02})
	return b.narrow(b.opF64("div.rn.f64", b.opF64("mul.rn.f64", x, p), q))
}

// exp32 is the host's float32 e^x for x <= 0 (kernels' exp32), operation
// for operation: 2^k·e^r with k = floor(x·log2 e + 1/2) and e^r by its
// Taylor polynomial of degree 7, in float32; 0 below -87.
func (b *builder) exp32(x string) string {
	t := b.addF(b.mulF(x, f32i(float32(math.Log2E))), f32i(0.5))
	k := b.f32()
	b.ins("cvt.rmi.f32.f32", k, t)
	r := b.subF(b.subF(x, b.mulF(k, f32i(0.693145751953125))), b.mulF(k, f32i(1.428606765330187e-06)))
	c := []float32{1, 1, 0.5, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040}
	p := b.mulF(r, f32i(c[7]))
	for i := 6; i >= 1; i-- {
		p = b.mulF(r, b.addF(f32i(c[i]), p))
	}
	p = b.addF(f32i(1), p)
	ki, e, s := b.r32(), b.r32(), b.f32()
	b.ins("cvt.rzi.s32.f32", ki, k)
	b.ins("add.s32", ki, ki, "127")
	b.ins("shl.b32", e, ki, "23")
	b.ins("mov.b32", s, e)
	res := b.mulF(p, s)
	under := b.pred()
	b.ins("setp.lt.f32", under, x, f32i(-87))
	return b.selpF32(f32i(0), res, under)
}
