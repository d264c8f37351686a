package ptxtest

import (
	"fmt"
	"math/rand/v2"

	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

func ptxSupports(op graph.Op, dt tensor.DType) bool {
	for _, in := range []tensor.DType{f32, i32, bl, tensor.Invalid} {
		if ptx.Supports(op, dt, in) {
			return true
		}
	}
	return false
}

// conv is a convolution's geometry: input [n, h, w, c], a kh×kw window
// with strides and dilation, f filters.
type conv struct {
	n, h, w, c, kh, kw, sh, sw, dh, dw, f int
	same, bf16                            bool
}

func (c conv) String() string {
	s := fmt.Sprintf("%dx%dx%dx%d-k%dx%d-s%dx%d-f%d", c.n, c.h, c.w, c.c, c.kh, c.kw, c.sh, c.sw, c.f)
	if c.dh > 1 || c.dw > 1 {
		s += fmt.Sprintf("-d%dx%d", c.dh, c.dw)
	}
	if c.same {
		s += "-same"
	}
	if c.bf16 {
		s += "-bf16"
	}
	return s
}

func (c conv) window(x tensor.Shape) compile.Window {
	at := &graph.Attr{Window: [2]int{c.kh, c.kw}, Strides: [2]int{c.sh, c.sw}, Dilation: [2]int{max(c.dh, 1), max(c.dw, 1)}, Same: c.same}
	return compile.NewWindow(x, at)
}

// visionCases: convolutions and their gradients (valid and same padding,
// strides, dilation, bfloat16 products) and max pooling.
func visionCases() []Case {
	var cs []Case
	for _, c := range []conv{
		{n: 3, h: 9, w: 7, c: 3, kh: 3, kw: 3, sh: 1, sw: 1, f: 5},
		{n: 2, h: 10, w: 9, c: 4, kh: 3, kw: 2, sh: 2, sw: 3, f: 7, same: true},
		{n: 2, h: 11, w: 8, c: 2, kh: 3, kw: 3, sh: 1, sw: 2, dh: 2, dw: 1, f: 3, same: true},
		{n: 3, h: 8, w: 8, c: 5, kh: 3, kw: 3, sh: 1, sw: 1, f: 6, same: true, bf16: true},
		{n: 3, h: 9, w: 9, c: 4, kh: 1, kw: 1, sh: 2, sw: 2, f: 6, bf16: true},
		{n: 2, h: 9, w: 9, c: 3, kh: 3, kw: 3, sh: 2, sw: 2, f: 4, same: true, bf16: true},
	} {
		x := sh(c.n, c.h, c.w, c.c)
		g := c.window(x)
		y := sh(c.n, g.OH, g.OW, c.f)
		filter := sh(c.kh, c.kw, c.c, c.f)
		wg := &compile.WindowGeom{Geom: g, F: c.f, BF16: c.bf16}
		mk := func(op graph.Op, out tensor.Shape) compile.Instr {
			return compile.Instr{Op: op, DType: f32, InDType: f32, Shape: out, Window: wg}
		}
		tol := 2e-5
		if c.bf16 {
			tol = 1e-4 // bfloat16 operands: the sums' orders differ more visibly
		}
		cs = append(cs,
			Case{Name: "conv2d/" + c.String(), it: mk(graph.OpConv2D, y), ins: []operand{in32(x...), in32(filter...)}, tol: tol},
			Case{Name: "conv2d_backprop_input/" + c.String(), it: mk(graph.OpConv2DBackpropInput, x), ins: []operand{in32(y...), in32(filter...)}, tol: tol},
			Case{Name: "conv2d_backprop_filter/" + c.String(), it: mk(graph.OpConv2DBackpropFilter, filter), ins: []operand{in32(x...), in32(y...)}, tol: tol})
		if !c.bf16 {
			cs = append(cs, Case{Name: "conv2d_transpose/" + c.String(), it: mk(graph.OpConv2DTranspose, x), ins: []operand{in32(y...), in32(filter...)}, tol: tol})
		}
	}
	for _, c := range []conv{
		{n: 3, h: 9, w: 7, c: 5, kh: 2, kw: 2, sh: 2, sw: 2},
		{n: 2, h: 9, w: 10, c: 3, kh: 3, kw: 3, sh: 2, sw: 1, same: true},
	} {
		x := sh(c.n, c.h, c.w, c.c)
		g := c.window(x)
		y := sh(c.n, g.OH, g.OW, c.c)
		pool := compile.Instr{Op: graph.OpMaxPool2D, DType: f32, InDType: f32, Shape: y, Window: &compile.WindowGeom{Geom: g}}
		grad := compile.Instr{Op: graph.OpMaxPool2DGrad, DType: f32, InDType: f32, Shape: x, Window: &compile.WindowGeom{Geom: g}}
		relu := grad
		relu.Window = &compile.WindowGeom{Geom: g, ReluMask: true}
		cs = append(cs,
			Case{Name: "max_pool2d/" + c.String(), it: pool, ins: []operand{special(x...)}},
			Case{Name: "max_pool2d_grad/" + c.String(), it: grad, ins: []operand{in32(x...), in32(y...)}},
			Case{Name: "max_pool2d_grad/ties/" + c.String(), it: grad, ins: []operand{tied(x...), in32(y...)}},
			Case{Name: "max_pool2d_grad/relu/" + c.String(), it: relu, ins: []operand{in32(x...), in32(y...)}})
	}
	return cs
}

// tied is a float32 operand of a few distinct values: ties, which the
// first maximum of a window wins.
func tied(s ...int) operand {
	o := in32(s...)
	o.fill = func(r *rand.Rand, i int) float64 { return float64(r.IntN(3) - 1) }
	return o
}
