package ptx

import (
	"fmt"
	"strings"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The elementwise ops (graph/elementwise.go), their internal gradients,
// the comparisons, where, casts, gelu and the fused chains compile makes:
// one thread per output element, Block threads a block. Each op computes
// what the host's kernel computes, operation for operation where the host
// rounds in float32 and in float64 where the host does (math.go).
func init() {
	unary := []graph.Op{graph.OpNeg, graph.OpExp, graph.OpLog, graph.OpSqrt, graph.OpRelu, graph.OpSigmoid, graph.OpTanh,
		graph.OpErf, graph.OpAbs, graph.OpReluGrad, graph.OpSigmoidGrad, graph.OpTanhGrad, graph.OpGelu, graph.OpGeluGrad}
	for _, op := range unary {
		register(op, renderer{dtypes: only32, render: renderSame})
	}
	for _, op := range []graph.Op{graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMaximum, graph.OpMinimum} {
		register(op, renderer{dtypes: only32, render: renderBinary})
	}
	for _, op := range []graph.Op{graph.OpEqual, graph.OpNotEqual, graph.OpLess, graph.OpLessEqual, graph.OpGreater, graph.OpGreaterEqual} {
		register(op, renderer{dtypes: func(out, in tensor.DType) bool {
			return out == tensor.Bool && (in == tensor.Float32 || in == tensor.Int32)
		}, render: renderCompare})
	}
	register(graph.OpWhere, renderer{dtypes: func(out, in tensor.DType) bool { return movable(out) }, render: renderWhere})
	register(graph.OpCast, renderer{dtypes: castable, render: renderCast})
	register(graph.OpFused, renderer{dtypes: only32, render: renderFused})
}

// movable reports whether data movement handles dt (by its size).
func movable(dt tensor.DType) bool {
	switch dt.Size() {
	case 1, 2, 4, 8:
		return true
	}
	return false
}

// stepOp computes op of float32 registers a and c (c unused by a
// one-operand op), as the host's chunk kernel of op does.
func (b *builder) stepOp(op graph.Op, a, c string) (string, error) {
	switch op {
	case graph.OpNeg:
		r := b.f32()
		b.ins("neg.f32", r, a)
		return r, nil
	case graph.OpExp:
		return b.narrow(b.exp64(b.widen(a))), nil
	case graph.OpLog:
		return b.narrow(b.log64(b.widen(a))), nil
	case graph.OpSqrt:
		r := b.f32()
		b.ins("sqrt.rn.f32", r, a)
		return r, nil
	case graph.OpRelu: // max(x, 0): NaN kept, -0 gives +0
		p := b.pred()
		b.ins("setp.gtu.f32", p, a, f32i(0))
		return b.selpF32(a, f32i(0), p), nil
	case graph.OpSigmoid:
		return b.narrow(b.sigmoid64(b.widen(a))), nil
	case graph.OpTanh:
		return b.narrow(b.tanh64(b.widen(a))), nil
	case graph.OpErf:
		return b.narrow(b.erf64(b.widen(a))), nil
	case graph.OpAbs: // the host's: -v below 0, else v (-0 and NaN kept)
		p, n := b.pred(), b.f32()
		b.ins("setp.lt.f32", p, a, f32i(0))
		b.ins("neg.f32", n, a)
		return b.selpF32(n, a, p), nil
	case graph.OpReluGrad: // x > 0 ? g : 0
		p := b.pred()
		b.ins("setp.gt.f32", p, a, f32i(0))
		return b.selpF32(c, f32i(0), p), nil
	case graph.OpSigmoidGrad: // g·y·(1-y), in that order
		return b.mulF(b.mulF(c, a), b.subF(f32i(1), a)), nil
	case graph.OpTanhGrad: // g·(1-y²)
		return b.mulF(c, b.subF(f32i(1), b.mulF(a, a))), nil
	case graph.OpGelu: // 0.5·x·(1 + erf(x/√2)), float32 as the host's
		e := b.erf32(b.mulF(a, f32i(invSqrt2)))
		return b.mulF(b.mulF(f32i(0.5), a), b.addF(f32i(1), e)), nil
	case graph.OpGeluGrad: // g·(Φ(x) + x·φ(x))
		e := b.erf32(b.mulF(a, f32i(invSqrt2)))
		phi := b.exp32(b.mulF(b.mulF(f32i(-0.5), a), a))
		d := b.addF(b.mulF(f32i(0.5), b.addF(f32i(1), e)), b.mulF(b.mulF(a, f32i(invSqrt2Pi)), phi))
		return b.mulF(c, d), nil
	case graph.OpAdd:
		return b.addF(a, c), nil
	case graph.OpSub:
		return b.subF(a, c), nil
	case graph.OpMul:
		return b.mulF(a, c), nil
	case graph.OpDiv:
		return b.divF(a, c), nil
	case graph.OpMaximum, graph.OpMinimum:
		return b.maxMin(op == graph.OpMaximum, a, c), nil
	}
	return "", fmt.Errorf("no elementwise kernel for %s", op)
}

// Gelu's constants, as the host's float32 kernels have them.
const (
	invSqrt2   = float32(0.7071067811865476)
	invSqrt2Pi = float32(0.3989422804014327)
)

// maxMin is Go's max (or min) of two float32: NaN if either is, +0 over
// -0 for max and -0 for min, by comparisons and selection alone (PTX's
// max.f32 returns the other operand for a NaN).
func (b *builder) maxMin(isMax bool, a, c string) string {
	cmp, bits := "setp.gt.f32", "and.b32"
	if !isMax {
		cmp, bits = "setp.lt.f32", "or.b32"
	}
	p := b.pred()
	b.ins(cmp, p, a, c)
	r := b.selpF32(a, c, p)
	// equal: the zeros' signs decide (+0 & -0 = +0, +0 | -0 = -0)
	ua, uc, ub, z := b.r32(), b.r32(), b.r32(), b.f32()
	b.ins("mov.b32", ua, a)
	b.ins("mov.b32", uc, c)
	b.ins(bits, ub, ua, uc)
	b.ins("mov.b32", z, ub)
	eq, nan := b.pred(), b.pred()
	b.ins("setp.eq.f32", eq, a, c)
	r = b.selpF32(z, r, eq)
	b.ins("setp.nan.f32", nan, a, c)
	return b.selpF32(b.addF(a, c), r, nan)
}

// erf64 is erf of a float64 (OpErf on float32: the host rounds
// math.Erf(float64(x))): erf32's rational form is only float32-accurate,
// so this is the series and continued fraction of erf in float64.
// |x| < 2: the Maclaurin series Σ (-1)^n x^(2n+1)/(n!(2n+1))·2/√π to
// n = 40 (terms below 1e-17); beyond, 1 - erfc with erfc by Lentz's
// continued fraction (40 terms): exact to about 1e-15.
func (b *builder) erf64(x string) string {
	a := b.f64()
	b.ins("abs.f64", a, x)
	z := b.opF64("mul.rn.f64", a, a)
	// series: Σ c_n z^n with c_n = (-1)^n/(n!(2n+1)), times a·2/√π
	const terms = 40
	coef := make([]float64, terms)
	fact := 1.0
	for n := 0; n < terms; n++ {
		if n > 0 {
			fact *= float64(n)
		}
		s := 1.0
		if n%2 == 1 {
			s = -1
		}
		coef[n] = s / (fact * float64(2*n+1))
	}
	p := f64i(coef[terms-1])
	for n := terms - 2; n >= 0; n-- {
		p = b.fmaF64(p, z, f64i(coef[n]))
	}
	series := b.opF64("mul.rn.f64", b.opF64("mul.rn.f64", p, a), f64i(1.1283791670955126))
	// erfc(a) = e^(-a²)/√π · 1/(a + 1/2/(a + 1/(a + 3/2/(a + ...)))), from the tail
	t := a
	for k := terms; k >= 1; k-- {
		t = b.opF64("add.rn.f64", a, b.opF64("div.rn.f64", f64i(float64(k)/2), t))
	}
	nz := b.f64()
	b.ins("neg.f64", nz, z)
	erfc := b.opF64("div.rn.f64", b.opF64("mul.rn.f64", b.exp64(nz), f64i(0.5641895835477563)), t)
	tail := b.opF64("sub.rn.f64", f64i(1), erfc)
	lt := b.pred()
	b.ins("setp.lt.f64", lt, a, f64i(2))
	r := b.selpF64(series, tail, lt)
	r = b.clampF64(r, 0, 1)
	neg := b.pred()
	b.ins("setp.lt.f64", neg, x, f64i(0))
	nr := b.f64()
	b.ins("neg.f64", nr, r)
	r = b.selpF64(nr, r, neg)
	nan := b.pred()
	b.ins("setp.nan.f64", nan, x, x)
	return b.selpF64(x, r, nan)
}

// elementwiseKernel starts a kernel of one thread per element of n: it
// returns the builder, the pointers of its params parameters and the
// thread's index (threads past n have returned).
func (r *req) elementwiseKernel(family string, params, n int) (*builder, []string, string) {
	b := newBuilder(r.arch, family, Block)
	b.note = fmt.Sprintf("%s %s%v", r.it.Op, r.it.DType, r.it.Shape)
	ptrs := b.paramsN(params)
	i := b.globalIndex()
	b.exitUnless(i, n)
	return b, ptrs, i
}

// renderSame renders an op whose operands have the output's shape: out,
// in0 [, in1].
func renderSame(r *req) error {
	it := r.it
	n := tensor.Shape(it.Shape).Size()
	ops := len(it.In)
	b, p, i := r.elementwiseKernel(strings.ToLower(it.Op.String()), 1+ops, n)
	a := b.load(tensor.Float32, b.offset(p[1], i, 4))
	c := ""
	if ops > 1 {
		c = b.load(tensor.Float32, b.offset(p[2], i, 4))
	}
	v, err := b.stepOp(it.Op, a, c)
	if err != nil {
		return err
	}
	b.store(tensor.Float32, b.offset(p[0], i, 4), v)
	args := []Arg{out(), in(0)}
	if ops > 1 {
		args = append(args, in(1))
	}
	r.launch(b.kernel(), blocks(n), args...)
	return nil
}

// stridedOffsets returns, for output element i of shape, the element
// offset of each operand with the given broadcasting strides (a nil
// strides: the operand has the output's shape, offset i).
func (b *builder) stridedOffsets(i string, shape []int, strides ...[]int) []string {
	offs := make([]string, len(strides))
	var acc []string
	for k, s := range strides {
		if s == nil || rowMajor(shape, s) {
			offs[k] = i
			continue
		}
		z := b.r32()
		b.ins("mov.u32", z, "0")
		offs[k] = z
		acc = append(acc, "")
	}
	if len(acc) == 0 {
		return offs
	}
	q := i
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] == 1 {
			continue
		}
		var idx string
		if d == 0 {
			idx = q
		} else {
			idx = b.remu(q, shape[d])
			q = b.divu(q, shape[d])
		}
		for k, s := range strides {
			if s == nil || rowMajor(shape, s) || s[d] == 0 {
				continue
			}
			offs[k] = b.madu(idx, s[d], offs[k])
		}
	}
	return offs
}

