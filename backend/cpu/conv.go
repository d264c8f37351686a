package cpu

import (
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
	register(graph.OpConv2D, convKernel(kernels.Conv2D[float32], kernels.Conv2DBF16, kernels.Conv2D[float64]))
	register(graph.OpConv2DBackpropInput, convKernel(kernels.Conv2DBackpropInput[float32], kernels.Conv2DBackpropInputBF16, kernels.Conv2DBackpropInput[float64]))
	register(graph.OpConv2DBackpropFilter, convKernel(kernels.Conv2DBackpropFilter[float32], kernels.Conv2DBackpropFilterBF16, kernels.Conv2DBackpropFilter[float64]))
	register(graph.OpMaxPool2D, kernel{bind: floats(bindPool(kernels.MaxPool2D[float32]), bindPool(kernels.MaxPool2D[float64]))})
	register(graph.OpAvgPool2D, kernel{bind: floats(bindPool(kernels.AvgPool2D[float32]), bindPool(kernels.AvgPool2D[float64]))})
	register(graph.OpAvgPool2DGrad, kernel{bind: floats(bindPool(kernels.AvgPool2DGrad[float32]), bindPool(kernels.AvgPool2DGrad[float64]))})
	register(graph.OpMaxPool2DGrad, kernel{bind: floats(bindMaxPoolGrad[float32], bindMaxPoolGrad[float64])})
}

// convFunc is a convolution kernel: dst from x and the filter (or dy),
// with work the im2col rows.
type convFunc[T kernels.Float] func(dst, x, filter, work []T, g kernels.ConvGeom, f int) []T

// convKernel is the kernel of a convolution or gradient: f32 or, with
// bfloat16 operands, bf16; f64; the im2col workspace and the packing
// scratch.
func convKernel(f32, bf16 convFunc[float32], f64 convFunc[float64]) kernel {
	return kernel{
		bind: floats(func(b *Bound) func() error {
			if b.Window.BF16 {
				return bindConv(b, bf16)
			}
			return bindConv(b, f32)
		}, func(b *Bound) func() error { return bindConv(b, f64) }),
		lower: func(t *Target, it *compile.Instr) int64 { return convWorkspace(kernels.ConvGeom(it.Window.Geom), it) },
		scratch: func(it *compile.Instr) int {
			return kernels.ConvPackFloats(kernels.ConvGeom(it.Window.Geom), it.Window.F, it.Window.BF16)
		},
	}
}

func bindConv[T kernels.Float](b *Bound, conv convFunc[T]) func() error {
	dst, x, y, work := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), tensor.As[T](b.work)
	g, f := kernels.ConvGeom(b.Window.Geom), b.Window.F
	return func() error {
		conv(dst, x, y, work, g, f)
		return nil
	}
}

// bindPool binds a pooling of its first input (or its gradient dy).
func bindPool[T kernels.Float](pool func(dst, x []T, g kernels.ConvGeom) []T) binder {
	return func(b *Bound) func() error {
		dst, x, g := tensor.As[T](b.out), tensor.As[T](b.in[0]), kernels.ConvGeom(b.Window.Geom)
		return func() error {
			pool(dst, x, g)
			return nil
		}
	}
}

// bindMaxPoolGrad binds x, dy -> dx, through ReluGrad by x when compile
// fused the pair (ReluMask).
func bindMaxPoolGrad[T kernels.Float](b *Bound) func() error {
	dst, x, dy, g := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), kernels.ConvGeom(b.Window.Geom)
	grad := kernels.MaxPool2DGrad[T]
	if b.Window.ReluMask {
		grad = kernels.MaxPool2DReluGrad[T]
	}
	return func() error {
		grad(dst, x, dy, g)
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
