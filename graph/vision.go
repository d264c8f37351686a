package graph

import (
	"math"

	"github.com/headroom-ml/headroom/tensor"
)

// The vision family: the ops of convolutional networks beyond the core
// Conv2D and pooling (conv.go). Convolutions keep Keras' NHWC layout and
// its HWIO filters.
//
//   - Conv2DWith: Conv2D with a dilation rate and filter groups (a
//     depthwise convolution is the grouped one with one input channel per
//     group, its filter [KH, KW, 1, C·M] the same bytes as Keras'
//     depthwise kernel [KH, KW, C, M]).
//   - Conv2DTranspose: the gradient of Conv2D with respect to its input,
//     as a differentiable op (Keras' Conv2DTranspose).
//   - ResizeBilinear: Keras' UpSampling2D(interpolation="bilinear").
//   - Moments: the batch mean and variance of BatchNormalization.
//   - activations that need an op of their own: ReluClip (Keras' ReLU with
//     max_value, negative_slope, threshold), Elu (and SELU), Silu,
//     HardSwish, Softplus, Softsign.

// ConvOptions are the geometry of a convolution besides its filter size:
// zero strides and dilation mean 1, zero groups mean 1.
type ConvOptions struct {
	Strides  [2]int
	Dilation [2]int
	Groups   int
	Same     bool // "same" padding, as Keras computes it; else "valid"
}

func (o ConvOptions) norm() ConvOptions {
	one := func(v [2]int) [2]int {
		for i := range v {
			if v[i] == 0 {
				v[i] = 1
			}
		}
		return v
	}
	o.Strides, o.Dilation = one(o.Strides), one(o.Dilation)
	o.Groups = max(o.Groups, 1)
	return o
}

// attr returns the attributes of a convolution with window win. Dilation
// and groups of 1 are stored as zero, so that a plain convolution has the
// attributes Conv2D gives it.
func (o ConvOptions) attr(win [2]int) Attr {
	at := Attr{Window: win, Strides: o.Strides, Same: o.Same}
	if o.Dilation != [2]int{1, 1} {
		at.Dilation = o.Dilation
	}
	if o.Groups > 1 {
		at.Groups = o.Groups
	}
	return at
}

// ConvOptionsOf returns the convolution geometry stored in at.
func ConvOptionsOf(at *Attr) ConvOptions {
	return ConvOptions{Strides: at.Strides, Dilation: at.Dilation, Groups: at.Groups, Same: at.Same}.norm()
}

// EffectiveWindow returns the extent a window of k taps d apart covers:
// (k-1)·d + 1.
func EffectiveWindow(k, d int) int { return (k-1)*max(d, 1) + 1 }

func (g *Graph) checkConvOperands(op Op, x, filter *Node, o ConvOptions) {
	if filter.shape.Rank() != 4 || x.shape.Rank() != 4 {
		g.throw(op, "filter %v (KH, KW, C/groups, F) and input %v (N, H, W, C) must have rank 4", filter.shape, x.shape)
	}
	if x.dtype != filter.dtype {
		g.throw(op, "dtype mismatch: %s vs %s", x.dtype, filter.dtype)
	}
	if x.dtype != tensor.Float32 && x.dtype != tensor.Float64 {
		g.throw(op, "needs float32 or float64, got %s", x.dtype)
	}
	if o.Strides[0] <= 0 || o.Strides[1] <= 0 || o.Dilation[0] <= 0 || o.Dilation[1] <= 0 || o.Groups <= 0 {
		g.throw(op, "strides %v, dilation %v and groups %d must be positive", o.Strides, o.Dilation, o.Groups)
	}
	if (o.Strides[0] > 1 || o.Strides[1] > 1) && (o.Dilation[0] > 1 || o.Dilation[1] > 1) {
		g.throw(op, "strides %v with dilation %v: Keras allows one of them above 1, not both", o.Strides, o.Dilation)
	}
}

// convOut returns the [OH, OW] of a convolution over input [N, H, W, C]
// with a kh×kw filter, or throws.
func (g *Graph) convOut(op Op, in tensor.Shape, kh, kw int, o ConvOptions) (int, int) {
	oh := ConvOutSize(in[1], EffectiveWindow(kh, o.Dilation[0]), o.Strides[0], o.Same)
	ow := ConvOutSize(in[2], EffectiveWindow(kw, o.Dilation[1]), o.Strides[1], o.Same)
	if oh <= 0 || ow <= 0 || kh <= 0 || kw <= 0 {
		g.throw(op, "window %dx%d (dilation %v) does not fit input %v with valid padding", kh, kw, o.Dilation, in)
	}
	return oh, ow
}

