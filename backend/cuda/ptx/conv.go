package ptx

import (
	"fmt"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Convolution (graph/conv.go, graph/vision.go) as im2col and a product on
// cuBLAS (Chellapilla, Puri and Simard 2006), as the host's kernels lower
// it (kernels/conv.go): per chunk of images, each output position's
// window is copied into a row of a [rows, KH·KW·C] matrix in the
// workspace, which multiplies the filter [KH·KW·C, F]. The input gradient
// multiplies dy by the filter's transpose into the workspace and col2im
// sums each input cell's windows in a gather (one thread per input cell,
// no atomics: the same sum every run). Dilation is taken; filter groups
// are not rendered. Under mixed_bfloat16 (WindowGeom.BF16) the operands
// are rounded to bfloat16 in the workspace and the product runs on
// cublasGemmEx with float32 sums, as the host rounds them.
func init() {
	for _, op := range []graph.Op{graph.OpConv2D, graph.OpConv2DBackpropInput, graph.OpConv2DBackpropFilter, graph.OpConv2DTranspose} {
		register(op, renderer{dtypes: only32, render: renderConv})
	}
}

// ConvWorkspaceLimit bounds the im2col workspace of one convolution: as
// many images as fit (at least one) go through one product.
const ConvWorkspaceLimit = 32 << 20

// convPlan is how a convolution is chunked.
type convPlan struct {
	g           compile.Window
	f, per, k   int // output channels, output positions per image, window elements
	img, outImg int // elements of one input image, of one output image
	chunk       int // images per chunk
	bf16        bool
	colsOff     int64 // the im2col matrix in the workspace
	filterOff   int64 // bfloat16 filter (bf16)
	dyOff       int64 // bfloat16 dy of a chunk (bf16 gradients)
	colsElem    int   // bytes of an im2col element
}

func newConvPlan(r *req) (*convPlan, error) {
	w := r.it.Window
	g := w.Geom
	if g.Groups > 1 {
		return nil, fmt.Errorf("filter groups (%d) are not rendered for the GPU", g.Groups)
	}
	c := &convPlan{g: g, f: w.F, per: g.OH * g.OW, k: g.KH * g.KW * g.C, img: g.H * g.W * g.C, bf16: w.BF16, colsElem: 4}
	c.outImg = c.per * c.f
	if c.bf16 && r.it.Op != graph.OpConv2DBackpropInput && r.it.Op != graph.OpConv2DTranspose {
		c.colsElem = 2 // the product reads the im2col matrix: bfloat16
	}
	one := int64(c.per * c.k * c.colsElem)
	c.chunk = 1
	if one > 0 {
		c.chunk = int(max(1, min(int64(g.N), ConvWorkspaceLimit/one)))
	}
	c.colsOff = r.work(int64(c.chunk) * one)
	if c.bf16 && r.it.Op != graph.OpConv2DBackpropFilter {
		c.filterOff = r.work(int64(c.k * c.f * 2))
	}
	if c.bf16 && r.it.Op != graph.OpConv2D {
		c.dyOff = r.work(int64(c.chunk * c.per * c.f * 2))
	}
	return c, nil
}

// renderConv renders a convolution or one of its gradients.
func renderConv(r *req) error {
	c, err := newConvPlan(r)
	if err != nil {
		return err
	}
	g := c.g
	if c.k == 0 || c.per == 0 || g.N == 0 || c.f == 0 {
		r.fill(tensor.Shape(r.it.Shape).Size(), 4)
		return nil
	}
	in := tensor.Float32
	if c.bf16 {
		in = tensor.BFloat16
	}
	filterArg := func(i int) Arg {
		if !c.bf16 {
			return Arg{Role: RoleIn, Index: i}
		}
		r.cast(work(c.filterOff), Arg{Role: RoleIn, Index: i}, c.k*c.f, tensor.BFloat16)
		return work(c.filterOff)
	}
	cols := work(c.colsOff)
	switch r.it.Op {
	case graph.OpConv2D: // x, filter -> y
		filter := filterArg(1)
		for n0 := 0; n0 < g.N; n0 += c.chunk {
			nb := min(c.chunk, g.N-n0)
			r.im2col(c, cols, Arg{Role: RoleIn, Index: 0, Offset: int64(n0 * c.img * 4)}, nb)
			r.gemm(Gemm{M: nb * c.per, N: c.f, K: c.k, In: in, A: cols, B: filter, C: out().at(int64(n0 * c.outImg * 4))})
		}
	case graph.OpConv2DBackpropFilter: // x, dy -> dfilter
		for n0 := 0; n0 < g.N; n0 += c.chunk {
			nb := min(c.chunk, g.N-n0)
			r.im2col(c, cols, Arg{Role: RoleIn, Index: 0, Offset: int64(n0 * c.img * 4)}, nb)
			dy := Arg{Role: RoleIn, Index: 1, Offset: int64(n0 * c.outImg * 4)}
			if c.bf16 {
				r.cast(work(c.dyOff), dy, nb*c.outImg, tensor.BFloat16)
				dy = work(c.dyOff)
			}
			r.gemm(Gemm{M: c.k, N: c.f, K: nb * c.per, TransA: true, Accumulate: n0 > 0, In: in, A: cols, B: dy, C: out()})
		}
	default: // conv2d_backprop_input, conv2d_transpose: dy, filter -> dx
		filter := filterArg(1)
		for n0 := 0; n0 < g.N; n0 += c.chunk {
			nb := min(c.chunk, g.N-n0)
			dy := Arg{Role: RoleIn, Index: 0, Offset: int64(n0 * c.outImg * 4)}
			if c.bf16 {
				r.cast(work(c.dyOff), dy, nb*c.outImg, tensor.BFloat16)
				dy = work(c.dyOff)
			}
			r.gemm(Gemm{M: nb * c.per, N: c.k, K: c.f, TransB: true, In: in, A: dy, B: filter, C: cols})
			r.col2im(c, out().at(int64(n0*c.img*4)), cols, nb)
		}
	}
	return nil
}

// windowPos computes, for a window tap, the input row or column o·S - Pad
// + t·D (s32) and whether it lies in [0, size).
func (b *builder) windowPos(o string, s, pad, t, d, size int) (string, string) {
	v := b.r32()
	b.ins("mad.lo.s32", v, o, u32i(s), u32i(t*d-pad))
	lo, hi, ok := b.pred(), b.pred(), b.pred()
	b.ins("setp.ge.s32", lo, v, "0")
	b.ins("setp.lt.s32", hi, v, u32i(size))
	b.ins("and.pred", ok, lo, hi)
	return v, ok
}

// im2col appends the launch that writes the windows of nb images of x
// (src: the chunk's first image) into cols, one row of K elements per
// output position (row-major over image, oh, ow) in the filter's (kh, kw,
// c) order; padding is zero.
func (r *req) im2col(c *convPlan, cols, src Arg, nb int) {
	g := c.g
	n := nb * c.per * c.k
	b, p, i := r.elementwiseKernel("im2col", 2, n)
	b.note = fmt.Sprintf("im2col of %d images %dx%dx%d, window %dx%d stride %dx%d", nb, g.H, g.W, g.C, g.KH, g.KW, g.SH, g.SW)
	q, k := b.divu(i, c.k), b.remu(i, c.k)
	img, pos := b.divu(q, c.per), b.remu(q, c.per)
	oh, ow := b.divu(pos, g.OW), b.remu(pos, g.OW)
	kh, rest := b.divu(k, g.KW*g.C), b.remu(k, g.KW*g.C)
	kw, ch := b.divu(rest, g.C), b.remu(rest, g.C)
	dh, dw := max(g.DH, 1), max(g.DW, 1)
	ih, iw := b.r32(), b.r32()
	b.ins("mad.lo.s32", ih, oh, u32i(g.SH), u32i(-g.PadTop))
	b.ins("mad.lo.s32", ih, kh, u32i(dh), ih)
	b.ins("mad.lo.s32", iw, ow, u32i(g.SW), u32i(-g.PadLeft))
	b.ins("mad.lo.s32", iw, kw, u32i(dw), iw)
	ok := b.inside2(ih, iw, g.H, g.W)
	v := b.f32()
	b.ins("mov.f32", v, f32i(0))
	cell := b.madu(b.madu(b.madu(img, g.H, ih), g.W, iw), g.C, ch)
	b.guarded(ok, false, "ld.global.f32", v, addr(b.offset(p[1], cell, 4), 0))
	dt := tensor.Float32
	if c.colsElem == 2 {
		dt = tensor.BFloat16
	}
	b.store(dt, b.offset(p[0], i, c.colsElem), v)
	r.launch(b.kernel(), blocks(n), cols, src)
}

// inside2 returns the predicate 0 <= y < h and 0 <= x < w (s32).
func (b *builder) inside2(y, x string, h, w int) string {
	p := make([]string, 4)
	for j := range p {
		p[j] = b.pred()
	}
	b.ins("setp.ge.s32", p[0], y, "0")
	b.ins("setp.lt.s32", p[1], y, u32i(h))
	b.ins("setp.ge.s32", p[2], x, "0")
	b.ins("setp.lt.s32", p[3], x, u32i(w))
	b.ins("and.pred", p[0], p[0], p[1])
	b.ins("and.pred", p[2], p[2], p[3])
	b.ins("and.pred", p[0], p[0], p[2])
	return p[0]
}

// col2im appends the launch that sets each cell of nb images of dx (dst:
// the chunk's first image) to the sum of the im2col entries read from it:
// for every tap (kh, kw), in order, the output position whose window puts
// that tap on the cell, if any.
func (r *req) col2im(c *convPlan, dst, cols Arg, nb int) {
	g := c.g
	n := nb * c.img
	b, p, i := r.elementwiseKernel("col2im", 2, n)
	b.note = fmt.Sprintf("col2im of %d images %dx%dx%d, window %dx%d stride %dx%d", nb, g.H, g.W, g.C, g.KH, g.KW, g.SH, g.SW)
	img, rest := b.divu(i, c.img), b.remu(i, c.img)
	ih, rest2 := b.divu(rest, g.W*g.C), b.remu(rest, g.W*g.C)
	iw, ch := b.divu(rest2, g.C), b.remu(rest2, g.C)
	dh, dw := max(g.DH, 1), max(g.DW, 1)
	sum := b.accF32(0)
	for kh := 0; kh < g.KH; kh++ {
		th, okh := b.tapOrigin(ih, g.PadTop-kh*dh, g.SH, g.OH)
		for kw := 0; kw < g.KW; kw++ {
			tw, okw := b.tapOrigin(iw, g.PadLeft-kw*dw, g.SW, g.OW)
			ok := b.pred()
			b.ins("and.pred", ok, okh, okw)
			row := b.madu(b.madu(img, g.OH, th), g.OW, tw)
			col := b.addu(ch, u32i((kh*g.KW+kw)*g.C))
			v := b.f32()
			b.ins("mov.f32", v, f32i(0))
			b.guarded(ok, false, "ld.global.f32", v, addr(b.offset(p[1], b.madu(row, c.k, col), 4), 0))
			b.guarded(ok, false, "add.rn.f32", sum, sum, v)
		}
	}
	b.store(tensor.Float32, b.offset(p[0], i, 4), sum)
	r.launch(b.kernel(), blocks(n), dst, cols)
}

// tapOrigin returns the output position o with o·s = in + shift (the
// window whose tap lands on input position in) and whether it exists: in +
// shift >= 0, divisible by s, and o < out.
func (b *builder) tapOrigin(in string, shift, s, out int) (string, string) {
	t := b.r32()
	b.ins("add.s32", t, in, u32i(shift))
	ge, ok := b.pred(), b.pred()
	b.ins("setp.ge.s32", ge, t, "0")
	o := t
	if s > 1 {
		o = b.r32()
		b.ins("div.s32", o, t, u32i(s))
		m := b.r32()
		b.ins("rem.s32", m, t, u32i(s))
		div := b.pred()
		b.ins("setp.eq.s32", div, m, "0")
		b.ins("and.pred", ge, ge, div)
	}
	lt := b.pred()
	b.ins("setp.lt.s32", lt, o, u32i(out))
	b.ins("and.pred", ok, ge, lt)
	return o, ok
}

// cast appends a launch converting n float32 elements at src into dt at
// dst.
func (r *req) cast(dst, src Arg, n int, dt tensor.DType) {
	if n == 0 {
		return
	}
	b := newBuilder(r.arch, "to_"+dt.String(), Block)
	b.note = fmt.Sprintf("float32 to %s, %d elements", dt, n)
	p := b.paramsN(2)
	i := b.globalIndex()
	b.exitUnless(i, n)
	b.store(dt, b.offset(p[0], i, dt.Size()), b.load(tensor.Float32, b.offset(p[1], i, 4)))
	r.launch(b.kernel(), blocks(n), dst, src)
}
