package cpu

import (
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The host kernels of the vision ops (graph/vision.go). Conv2D with
// dilation or groups runs through the Conv2D case of compute: the kernels
// pick the general path from the geometry; its workspace is
// generalConvWorkspace.

func init() {
	moreKernels[graph.OpConv2DTranspose] = func(b *Bound) error {
		return floatKernel(b, conv2DTranspose[float32], conv2DTranspose[float64])
	}
	moreWorkspace[graph.OpConv2DTranspose] = func(t *Target, it *compile.Instr) int64 {
		return convWorkspace(kernels.ConvGeom(it.Geom), it)
	}
	moreScratch[graph.OpConv2DTranspose] = func(it *compile.Instr) int {
		return kernels.ConvPackFloats(kernels.ConvGeom(it.Geom), it.F, false)
	}
	moreKernels[graph.OpResizeBilinear] = func(b *Bound) error {
		return floatKernel(b, resize[float32], resize[float64])
	}
	moreKernels[graph.OpResizeBilinearGrad] = func(b *Bound) error {
		return floatKernel(b, resizeGrad[float32], resizeGrad[float64])
	}
	moreKernels[graph.OpMoments] = func(b *Bound) error {
		return floatKernel(b, moments[float32], moments[float64])
	}
	moreWorkspace[graph.OpMoments] = func(t *Target, it *compile.Instr) int64 {
		return int64(8 * kernels.MomentsWork(it.Cols))
	}
	for _, op := range []graph.Op{graph.OpReluClip, graph.OpReluClipGrad, graph.OpElu, graph.OpEluGrad,
		graph.OpSilu, graph.OpSiluGrad, graph.OpHardSwish, graph.OpHardSwishGrad,
		graph.OpSoftplus, graph.OpSoftplusGrad, graph.OpSoftsign, graph.OpSoftsignGrad} {
		moreKernels[op] = func(b *Bound) error {
			return floatKernel(b, activation[float32], activation[float64])
		}
	}
}

// generalConvWorkspace is the workspace of a dilated or grouped
// convolution (or gradient): as many images' im2col rows as fit
// ConvWorkspaceLimit, at least one (kernels.ConvGeneralWork).
func generalConvWorkspace(g kernels.ConvGeom, it *compile.Instr) int64 {
	size := int64(it.DType.Size())
	one := int64(kernels.ConvGeneralWork(g, it.F, 1)) * size
	images := int64(1)
	if one > 0 {
		images = max(1, min(int64(g.N), ConvWorkspaceLimit/one))
	}
	return int64(kernels.ConvGeneralWork(g, it.F, int(images))) * size
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

// conv2DTranspose runs Conv2DTranspose: x [N, H, W, Cin] as the dy of a
// Conv2D from the output [Of] with the filter [KH, KW, Cout, Cin].
func conv2DTranspose[T kernels.Float](b *Bound) error {
	kernels.Conv2DBackpropInput(tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), tensor.As[T](b.work), b.geom, b.F)
	return nil
}

func resizeGeom(b *Bound) kernels.ResizeGeom {
	g := b.Geom
	return kernels.ResizeGeom{N: g.N, H: g.H, W: g.W, C: g.C, OH: g.OH, OW: g.OW}
}

func resize[T kernels.Float](b *Bound) error {
	kernels.ResizeBilinear(tensor.As[T](b.out), tensor.As[T](b.in[0]), resizeGeom(b))
	return nil
}

func resizeGrad[T kernels.Float](b *Bound) error {
	kernels.ResizeBilinearGrad(tensor.As[T](b.out), tensor.As[T](b.in[0]), resizeGeom(b))
	return nil
}

func moments[T kernels.Float](b *Bound) error {
	kernels.Moments(tensor.As[T](b.out), tensor.As[T](b.in[0]), b.Rows, b.Cols, tensor.As[float64](b.work))
	return nil
}

// activation runs an activation op or its gradient.
func activation[T kernels.Float](b *Bound) error {
	dst, x := tensor.As[T](b.out), tensor.As[T](b.in[0])
	a := b.Act
	switch b.Op {
	case graph.OpReluClip:
		kernels.ReluClip(dst, x, a[0], a[1], a[2])
	case graph.OpReluClipGrad:
		kernels.ReluClipGrad(dst, x, tensor.As[T](b.in[1]), a[0], a[1], a[2], a[3] == 1)
	case graph.OpElu:
		kernels.Elu(dst, x, a[0], a[1])
	case graph.OpEluGrad:
		kernels.EluGrad(dst, x, tensor.As[T](b.in[1]), a[0], a[1])
	case graph.OpSilu:
		kernels.Silu(dst, x)
	case graph.OpSiluGrad:
		kernels.SiluGrad(dst, x, tensor.As[T](b.in[1]))
	case graph.OpHardSwish:
		kernels.HardSwish(dst, x)
	case graph.OpHardSwishGrad:
		kernels.HardSwishGrad(dst, x, tensor.As[T](b.in[1]))
	case graph.OpSoftplus:
		kernels.Softplus(dst, x)
	case graph.OpSoftplusGrad:
		kernels.SoftplusGrad(dst, x, tensor.As[T](b.in[1]))
	case graph.OpSoftsign:
		kernels.Softsign(dst, x)
	case graph.OpSoftsignGrad:
		kernels.SoftsignGrad(dst, x, tensor.As[T](b.in[1]))
	}
	return nil
}
