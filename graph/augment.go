package graph

import (
	"github.com/headroom-ml/headroom/tensor"
)

// The augmentation family: the ops of Keras' random preprocessing layers
// (RandomFlip, RandomRotation, RandomZoom, RandomTranslation,
// RandomContrast), which change each training example by a random draw and
// are the identity in inference.
//
//   - RandomUniform: values uniform in [0, 1), a function of (seed, step)
//     as DropoutMask's masks, so runs and resumed runs draw the same.
//   - ImageTransform: each image resampled at the points a projective
//     transform of its own maps the output pixels to, as TensorFlow's
//     ImageProjectiveTransformV3, which Keras' affine_transform calls; its
//     gradient with respect to the image is ImageTransformGrad (none flows
//     to the transforms, as in TensorFlow).

// RandomUniform returns a [shape] tensor of dtype (float32 or float64)
// whose elements are uniform in [0, 1), drawn from (seed, the value of
// step, the element's index): step is the int64 scalar of the training
// step, as DropoutMask's.
func RandomUniform(step *Node, shape tensor.Shape, dtype tensor.DType, seed uint64) *Node {
	g := step.g
	if step.dtype != tensor.Int64 || step.shape.Rank() != 0 {
		g.throw(OpRandomUniform, "step must be an int64 scalar, got %s%v", step.dtype, step.shape)
	}
	if dtype != tensor.Float32 && dtype != tensor.Float64 {
		g.throw(OpRandomUniform, "dtype must be float32 or float64, got %s", dtype)
	}
	return g.add(OpRandomUniform, dtype, shape, Attr{Seed: seed}, step)
}

// FillMode is how ImageTransform reads points outside the image, as
// TensorFlow's fill modes: for a row abcd,
// reflect (d c b a | a b c d | d c b a), wrap (a b c d | a b c d | a b c d),
// constant (k k k k | a b c d | k k k k) and nearest (a a a a | a b c d | d d d d).
type FillMode int

// The fill modes (Keras' fill_mode).
const (
	FillReflect FillMode = iota
	FillWrap
	FillConstant
	FillNearest
)

// ImageTransformOptions are how ImageTransform samples: bilinear or
// nearest interpolation, the fill mode, and the value constant filling
// reads.
type ImageTransformOptions struct {
	Bilinear  bool
	Fill      FillMode
	FillValue float64
}

// act stores the options in an Attr's Act: bilinear, fill mode, value.
func (o ImageTransformOptions) act() [4]float64 {
	b := 0.0
	if o.Bilinear {
		b = 1
	}
	return [4]float64{b, float64(o.Fill), o.FillValue}
}

// ImageTransformOptionsOf returns the options stored in at.
func ImageTransformOptionsOf(at *Attr) ImageTransformOptions {
	return ImageTransformOptions{Bilinear: at.Act[0] == 1, Fill: FillMode(at.Act[1]), FillValue: at.Act[2]}
}

// ImageTransform resamples each image of x [N, H, W, C] (float32 or
// float64) at the points its transform maps the output's pixels to:
// transforms [N, 8] (or [1, 8], one for every image) of x's dtype, a row
// [a0, a1, a2, b0, b1, b2, c0, c1] sending output pixel (x, y) (column,
// row) to input point ((a0·x + a1·y + a2)/k, (b0·x + b1·y + b2)/k), k =
// c0·x + c1·y + 1, as TensorFlow's ImageProjectiveTransformV3
// (tensorflow/core/kernels/image/image_ops.h): a point outside the image
// is mapped back into it by o.Fill (constant filling gives the fill value
// for any point outside [0, H-1]×[0, W-1]); bilinear interpolation reads
// the four pixels around it, a neighbour outside the image reading the fill
// value; nearest rounds it. -> [N, H, W, C].
func ImageTransform(x, transforms *Node, o ImageTransformOptions) *Node {
	g := x.g
	g.checkImageTransform(OpImageTransform, x, transforms, o)
	return g.add(OpImageTransform, x.dtype, x.shape, Attr{Act: o.act()}, x, transforms)
}

// ImageTransformGrad returns the gradient of ImageTransform(x, transforms,
// o) with respect to x, from dy [N, H, W, C]: each output cell adds dy
// times each interpolation weight into the input cell it read (internal).
func ImageTransformGrad(dy, transforms *Node, o ImageTransformOptions) *Node {
	g := dy.g
	g.checkImageTransform(OpImageTransformGrad, dy, transforms, o)
	return g.add(OpImageTransformGrad, dy.dtype, dy.shape, Attr{Act: o.act()}, dy, transforms)
}

func (g *Graph) checkImageTransform(op Op, x, t *Node, o ImageTransformOptions) {
	if x.shape.Rank() != 4 || (x.dtype != tensor.Float32 && x.dtype != tensor.Float64) {
		g.throw(op, "needs a float32 or float64 NHWC image, got %s%v", x.dtype, x.shape)
	}
	if t.dtype != x.dtype || t.shape.Rank() != 2 || t.shape[1] != 8 || (t.shape[0] != x.shape[0] && t.shape[0] != 1) {
		g.throw(op, "transforms must be [%d, 8] or [1, 8] of %s, got %s%v", x.shape[0], x.dtype, t.dtype, t.shape)
	}
	if o.Fill < FillReflect || o.Fill > FillNearest {
		g.throw(op, "unknown fill mode %d", o.Fill)
	}
}