// rowMajor reports whether strides are shape's own row-major strides
// (over its dimensions larger than 1).
func rowMajor(shape, strides []int) bool {
	want := 1
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] != 1 && strides[d] != want {
			return false
		}
		want *= shape[d]
	}
	return true
}

// renderBinary renders a broadcasting arithmetic op.
func renderBinary(r *req) error {
	it := r.it
	g := it.Broadcast
	shape := it.Shape
	n := tensor.Shape(shape).Size()
	b, p, i := r.elementwiseKernel(strings.ToLower(it.Op.String()), 3, n)
	var ia, ic string
	switch g.Path {
	case compile.PathSame:
		ia, ic = i, i
	case compile.PathScalarRight:
		ia, ic = i, "0"
	case compile.PathScalarLeft:
		ia, ic = "0", i
	default:
		offs := b.stridedOffsets(i, shape, g.AStrides, g.BStrides)
		ia, ic = offs[0], offs[1]
	}
	a := b.load(tensor.Float32, b.offset(p[1], ia, 4))
	c := b.load(tensor.Float32, b.offset(p[2], ic, 4))
	v, err := b.stepOp(it.Op, a, c)
	if err != nil {
		return err
	}
	b.store(tensor.Float32, b.offset(p[0], i, 4), v)
	r.launch(b.kernel(), blocks(n), out(), in(0), in(1))
	return nil
}

