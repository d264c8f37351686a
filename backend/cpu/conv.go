package cpu

import (
	"slices"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// Convolution and pooling (graph/conv.go) and their internal gradients on
// the host. The convolutions lower their input to im2col rows in the
// instruction's workspace (convWorkspace) and, in float32, pack their
// operands into the engine's scratch; Conv2D with dilation or groups runs
// the same kernels, which pick the general path from the geometry.
func init() {
	register(graph.OpConv2D, convKernel(kernels.ConvForward, kernels.Conv2DBF16On, kernels.Conv2DOn[float64]))
	register(graph.OpConv2DBackpropInput, convKernel(kernels.ConvInputGrad, kernels.Conv2DBackpropInputBF16On, kernels.Conv2DBackpropInputOn[float64]))
	register(graph.OpConv2DBackpropFilter, convKernel(kernels.ConvFilterGrad, kernels.Conv2DBackpropFilterBF16On, kernels.Conv2DBackpropFilterOn[float64]))
	register(graph.OpMaxPool2D, kernel{bind: floats(bindPool(kernels.MaxPool2DOn[float32]), bindPool(kernels.MaxPool2DOn[float64]))})
	register(graph.OpAvgPool2D, kernel{bind: floats(bindPool(onOne(kernels.AvgPool2D[float32])), bindPool(onOne(kernels.AvgPool2D[float64])))})
	register(graph.OpAvgPool2DGrad, kernel{bind: floats(bindPool(onOne(kernels.AvgPool2DGrad[float32])), bindPool(onOne(kernels.AvgPool2DGrad[float64])))})
	register(graph.OpMaxPool2DGrad, kernel{bind: floats(bindMaxPoolGrad[float32], bindMaxPoolGrad[float64])})
}

// convFunc is a convolution kernel: dst from x and the filter (or dy),
// with work the im2col rows.
type convFunc[T kernels.Float] func(p *kernels.Pool, dst, x, filter, work []T, g kernels.ConvGeom, f int) []T

// convKernel is the kernel of a convolution or gradient: f32 or, with
// bfloat16 operands, bf16; f64; the im2col workspace and the packing
// scratch.
func convKernel(kind kernels.ConvKind, bf16 convFunc[float32], f64 convFunc[float64]) kernel {
	return kernel{
		bind: floats(func(b *Bound) func() error {
			if b.Window.BF16 {
				return bindConv(b, bf16)
			}
			return bindConvChosen(b, kind)
		}, func(b *Bound) func() error { return bindConv(b, f64) }),
		lower: func(t *Target, it *compile.Instr) int64 {
			n := convChoiceWorkspace(kind, it)
			if it.Window.Moments {
				n = convMomentsAt(n) + 8*int64(convMomentsWork(it))
			}
			return n
		},
		scratch: func(it *compile.Instr) int {
			return kernels.ConvPackFloats(kernels.ConvGeom(it.Window.Geom), it.Window.F, it.Window.BF16)
		},
	}
}

func bindConv[T kernels.Float](b *Bound, conv convFunc[T]) func() error {
	dst, x, y, work := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), tensor.As[T](b.work)
	g, f, p := kernels.ConvGeom(b.Window.Geom), b.Window.F, b.pool
	return func() error {
		conv(p, dst, x, y, work, g, f)
		return nil
	}
}

// bindConvChosen binds a float32 convolution product of kind with its
// products in float32, its algorithm picked by b.choices (choose.go): at
// once, or by a measurement BindHost runs once every instruction is bound
// (b.pending). A conv2d with Moments also writes its output's moments to
// its part (kernels.ConvMomentsOn), their sums in its workspace after the
// product's; the measurement times the product alone.
func bindConvChosen(b *Bound, kind kernels.ConvKind) func() error {
	dst, x, y, work := tensor.As[float32](b.out), tensor.As[float32](b.in[0]), tensor.As[float32](b.in[1]), tensor.As[float32](b.work)
	g, f, p := kernels.ConvGeom(b.Window.Geom), b.Window.F, b.pool
	algo := new(kernels.ConvAlgo)
	b.algo, b.convKind = algo, kind
	var moments []float32
	var mwork []float64
	if b.Window.Moments {
		if kind != kernels.ConvForward || len(b.more) != 1 || b.more[0] == nil {
			return nil
		}
		at, n := convMomentsAt(convChoiceWorkspace(kind, b.Instr)), 8*int64(convMomentsWork(b.Instr))
		if int64(len(b.work)) < at+n {
			return nil
		}
		moments, mwork = tensor.As[float32](b.more[0]), tensor.As[float64](b.work[at:at+n])
		work = work[:at/4]
	}
	run := func(a kernels.ConvAlgo) { kernels.ConvOn(p, kind, a, dst, x, y, work, g, f) }
	b.pending = b.choices.pick(b, kind, algo, run)
	if moments != nil {
		return func() error {
			kernels.ConvMomentsOn(p, *algo, dst, x, y, work, g, f, moments, mwork)
			return nil
		}
	}
	return func() error {
		kernels.ConvOn(p, kind, *algo, dst, x, y, work, g, f)
		return nil
	}
}

// convMomentsWork is the float64 sums of a conv2d's output moments
// (compile.WindowGeom.Moments): kernels.MomentsWork over its output's
// images.
func convMomentsWork(it *compile.Instr) int {
	w := it.Window.Geom
	rows := w.N * w.OH * w.OW
	return kernels.MomentsWork(rows, it.Window.F, kernels.MomentsBlock(rows, w.OH*w.OW))
}

