package ptx

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Max pooling and its gradient (graph/conv.go): one thread per output
// element walks its window in row-major order and keeps the first maximum
// (a NaN wins), as the host's argmaxWindow; the gradient adds each dy
// element to that cell with an atomic add into a zeroed dx (overlapping
// windows sum, in no fixed order), through ReluGrad by x when compile
// fused the pair (ReluMask: only cells whose x is above 0).
func init() {
	register(graph.OpMaxPool2D, renderer{dtypes: only32, render: renderMaxPool})
	register(graph.OpMaxPool2DGrad, renderer{dtypes: only32, render: renderMaxPool})
}

// renderMaxPool renders max_pool2d (x -> y) or max_pool2d_grad (x, dy ->
// dx).
func renderMaxPool(r *req) error {
	it := r.it
	g := it.Window.Geom
	grad := it.Op == graph.OpMaxPool2DGrad
	n := g.N * g.OH * g.OW * g.C
	if grad {
		r.fill(g.N*g.H*g.W*g.C, 4)
	}
	if n == 0 {
		if !grad {
			r.fill(n, 4)
		}
		return nil
	}
	family, params := "max_pool", 2
	if grad {
		family, params = "max_pool_grad", 3
	}
	b, p, i := r.elementwiseKernel(family, params, n)
	b.note = fmt.Sprintf("%s window %dx%d stride %dx%d over %dx%dx%dx%d", it.Op, g.KH, g.KW, g.SH, g.SW, g.N, g.H, g.W, g.C)
	if it.Window.ReluMask {
		b.note += " through relu"
	}
	q, ch := b.divu(i, g.C), b.remu(i, g.C)
	img, pos := b.divu(q, g.OH*g.OW), b.remu(q, g.OH*g.OW)
	oh, ow := b.divu(pos, g.OW), b.remu(pos, g.OW)
	h0, w0 := b.r32(), b.r32()
	b.ins("mad.lo.s32", h0, oh, u32i(g.SH), u32i(-g.PadTop))
	b.ins("mad.lo.s32", w0, ow, u32i(g.SW), u32i(-g.PadLeft))
	// the first cell of the window inside the input
	hc, wc := b.r32(), b.r32()
	b.ins("max.s32", hc, h0, "0")
	b.ins("max.s32", wc, w0, "0")
	cellOf := func(ih, iw string) string {
		return b.madu(b.madu(b.madu(img, g.H, ih), g.W, iw), g.C, ch)
	}
	best := cellOf(hc, wc)
	bv := b.load(tensor.Float32, b.offset(p[1], best, 4))
	for kh := 0; kh < g.KH; kh++ {
		for kw := 0; kw < g.KW; kw++ {
			ih, iw := b.r32(), b.r32()
			b.ins("add.s32", ih, h0, u32i(kh))
			b.ins("add.s32", iw, w0, u32i(kw))
			ok := b.inside2(ih, iw, g.H, g.W)
			cell := cellOf(ih, iw)
			v := b.f32()
			b.ins("mov.f32", v, f32i(0))
			b.guarded(ok, false, "ld.global.f32", v, addr(b.offset(p[1], cell, 4), 0))
			// v > best, or v is NaN and best is not
			gt, vn, bn, take := b.pred(), b.pred(), b.pred(), b.pred()
			b.ins("setp.gt.f32", gt, v, bv)
			b.ins("setp.nan.f32", vn, v, v)
			b.ins("setp.num.f32", bn, bv, bv)
			b.ins("and.pred", vn, vn, bn)
			b.ins("or.pred", take, gt, vn)
			b.ins("and.pred", take, take, ok)
			b.ins("selp.f32", bv, v, bv, take)
			b.ins("selp.b32", best, cell, best, take)
		}
	}
	if !grad {
		b.store(tensor.Float32, b.offset(p[0], i, 4), bv)
		r.launch(b.kernel(), blocks(n), out(), in(0))
		return nil
	}
	dy := b.load(tensor.Float32, b.offset(p[2], i, 4))
	dst := addr(b.offset(p[0], best, 4), 0)
	if it.Window.ReluMask {
		pos := b.pred()
		b.ins("setp.gt.f32", pos, bv, f32i(0))
		b.guarded(pos, false, "red.global.add.f32", dst, dy)
	} else {
		b.ins("red.global.add.f32", dst, dy)
	}
	r.launch(b.kernel(), blocks(n), out(), in(0), in(1))
	return nil
}