// renderCompare renders a comparison into bools (one byte, 0 or 1).
func renderCompare(r *req) error {
	it := r.it
	g := it.Broadcast
	n := tensor.Shape(it.Shape).Size()
	b, p, i := r.elementwiseKernel(strings.ToLower(it.Op.String()), 3, n)
	offs := b.stridedOffsets(i, it.Shape, g.AStrides, g.BStrides)
	cmp := map[graph.Op]string{graph.OpEqual: "eq", graph.OpNotEqual: "ne", graph.OpLess: "lt", graph.OpLessEqual: "le",
		graph.OpGreater: "gt", graph.OpGreaterEqual: "ge"}[it.Op]
	q := b.pred()
	if it.InDType == tensor.Int32 {
		x, y := b.r32(), b.r32()
		b.ins("ld.global.u32", x, addr(b.offset(p[1], offs[0], 4), 0))
		b.ins("ld.global.u32", y, addr(b.offset(p[2], offs[1], 4), 0))
		b.ins("setp."+cmp+".s32", q, x, y)
	} else {
		if cmp == "ne" {
			cmp = "neu" // Go's != is true for NaN
		}
		x := b.load(tensor.Float32, b.offset(p[1], offs[0], 4))
		y := b.load(tensor.Float32, b.offset(p[2], offs[1], 4))
		b.ins("setp."+cmp+".f32", q, x, y)
	}
	v, h := b.r32(), b.r16()
	b.ins("selp.u32", v, "1", "0", q)
	b.ins("cvt.u16.u32", h, v)
	b.ins("st.global.u8", addr(b.offset(p[0], i, 1), 0), h)
	r.launch(b.kernel(), blocks(n), out(), in(0), in(1))
	return nil
}