// Conv2DWith convolves x [N, H, W, C] with filter [KH, KW, C/G, F] (G =
// o.Groups; output channel f reads the input channels of its group, f /
// (F/G)) at o's strides, dilation and padding -> [N, OH, OW, F]. With G = C
// it is a depthwise convolution. Keras allows strides or dilation above 1,
// not both; so does this.
func Conv2DWith(x, filter *Node, o ConvOptions) *Node {
	g := x.g
	o = o.norm()
	g.checkConvOperands(OpConv2D, x, filter, o)
	c, f := x.shape[3], filter.shape[3]
	if c%o.Groups != 0 || f%o.Groups != 0 || filter.shape[2]*o.Groups != c {
		g.throw(OpConv2D, "filter %v with %d groups does not fit input %v: want [KH, KW, C/groups, F] with C and F divisible by groups", filter.shape, o.Groups, x.shape)
	}
	oh, ow := g.convOut(OpConv2D, x.shape, filter.shape[0], filter.shape[1], o)
	return g.add(OpConv2D, x.dtype, tensor.Shape{x.shape[0], oh, ow, f}, o.attr([2]int{filter.shape[0], filter.shape[1]}), x, filter)
}

// Conv2DBackpropInputWith is Conv2DBackpropInput for a Conv2DWith of
// options o.
func Conv2DBackpropInputWith(dy, filter *Node, xShape tensor.Shape, o ConvOptions) *Node {
	o = o.norm()
	at := o.attr([2]int{filter.shape[0], filter.shape[1]})
	at.Of = xShape.Clone()
	return dy.g.add(OpConv2DBackpropInput, dy.dtype, xShape, at, dy, filter)
}

// Conv2DBackpropFilterWith is Conv2DBackpropFilter for a Conv2DWith of
// options o.
func Conv2DBackpropFilterWith(x, dy *Node, fShape tensor.Shape, o ConvOptions) *Node {
	o = o.norm()
	at := o.attr([2]int{fShape[0], fShape[1]})
	at.Of = fShape.Clone()
	return x.g.add(OpConv2DBackpropFilter, x.dtype, fShape, at, x, dy)
}

// ConvTransposeOutSize returns the output length of a transposed
// convolution over in positions with a window of k taps d apart and stride
// s, as Keras' deconv_output_length: with no output padding (outPad < 0)
// in·s + max(k' - s, 0) for "valid" and in·s for "same" (k' = (k-1)·d + 1);
// else (in-1)·s + k' - 2·pad + outPad, pad being k'/2 for "same" and 0 for
// "valid".
func ConvTransposeOutSize(in, k, s, d int, same bool, outPad int) int {
	k = EffectiveWindow(k, d)
	if outPad < 0 {
		if same {
			return in * s
		}
		return in*s + max(k-s, 0)
	}
	pad := 0
	if same {
		pad = k / 2
	}
	return (in-1)*s + k - 2*pad + outPad
}

// Conv2DTranspose is the transposed convolution of x [N, H, W, Cin] with
// filter [KH, KW, Cout, Cin] (Keras' Conv2DTranspose kernel layout) to an
// output of height and width out (ConvTransposeOutSize): [N, out[0],
// out[1], Cout]. It is the gradient of a Conv2D of options o from that
// output's shape to x's (the input gradient, with x as dy), so a forward
// Conv2D of o over the output must give x's height and width. Groups are
// not supported (Keras' Conv2DTranspose has none).
func Conv2DTranspose(x, filter *Node, out [2]int, o ConvOptions) *Node {
	g := x.g
	o = o.norm()
	g.checkConvOperands(OpConv2DTranspose, x, filter, o)
	if o.Groups != 1 {
		g.throw(OpConv2DTranspose, "groups %d: a transposed convolution has one group", o.Groups)
	}
	if filter.shape[3] != x.shape[3] {
		g.throw(OpConv2DTranspose, "filter %v (KH, KW, out, in) does not fit input %v (N, H, W, in)", filter.shape, x.shape)
	}
	if out[0] <= 0 || out[1] <= 0 {
		g.throw(OpConv2DTranspose, "output size %v must be positive", out)
	}
	shape := tensor.Shape{x.shape[0], out[0], out[1], filter.shape[2]}
	oh, ow := g.convOut(OpConv2DTranspose, shape, filter.shape[0], filter.shape[1], o)
	if oh != x.shape[1] || ow != x.shape[2] {
		g.throw(OpConv2DTranspose, "output %v: a convolution of it with filter %v, options %+v gives %dx%d, not the input's %dx%d", shape, filter.shape, o, oh, ow, x.shape[1], x.shape[2])
	}
	at := o.attr([2]int{filter.shape[0], filter.shape[1]})
	at.Of = shape.Clone()
	return g.add(OpConv2DTranspose, x.dtype, shape, at, x, filter)
}