// convMomentsAt is where the moments' sums start in a conv2d's workspace
// after a product's n bytes: n rounded up to a float64.
func convMomentsAt(n int64) int64 { return (n + 7) &^ 7 }

// onOne adapts a pooling that runs on the calling thread alone.
func onOne[T kernels.Float](f func(dst, x []T, g kernels.ConvGeom) []T) func(*kernels.Pool, []T, []T, kernels.ConvGeom) []T {
	return func(_ *kernels.Pool, dst, x []T, g kernels.ConvGeom) []T { return f(dst, x, g) }
}

// bindPool binds a pooling of its first input (or its gradient dy).
func bindPool[T kernels.Float](pool func(p *kernels.Pool, dst, x []T, g kernels.ConvGeom) []T) binder {
	return func(b *Bound) func() error {
		dst, x, g, p := tensor.As[T](b.out), tensor.As[T](b.in[0]), kernels.ConvGeom(b.Window.Geom), b.pool
		return func() error {
			pool(p, dst, x, g)
			return nil
		}
	}
}

// bindMaxPoolGrad binds x, dy -> dx, through ReluGrad by x when compile
// fused the pair (ReluMask).
func bindMaxPoolGrad[T kernels.Float](b *Bound) func() error {
	dst, x, dy, g, p := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), kernels.ConvGeom(b.Window.Geom), b.pool
	grad := kernels.MaxPool2DGradOn[T]
	if b.Window.ReluMask {
		grad = kernels.MaxPool2DReluGradOn[T]
	}
	return func() error {
		grad(p, dst, x, dy, g)
		return nil
	}
}

// generalConvWorkspace is the workspace of a dilated or grouped
// convolution (or gradient): as many images' im2col rows as fit
// ConvWorkspaceLimit, at least one (kernels.ConvGeneralWork).
func generalConvWorkspace(g kernels.ConvGeom, it *compile.Instr) int64 {
	size := int64(it.DType.Size())
	one := int64(kernels.ConvGeneralWork(g, it.Window.F, 1)) * size
	images := int64(1)
	if one > 0 {
		images = max(1, min(int64(g.N), ConvWorkspaceLimit/one))
	}
	return int64(kernels.ConvGeneralWork(g, it.Window.F, int(images))) * size
}

// convChoiceWorkspace is the workspace of the convolution product kind of
// it: convWorkspace, or, in float32 where Winograd or the stem filter
// gradient's tiles can run it, what they need where that is more, so that
// every algorithm the choice can pick (convAlgos) runs in it.
func convChoiceWorkspace(kind kernels.ConvKind, it *compile.Instr) int64 {
	n, _ := convBaseWorkspace(kind, it) // F(4×4, 3×3) is offered only within it
	return n
}

// convBaseWorkspace returns the workspace of the convolution product kind
// of it that every algorithm but F(4×4, 3×3) runs in, and what F(4×4,
// 3×3) needs (0 where it is not offered).
func convBaseWorkspace(kind kernels.ConvKind, it *compile.Instr) (n, wg4 int64) {
	g := kernels.ConvGeom(it.Window.Geom)
	n = convWorkspace(g, it)
	if it.DType == tensor.Float32 && !it.Window.BF16 {
		for _, a := range kernels.ConvAlgos(kind, g, it.Window.F) {
			switch a {
			case kernels.ConvWinograd:
				n = max(n, 4*int64(kernels.WinogradWork(a, kind, g, it.Window.F)))
			case kernels.ConvWinograd4:
				wg4 = 4 * int64(kernels.WinogradWork(a, kind, g, it.Window.F))
			}
		}
		if kind == kernels.ConvFilterGrad {
			n = max(n, 4*int64(kernels.StemFilterWork(g, it.Window.F)))
		}
	}
	return n, wg4
}

// convAlgos returns the algorithms the float32 convolution product kind
// of it may run: kernels.ConvAlgos, less F(4×4, 3×3) where it needs more
// workspace than the others. A candidate never grows a plan: F(4×4,
// 3×3)'s transformed filter holds 36 floats a channel pair (the filter
// gradient's two groups 72), more than im2col's rows of a small batch.
func convAlgos(kind kernels.ConvKind, it *compile.Instr) []kernels.ConvAlgo {
	algos := kernels.ConvAlgos(kind, kernels.ConvGeom(it.Window.Geom), it.Window.F)
	if n, wg4 := convBaseWorkspace(kind, it); wg4 > n {
		algos = slices.DeleteFunc(algos, func(a kernels.ConvAlgo) bool { return a == kernels.ConvWinograd4 })
	}
	return algos
}

// convWorkspace is the workspace of a convolution of geometry g: the
// im2col rows of as many images as fit ConvWorkspaceLimit (at least one),
// or generalConvWorkspace.
func convWorkspace(g kernels.ConvGeom, it *compile.Instr) int64 {
	if g.General() {
		return generalConvWorkspace(g, it)
	}
	per := int64(g.Im2ColSize(1) * it.DType.Size())
	images := max(1, min(int64(g.N), ConvWorkspaceLimit/max(per, 1)))
	return int64(g.Im2ColSize(int(images)) * it.DType.Size())
}
