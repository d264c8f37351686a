package cpu

import (
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The host kernels of the vision ops (graph/vision.go).
func init() {
	// the input gradient of a Conv2D: x as its dy, the filter as is
	register(graph.OpConv2DTranspose, kernel{
		bind:  floats(bindConvTranspose[float32], bindConvTranspose[float64]),
		lower: func(t *Target, it *compile.Instr) int64 { return convWorkspace(kernels.ConvGeom(it.Window.Geom), it) },
		scratch: func(it *compile.Instr) int {
			return kernels.ConvPackFloats(kernels.ConvGeom(it.Window.Geom), it.Window.F, false)
		},
	})
	register(graph.OpResizeBilinear, kernel{bind: floats(bindResize(kernels.ResizeBilinear[float32]), bindResize(kernels.ResizeBilinear[float64]))})
	register(graph.OpResizeBilinearGrad, kernel{bind: floats(bindResize(kernels.ResizeBilinearGrad[float32]), bindResize(kernels.ResizeBilinearGrad[float64]))})
	register(graph.OpMoments, kernel{
		bind: floats(bindMoments[float32], bindMoments[float64]),
		lower: func(t *Target, it *compile.Instr) int64 {
			g := it.Matrix
			return int64(8 * kernels.MomentsWork(g.Rows, g.Cols, kernels.MomentsBlock(g.Rows, g.Image)))
		},
	})
	for _, a := range []struct {
		op  graph.Op
		f32 actFunc[float32]
		f64 actFunc[float64]
	}{
		{graph.OpReluClip, reluClip[float32], reluClip[float64]},
		{graph.OpReluClipGrad, reluClipGrad[float32], reluClipGrad[float64]},
		{graph.OpElu, elu[float32], elu[float64]},
		{graph.OpEluGrad, eluGrad[float32], eluGrad[float64]},
		{graph.OpSilu, silu[float32], silu[float64]},
		{graph.OpSiluGrad, siluGrad[float32], siluGrad[float64]},
		{graph.OpHardSwish, hardSwish[float32], hardSwish[float64]},
		{graph.OpHardSwishGrad, hardSwishGrad[float32], hardSwishGrad[float64]},
		{graph.OpSoftplus, softplus[float32], softplus[float64]},
		{graph.OpSoftplusGrad, softplusGrad[float32], softplusGrad[float64]},
		{graph.OpSoftsign, softsign[float32], softsign[float64]},
		{graph.OpSoftsignGrad, softsignGrad[float32], softsignGrad[float64]},
	} {
		register(a.op, kernel{bind: floats(bindAct(a.f32), bindAct(a.f64))})
	}
}

// bindConvTranspose binds x [N, H, W, Cin] as the dy of a Conv2D from the
// output [Of] with the filter [KH, KW, Cout, Cin].
func bindConvTranspose[T kernels.Float](b *Bound) func() error {
	return bindConv(b, kernels.Conv2DBackpropInputOn[T])
}

// bindResize binds a resize (or its gradient) of the sizes of b's Window.
func bindResize[T kernels.Float](f func(dst, x []T, g kernels.ResizeGeom) []T) binder {
	return func(b *Bound) func() error {
		w := b.Window.Geom
		dst, x, g := tensor.As[T](b.out), tensor.As[T](b.in[0]), kernels.ResizeGeom{N: w.N, H: w.H, W: w.W, C: w.C, OH: w.OH, OW: w.OW}
		return func() error {
			f(dst, x, g)
			return nil
		}
	}
}

func bindMoments[T kernels.Float](b *Bound) func() error {
	dst, x, work, g, p := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[float64](b.work), *b.Matrix, b.pool
	return func() error {
		kernels.MomentsOn(p, dst, x, g.Rows, g.Cols, kernels.MomentsBlock(g.Rows, g.Image), work)
		return nil
	}
}

// actFunc runs an activation op, dst = f(x), or its gradient, dst =
// f'(x or y)·dy, with the op's parameters a.
type actFunc[T kernels.Float] func(dst, x, dy []T, a *compile.ActParams)

// bindAct binds an activation op or its gradient.
func bindAct[T kernels.Float](f actFunc[T]) binder {
	return func(b *Bound) func() error {
		dst, x, a := tensor.As[T](b.out), tensor.As[T](b.in[0]), *b.Act
		var dy []T
		if len(b.in) > 1 {
			dy = tensor.As[T](b.in[1])
		}
		return func() error {
			f(dst, x, dy, &a)
			return nil
		}
	}
}

func reluClip[T kernels.Float](dst, x, _ []T, a *compile.ActParams) {
	kernels.ReluClip(dst, x, a[0], a[1], a[2])
}
func reluClipGrad[T kernels.Float](dst, v, dy []T, a *compile.ActParams) {
	kernels.ReluClipGrad(dst, v, dy, a[0], a[1], a[2], a[3] == 1)
}
func elu[T kernels.Float](dst, x, _ []T, a *compile.ActParams) { kernels.Elu(dst, x, a[0], a[1]) }
func eluGrad[T kernels.Float](dst, y, dy []T, a *compile.ActParams) {
	kernels.EluGrad(dst, y, dy, a[0], a[1])
}
func silu[T kernels.Float](dst, x, _ []T, _ *compile.ActParams)      { kernels.Silu(dst, x) }
func siluGrad[T kernels.Float](dst, x, dy []T, _ *compile.ActParams) { kernels.SiluGrad(dst, x, dy) }
func hardSwish[T kernels.Float](dst, x, _ []T, _ *compile.ActParams) { kernels.HardSwish(dst, x) }
func hardSwishGrad[T kernels.Float](dst, x, dy []T, _ *compile.ActParams) {
	kernels.HardSwishGrad(dst, x, dy)
}
func softplus[T kernels.Float](dst, x, _ []T, _ *compile.ActParams) { kernels.Softplus(dst, x) }
func softplusGrad[T kernels.Float](dst, x, dy []T, _ *compile.ActParams) {
	kernels.SoftplusGrad(dst, x, dy)
}
func softsign[T kernels.Float](dst, x, _ []T, _ *compile.ActParams) { kernels.Softsign(dst, x) }
func softsignGrad[T kernels.Float](dst, x, dy []T, _ *compile.ActParams) {
	kernels.SoftsignGrad(dst, x, dy)
}