// ResizeBilinear resizes x [N, H, W, C] to [N, oh, ow, C] by bilinear
// interpolation with half-pixel centers, as TensorFlow's
// tf.image.resize(method="bilinear", antialias=False), which Keras'
// UpSampling2D(interpolation="bilinear") calls: output cell o reads input
// position (o + 0.5)·H/oh - 0.5, between the cells floor and ceil of it,
// clamped to [0, H-1], weighted by its fraction.
func ResizeBilinear(x *Node, oh, ow int) *Node {
	g := x.g
	if x.shape.Rank() != 4 || (x.dtype != tensor.Float32 && x.dtype != tensor.Float64) {
		g.throw(OpResizeBilinear, "needs a float32 or float64 NHWC input, got %s%v", x.dtype, x.shape)
	}
	if oh <= 0 || ow <= 0 || x.shape[1] == 0 || x.shape[2] == 0 {
		g.throw(OpResizeBilinear, "cannot resize %v to %dx%d", x.shape, oh, ow)
	}
	return g.add(OpResizeBilinear, x.dtype, tensor.Shape{x.shape[0], oh, ow, x.shape[3]}, Attr{}, x)
}

// ResizeBilinearGrad returns the gradient of ResizeBilinear with respect to
// its input of shape xShape, from dy.
func ResizeBilinearGrad(dy *Node, xShape tensor.Shape) *Node {
	at := Attr{Of: xShape.Clone()}
	return dy.g.add(OpResizeBilinearGrad, dy.dtype, xShape, at, dy)
}

// UpSampleNearest repeats each row of x [N, H, W, C] s[0] times and each
// column s[1] times -> [N, H·s[0], W·s[1], C] (Keras' UpSampling2D with
// interpolation "nearest"). It is a broadcast between two views: one pass
// over the output, no op of its own; its gradient sums each block.
func UpSampleNearest(x *Node, s [2]int) *Node {
	g := x.g
	if x.shape.Rank() != 4 || s[0] <= 0 || s[1] <= 0 {
		g.throw(OpBroadcastTo, "UpSampleNearest needs an NHWC input and positive sizes, got %v and %v", x.shape, s)
	}
	if s == [2]int{1, 1} {
		return x
	}
	n, h, w, c := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	v := Reshape(x, n, h, 1, w, 1, c)
	return Reshape(BroadcastTo(v, n, h, s[0], w, s[1], c), n, h*s[0], w*s[1], c)
}

// Pad surrounds x with zeros: before[i] elements before dimension i and
// after[i] after it (Keras' ZeroPadding2D on the spatial dimensions). It is
// the op that places a slice's gradient (Unslice), whose gradient is a
// Slice.
func Pad(x *Node, before, after []int) *Node {
	g := x.g
	r := x.shape.Rank()
	if len(before) != r || len(after) != r {
		g.throw(OpUnslice, "Pad of %v needs %d before and after sizes, got %v and %v", x.shape, r, before, after)
	}
	shape := x.shape.Clone()
	zero := true
	for i := range shape {
		if before[i] < 0 || after[i] < 0 {
			g.throw(OpUnslice, "Pad of %v by %v and %v: sizes must not be negative", x.shape, before, after)
		}
		shape[i] += before[i] + after[i]
		zero = zero && before[i] == 0 && after[i] == 0
	}
	if zero {
		return x
	}
	return Unslice(x, shape, before)
}

// Moments returns the mean and the (biased) variance of x [..., C] over
// every axis but the last: [2, C], row 0 the means and row 1 the
// variances, as BatchNormalization's batch statistics (Keras' and
// TensorFlow's tf.nn.moments over those axes).
func Moments(x *Node) *Node {
	g := x.g
	if x.shape.Rank() < 1 || (x.dtype != tensor.Float32 && x.dtype != tensor.Float64) {
		g.throw(OpMoments, "needs a float32 or float64 input of rank >= 1, got %s%v", x.dtype, x.shape)
	}
	c := x.shape[x.shape.Rank()-1]
	if c == 0 || x.shape.Size() == 0 {
		g.throw(OpMoments, "needs a non-empty input, got %v", x.shape)
	}
	return g.add(OpMoments, x.dtype, tensor.Shape{2, c}, Attr{}, x)
}