// renderWhere renders cond ? a : b with broadcasting, moving elements of
// any size.
func renderWhere(r *req) error {
	it := r.it
	g := it.Broadcast
	n := tensor.Shape(it.Shape).Size()
	size := it.DType.Size()
	b, p, i := r.elementwiseKernel("where", 4, n)
	offs := b.stridedOffsets(i, it.Shape, g.CStrides, g.AStrides, g.BStrides)
	c := b.r16()
	b.ins("ld.global.u8", c, addr(b.offset(p[1], offs[0], 1), 0))
	q := b.pred()
	b.ins("setp.ne.u16", q, c, "0")
	src := b.r64()
	b.ins("selp.b64", src, b.offset(p[2], offs[1], size), b.offset(p[3], offs[2], size), q)
	b.moveElem(size, b.offset(p[0], i, size), src)
	r.launch(b.kernel(), blocks(n), out(), in(0), in(1), in(2))
	return nil
}

// castable reports whether a cast from in to out is rendered: between
// float32 and the 16-bit floats, int32, uint8 and bool.
func castable(out, in tensor.DType) bool {
	other := func(dt tensor.DType) bool {
		switch dt {
		case tensor.Float32, tensor.BFloat16, tensor.Float16, tensor.Int32, tensor.Uint8, tensor.Bool:
			return true
		}
		return false
	}
	return (out == tensor.Float32 && other(in)) || (in == tensor.Float32 && other(out))
}

