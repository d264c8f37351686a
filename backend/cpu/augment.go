package cpu

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The host kernels of the augmentation ops (graph/augment.go).
func init() {
	register(graph.OpRandomUniform, kernel{bind: floats(bindUniform[float32], bindUniform[float64])})
	register(graph.OpImageTransform, kernel{bind: floats(bindTransform(kernels.ImageTransform[float32]), bindTransform(kernels.ImageTransform[float64]))})
	register(graph.OpImageTransformGrad, kernel{bind: floats(bindTransform(kernels.ImageTransformGrad[float32]), bindTransform(kernels.ImageTransformGrad[float64]))})
}

// bindUniform binds uniform draws from the step read at run time.
func bindUniform[T kernels.Float](b *Bound) func() error {
	dst, step, seed := tensor.As[T](b.out), tensor.As[int64](b.in[0]), b.Random.Seed
	return func() error {
		kernels.RandomUniform(dst, seed, step[0])
		return nil
	}
}

// bindTransform binds an image transform or its gradient: dst, the image
// (or dy), the transforms.
func bindTransform[T kernels.Float](f func(dst, x, t []T, g kernels.ImageTransformGeom) []T) binder {
	return func(b *Bound) func() error {
		w := b.Transform
		g := kernels.ImageTransformGeom{N: w.N, H: w.H, W: w.W, C: w.C, Transforms: w.Transforms,
			Bilinear: w.Bilinear, Fill: w.Fill, FillValue: w.FillValue}
		dst, x, t := tensor.As[T](b.out), tensor.As[T](b.in[0]), tensor.As[T](b.in[1])
		return func() error {
			f(dst, x, t, g)
			return nil
		}
	}
}