func (g *Graph) floatUnary(op Op, x *Node) {
	if x.dtype != tensor.Float32 && x.dtype != tensor.Float64 {
		g.throw(op, "needs float32 or float64, got %s%v", x.dtype, x.shape)
	}
}

func actOp(op Op, x *Node, act [4]float64) *Node {
	x.g.floatUnary(op, x)
	return x.g.add(op, x.dtype, x.shape, Attr{Act: act}, x)
}

func actGrad(op Op, v, dy *Node, act [4]float64) *Node {
	sameShape(op, v, dy)
	return v.g.add(op, v.dtype, v.shape, Attr{Act: act}, v, dy)
}

// NoMax is ReluClip's maxValue for no upper clip.
var NoMax = math.NaN()

// ReluClip is Keras' relu(x, negative_slope, max_value, threshold): with
// p = x where x > threshold (threshold ≠ 0) or max(x, 0) (threshold = 0),
// clipped to [0, maxValue] unless maxValue is NoMax, it returns
// p - slope·max(threshold - x, 0). relu6 is ReluClip(x, 6, 0, 0),
// LeakyReLU ReluClip(x, NoMax, alpha, 0).
func ReluClip(x *Node, maxValue, slope, threshold float64) *Node {
	if !math.IsNaN(maxValue) && maxValue < 0 {
		x.g.throw(OpReluClip, "max value %v must not be negative", maxValue)
	}
	return actOp(OpReluClip, x, [4]float64{maxValue, slope, threshold})
}

// ReluClipFromOutput reports whether ReluClip's gradient can be told from
// its output alone (threshold 0, slope >= 0): then the input need not be
// kept for the backward pass.
func ReluClipFromOutput(slope, threshold float64) bool { return threshold == 0 && slope >= 0 }

// ReluClipGrad returns the gradient of ReluClip of attributes act from dy
// and v: ReluClip's output when act[3] is 1 (ReluClipFromOutput), else its
// input.
func ReluClipGrad(v, dy *Node, act [4]float64) *Node { return actGrad(OpReluClipGrad, v, dy, act) }

// Elu returns scale·x for x > 0 and scale·alpha·(e^x - 1) elsewhere: Keras'
// elu with scale 1, selu with alpha 1.6732632423543772 and scale
// 1.0507009873554805.
func Elu(x *Node, alpha, scale float64) *Node {
	if !(alpha >= 0) || !(scale > 0) {
		x.g.throw(OpElu, "alpha %v must be >= 0 and scale %v > 0", alpha, scale)
	}
	return actOp(OpElu, x, [4]float64{alpha, scale})
}

// EluGrad returns the gradient of y = Elu(x, act[0], act[1]) from y and dy.
func EluGrad(y, dy *Node, act [4]float64) *Node { return actGrad(OpEluGrad, y, dy, act) }

// Silu returns x·sigmoid(x) (Keras' silu, swish).
func Silu(x *Node) *Node { return actOp(OpSilu, x, [4]float64{}) }

// SiluGrad returns the gradient of Silu from its input x and dy.
func SiluGrad(x, dy *Node) *Node { return actGrad(OpSiluGrad, x, dy, [4]float64{}) }

// HardSwish returns x·min(max(x + 3, 0), 6)/6 (Keras 3's hard_silu,
// hard_swish; MobileNetV3).
func HardSwish(x *Node) *Node { return actOp(OpHardSwish, x, [4]float64{}) }

// HardSwishGrad returns the gradient of HardSwish from its input x and dy.
func HardSwishGrad(x, dy *Node) *Node { return actGrad(OpHardSwishGrad, x, dy, [4]float64{}) }

// Softplus returns log(1 + e^x), computed stably.
func Softplus(x *Node) *Node { return actOp(OpSoftplus, x, [4]float64{}) }

// SoftplusGrad returns the gradient of Softplus from its input x and dy.
func SoftplusGrad(x, dy *Node) *Node { return actGrad(OpSoftplusGrad, x, dy, [4]float64{}) }

// Softsign returns x / (1 + |x|).
func Softsign(x *Node) *Node { return actOp(OpSoftsign, x, [4]float64{}) }

// SoftsignGrad returns the gradient of Softsign from its input x and dy.
func SoftsignGrad(x, dy *Node) *Node { return actGrad(OpSoftsignGrad, x, dy, [4]float64{}) }