// renderCast renders a cast through float32.
func renderCast(r *req) error {
	it := r.it
	n := tensor.Shape(it.Shape).Size()
	from, to := it.InDType, it.DType
	b, p, i := r.elementwiseKernel("cast", 2, n)
	src, dst := b.offset(p[1], i, from.Size()), b.offset(p[0], i, to.Size())
	var f string
	switch from {
	case tensor.Float32, tensor.BFloat16, tensor.Float16:
		f = b.load(from, src)
	case tensor.Int32:
		x := b.r32()
		b.ins("ld.global.u32", x, addr(src, 0))
		f = b.f32()
		b.ins("cvt.rn.f32.s32", f, x)
	case tensor.Uint8, tensor.Bool:
		x := b.r16()
		b.ins("ld.global.u8", x, addr(src, 0))
		f = b.f32()
		b.ins("cvt.rn.f32.u16", f, x)
	}
	switch to {
	case tensor.Float32, tensor.BFloat16, tensor.Float16:
		b.store(to, dst, f)
	case tensor.Int32: // toward zero, as Go converts
		x := b.r32()
		b.ins("cvt.rzi.s32.f32", x, f)
		b.ins("st.global.u32", addr(dst, 0), x)
	case tensor.Uint8:
		x := b.r16()
		b.ins("cvt.rzi.u16.f32", x, f)
		b.ins("st.global.u8", addr(dst, 0), x)
	case tensor.Bool: // nonzero (NaN too) is true, -0 false
		q, v, h := b.pred(), b.r32(), b.r16()
		b.ins("setp.neu.f32", q, f, f32i(0))
		b.ins("selp.u32", v, "1", "0", q)
		b.ins("cvt.u16.u32", h, v)
		b.ins("st.global.u8", addr(dst, 0), h)
	}
	r.launch(b.kernel(), blocks(n), out(), in(0))
	return nil
}

// renderFused renders a fused chain: each thread loads its element of
// every leaf it reads (a scalar leaf's one value, a periodic leaf's
// element i mod Period, a condition's byte), runs the steps in registers
// and stores the output.
func renderFused(r *req) error {
	it := r.it
	f := it.Fused
	n := tensor.Shape(it.Shape).Size()
	names := make([]string, 0, len(f.Steps))
	for _, s := range f.Steps {
		names = append(names, strings.ToLower(s.Op.String()))
	}
	b, p, i := r.elementwiseKernel("fused", 1+len(f.Leaves), n)
	b.note = fmt.Sprintf("fused %s %s%v", strings.Join(names, ","), it.DType, it.Shape)
	leaves := make([]string, len(f.Leaves))
	leaf := func(k int) string {
		if leaves[k] != "" {
			return leaves[k]
		}
		l := f.Leaves[k]
		switch l.Kind {
		case compile.LeafFull:
			leaves[k] = b.load(tensor.Float32, b.offset(p[1+k], i, 4))
		case compile.LeafScalar:
			leaves[k] = b.load(tensor.Float32, p[1+k])
		case compile.LeafPeriodic:
			leaves[k] = b.load(tensor.Float32, b.offset(p[1+k], b.remu(i, l.Period), 4))
		case compile.LeafCond:
			c := b.r16()
			b.ins("ld.global.u8", c, addr(p[1+k], 0))
			leaves[k] = c
		}
		return leaves[k]
	}
	regs := make([]string, f.Regs)
	operand := func(x int) string {
		if x >= 0 {
			return regs[x]
		}
		return leaf(-x - 1)
	}
	for _, s := range f.Steps {
		var v string
		if s.Op == graph.OpWhere {
			q := b.pred()
			b.ins("setp.ne.u16", q, leaf(-s.A-1), "0")
			v = b.selpF32(operand(s.B), operand(s.C), q)
		} else {
			a, c := operand(s.A), ""
			if binaryStep(s.Op) {
				c = operand(s.B)
			}
			var err error
			if v, err = b.stepOp(s.Op, a, c); err != nil {
				return err
			}
		}
		if s.Dst < 0 {
			b.store(tensor.Float32, b.offset(p[0], i, 4), v)
		} else {
			regs[s.Dst] = v
		}
	}
	args := []Arg{out()}
	for k := range f.Leaves {
		args = append(args, in(k))
	}
	r.launch(b.kernel(), blocks(n), args...)
	return nil
}

// binaryStep reports whether a chain step of op reads two operands.
func binaryStep(op graph.Op) bool {
	switch op {
	case graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMaximum, graph.OpMinimum,
		graph.OpReluGrad, graph.OpSigmoidGrad, graph.OpTanhGrad, graph.OpGeluGrad:
		return true
	}
	return false
}
