package nn

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The layers of vision networks beyond Conv2D and pooling, with Keras'
// names, defaults and weight layouts (Keras' config fields are the
// exported fields; a zero value stands for Keras' default where the
// field's doc says so). All are channels-last.

func throwf(op graph.Op, layer, format string, args ...any) {
	panic(&graph.Error{Op: op, Owner: layer, Msg: fmt.Sprintf(format, args...)})
}

func needNHWC(op graph.Op, layer, class string, x *graph.Node) {
	if x.Shape().Rank() != 4 {
		throwf(op, layer, "%s needs NHWC input, got %v", class, x.Shape())
	}
}

// DepthwiseConv2D convolves each input channel with DepthMultiplier
// kernels of its own: [N, H, W, C] -> [N, OH, OW, C·DepthMultiplier],
// output channel c·M + m reading channel c. Its weight "depthwise_kernel"
// is Keras' [KH, KW, C, M]; "bias" is [C·M].
type DepthwiseConv2D struct {
	LayerName       string
	Kernel          [2]int
	Strides         [2]int // zero: 1, 1
	Same            bool
	DepthMultiplier int    // zero: 1
	DilationRate    [2]int // zero: 1, 1
	Activation      string
	NoBias          bool
	KernelInit      Initializer // Keras' depthwise_initializer; nil: GlorotUniform
}

func (l *DepthwiseConv2D) Name() string { return l.LayerName }

func (l *DepthwiseConv2D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpConv2D, l.LayerName, "DepthwiseConv2D", x)
	y := depthwise(c, l.LayerName, x, l.Kernel, l.Strides, l.DilationRate, max(l.DepthMultiplier, 1), l.Same, l.KernelInit)
	if !l.NoBias {
		y = graph.Add(y, c.Weight(l.LayerName+"/bias", tensor.Shape{y.Shape()[3]}, Constant{0}, true))
	}
	return mustApply(l.Activation, y)
}

// depthwise declares name/depthwise_kernel [KH, KW, C, m] and convolves x
// with it: a convolution of C groups whose filter [KH, KW, 1, C·m] is a
// view of the same bytes.
func depthwise(c *Context, name string, x *graph.Node, kernel, strides, dilation [2]int, m int, same bool, init Initializer) *graph.Node {
	cin := x.Shape()[3]
	k := c.Weight(name+"/depthwise_kernel", tensor.Shape{kernel[0], kernel[1], cin, m}, orDefault(init, GlorotUniform{}), true)
	return graph.Conv2DWith(x, graph.Reshape(k, kernel[0], kernel[1], 1, cin*m),
		graph.ConvOptions{Strides: strides, Dilation: dilation, Groups: cin, Same: same})
}

// SeparableConv2D is a DepthwiseConv2D (no bias) followed by a 1x1
// convolution to Filters channels, then the bias and the activation, as
// Keras': weights "depthwise_kernel" [KH, KW, C, M], "pointwise_kernel"
// [1, 1, C·M, Filters], "bias" [Filters]. The pointwise step is one matrix
// product over every pixel.
type SeparableConv2D struct {
	LayerName       string
	Filters         int
	Kernel          [2]int
	Strides         [2]int // zero: 1, 1
	Same            bool
	DepthMultiplier int    // zero: 1
	DilationRate    [2]int // zero: 1, 1
	Activation      string
	NoBias          bool
	DepthwiseInit   Initializer // nil: GlorotUniform
	PointwiseInit   Initializer // nil: GlorotUniform
}

func (l *SeparableConv2D) Name() string { return l.LayerName }

func (l *SeparableConv2D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpConv2D, l.LayerName, "SeparableConv2D", x)
	d := depthwise(c, l.LayerName, x, l.Kernel, l.Strides, l.DilationRate, max(l.DepthMultiplier, 1), l.Same, l.DepthwiseInit)
	cm := d.Shape()[3]
	p := c.Weight(l.LayerName+"/pointwise_kernel", tensor.Shape{1, 1, cm, l.Filters}, orDefault(l.PointwiseInit, GlorotUniform{}), true)
	s := d.Shape()
	// [N·OH·OW, C·M]·[C·M, F] -> [N, OH, OW, F]
	y := graph.Reshape(graph.MatMul(graph.Reshape(d, -1, cm), graph.Reshape(p, cm, l.Filters)), s[0], s[1], s[2], l.Filters)
	if !l.NoBias {
		y = graph.Add(y, c.Weight(l.LayerName+"/bias", tensor.Shape{l.Filters}, Constant{0}, true))
	}
	return mustApply(l.Activation, y)
}

// Conv2DTranspose is Keras' transposed convolution ("deconvolution"):
// [N, H, W, C] -> [N, OH, OW, Filters], OH = H·SH for "same" padding and
// H·SH + max(KH' - SH, 0) for "valid" (KH' the dilated kernel's extent),
// or (H-1)·SH + KH' - 2·pad + OutputPadding[0] with an output padding
// (pad = KH'/2 for "same", 0 for "valid"), as Keras'
// deconv_output_length. Its weight "kernel" is Keras' [KH, KW, Filters,
// C]; "bias" is [Filters].
type Conv2DTranspose struct {
	LayerName     string
	Filters       int
	Kernel        [2]int
	Strides       [2]int // zero: 1, 1
	Same          bool
	OutputPadding []int  // Keras' output_padding: nil for None, else [h, w], each below its stride
	DilationRate  [2]int // zero: 1, 1
	Activation    string
	NoBias        bool
	KernelInit    Initializer
}

func (l *Conv2DTranspose) Name() string { return l.LayerName }

func (l *Conv2DTranspose) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpConv2DTranspose, l.LayerName, "Conv2DTranspose", x)
	st, dl := ones(l.Strides), ones(l.DilationRate)
	outPad := [2]int{-1, -1}
	if l.OutputPadding != nil {
		if len(l.OutputPadding) != 2 {
			throwf(graph.OpConv2DTranspose, l.LayerName, "output padding %v: want [h, w]", l.OutputPadding)
		}
		for i, p := range l.OutputPadding {
			if p < 0 || p >= st[i] {
				throwf(graph.OpConv2DTranspose, l.LayerName, "output padding %v must be >= 0 and below the strides %v (as Keras requires)", l.OutputPadding, st)
			}
			outPad[i] = p
		}
	}
	cin := x.Shape()[3]
	k := c.Weight(l.LayerName+"/kernel", tensor.Shape{l.Kernel[0], l.Kernel[1], l.Filters, cin}, orDefault(l.KernelInit, GlorotUniform{}), true)
	var out [2]int
	for i := range out {
		out[i] = graph.ConvTransposeOutSize(x.Shape()[1+i], l.Kernel[i], st[i], dl[i], l.Same, outPad[i])
	}
	y := graph.Conv2DTranspose(x, k, out, graph.ConvOptions{Strides: st, Dilation: dl, Same: l.Same})
	if !l.NoBias {
		y = graph.Add(y, c.Weight(l.LayerName+"/bias", tensor.Shape{l.Filters}, Constant{0}, true))
	}
	return mustApply(l.Activation, y)
}

// UpSampling2D repeats rows and columns Size times (zero: Keras' 2, 2):
// Interpolation "nearest" (the default when empty) copies each cell;
// "bilinear" interpolates as tf.image.resize does (half-pixel centers,
// see graph.ResizeBilinear).
type UpSampling2D struct {
	LayerName     string
	Size          [2]int
	Interpolation string
}

func (l *UpSampling2D) Name() string { return l.LayerName }

func (l *UpSampling2D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpResizeBilinear, l.LayerName, "UpSampling2D", x)
	s := l.Size
	if s == [2]int{} {
		s = [2]int{2, 2}
	}
	switch l.Interpolation {
	case "", "nearest":
		return graph.UpSampleNearest(x, s)
	case "bilinear":
		return graph.ResizeBilinear(x, x.Shape()[1]*s[0], x.Shape()[2]*s[1])
	}
	throwf(graph.OpResizeBilinear, l.LayerName, "interpolation %q: want nearest or bilinear", l.Interpolation)
	return nil
}

// ZeroPadding2D adds rows and columns of zeros: Padding is Keras'
// ((top, bottom), (left, right)) (Keras' default is ((1, 1), (1, 1)); the
// zero value pads nothing).
type ZeroPadding2D struct {
	LayerName string
	Padding   [2][2]int
}

func (l *ZeroPadding2D) Name() string { return l.LayerName }

func (l *ZeroPadding2D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpUnslice, l.LayerName, "ZeroPadding2D", x)
	p := l.Padding
	return graph.Pad(x, []int{0, p[0][0], p[1][0], 0}, []int{0, p[0][1], p[1][1], 0})
}

// Cropping2D removes rows and columns at the edges: Cropping is Keras'
// ((top, bottom), (left, right)).
type Cropping2D struct {
	LayerName string
	Cropping  [2][2]int
}

func (l *Cropping2D) Name() string { return l.LayerName }

func (l *Cropping2D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpSlice, l.LayerName, "Cropping2D", x)
	s, p := x.Shape(), l.Cropping
	if p[0][0] < 0 || p[0][1] < 0 || p[1][0] < 0 || p[1][1] < 0 || p[0][0]+p[0][1] >= s[1] || p[1][0]+p[1][1] >= s[2] {
		throwf(graph.OpSlice, l.LayerName, "cropping %v leaves nothing of input %v", p, s)
	}
	return graph.Slice(x, []int{0, p[0][0], p[1][0], 0}, []int{s[0], s[1] - p[0][1], s[2] - p[1][1], s[3]})
}

// GlobalMaxPooling2D takes the maximum of NHWC input over H and W:
// -> [N, C], or [N, 1, 1, C] with KeepDims (Keras' keepdims).
type GlobalMaxPooling2D struct {
	LayerName string
	KeepDims  bool
}

func (l *GlobalMaxPooling2D) Name() string { return l.LayerName }

func (l *GlobalMaxPooling2D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpReduceMax, l.LayerName, "GlobalMaxPooling2D", x)
	if l.KeepDims {
		return graph.ReduceMaxKeep(x, 1, 2)
	}
	return graph.ReduceMax(x, 1, 2)
}

// Reshape gives each example TargetShape (Keras' target_shape, without the
// batch; one entry may be -1). It moves no bytes.
type Reshape struct {
	LayerName   string
	TargetShape []int
}

func (l *Reshape) Name() string { return l.LayerName }

func (l *Reshape) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	return graph.Reshape(x, append([]int{x.Shape()[0]}, l.TargetShape...)...)
}

// Permute reorders the dimensions of each example: Dims is Keras' dims, a
// permutation of 1 ... rank-1 (the batch, dimension 0, stays).
type Permute struct {
	LayerName string
	Dims      []int
}

func (l *Permute) Name() string { return l.LayerName }

func (l *Permute) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	return graph.Transpose(x, append([]int{0}, l.Dims...)...)
}

// RepeatVector repeats [N, F] input N times: -> [N, Times, F] (Keras' n).
type RepeatVector struct {
	LayerName string
	Times     int
}

func (l *RepeatVector) Name() string { return l.LayerName }

func (l *RepeatVector) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	if x.Shape().Rank() != 2 || l.Times <= 0 {
		throwf(graph.OpBroadcastTo, l.LayerName, "RepeatVector needs [N, F] input and positive n, got %v and %d", x.Shape(), l.Times)
	}
	n, f := x.Shape()[0], x.Shape()[1]
	return graph.BroadcastTo(graph.Reshape(x, n, 1, f), n, l.Times, f)
}

// Rescaling returns x·Scale + Offset (Keras' scale and offset). Keras also
// takes a list for either, broadcast against the input's last axes as
// NumPy does (EfficientNet divides each of the three channels by its own
// value): Scales and Offsets, when set, are those lists and take the
// place of Scale and Offset.
type Rescaling struct {
	LayerName       string
	Scale, Offset   float64
	Scales, Offsets []float64
}

func (l *Rescaling) Name() string { return l.LayerName }

func (l *Rescaling) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	var y *graph.Node
	if l.Scales != nil {
		y = graph.Mul(x, l.vector(c, x, "scale", l.Scales))
	} else {
		y = graph.MulScalar(x, l.Scale)
	}
	switch {
	case l.Offsets != nil:
		y = graph.Add(y, l.vector(c, x, "offset", l.Offsets))
	case l.Offset != 0:
		y = graph.AddScalar(y, l.Offset)
	}
	return y
}

// vector returns v as a constant of x's dtype that broadcasts against x's
// last axis.
func (l *Rescaling) vector(c *Context, x *graph.Node, what string, v []float64) *graph.Node {
	r := x.Shape().Rank()
	if len(v) == 0 || r < 2 || (len(v) != 1 && len(v) != x.Shape()[r-1]) {
		throwf(graph.OpMul, l.LayerName, "Rescaling %s has %d values for input %v (want 1 or one per channel)", what, len(v), x.Shape())
	}
	t := tensor.New(x.DType(), tensor.Shape{len(v)})
	for i, f := range v {
		t.SetFloat64At(i, f)
	}
	return c.G.Constant(t)
}

// Normalization standardizes the last axis: (x - mean) / max(√variance,
// 1e-7), or with Invert x·max(√variance, 1e-7) + mean (Keras'
// Normalization, axis -1). Given Mean and Variance (one value, or one per
// channel) they are constants and the layer has no weights; else, as
// Keras, it declares the non-trainable weights "mean" and "variance" [C]
// (zeros and ones until set or adapted, see Adapt) and "count" (a scalar,
// kept for Keras' parameter count: 2·C + 1).
type Normalization struct {
	LayerName      string
	Mean, Variance []float64
	Invert         bool
}

func (l *Normalization) Name() string { return l.LayerName }

func (l *Normalization) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	ch := x.Shape()[x.Shape().Rank()-1]
	var mean, variance *graph.Node
	if l.Mean != nil || l.Variance != nil {
		mean, variance = l.constant(c, x, "mean", l.Mean, ch), l.constant(c, x, "variance", l.Variance, ch)
	} else {
		mean = c.Weight(l.LayerName+"/mean", tensor.Shape{ch}, Constant{0}, false)
		variance = c.Weight(l.LayerName+"/variance", tensor.Shape{ch}, Constant{1}, false)
		c.Weight(l.LayerName+"/count", tensor.Shape{}, Constant{0}, false)
		if mean.DType() != x.DType() {
			mean, variance = graph.Cast(mean, x.DType()), graph.Cast(variance, x.DType())
		}
	}
	std := graph.Maximum(graph.Sqrt(variance), graph.ScalarLike(variance, 1e-7))
	if l.Invert {
		return graph.Add(graph.Mul(x, std), mean)
	}
	return graph.Div(graph.Sub(x, mean), std)
}

// constant returns v (one value, or one per channel) as a [ch] constant.
func (l *Normalization) constant(c *Context, x *graph.Node, what string, v []float64, ch int) *graph.Node {
	if len(v) != 1 && len(v) != ch {
		throwf(graph.OpConstant, l.LayerName, "Normalization %s has %d values for %d channels (want 1 or %d)", what, len(v), ch, ch)
	}
	t := tensor.New(x.DType(), tensor.Shape{ch})
	for i := 0; i < ch; i++ {
		t.SetFloat64At(i, v[i%len(v)])
	}
	return c.G.Constant(t)
}

// Adapt sets Mean and Variance to the mean and biased variance of each
// channel (the last of shape) of the examples xs (Keras' adapt): the layer
// then holds them as constants.
func (l *Normalization) Adapt(xs []float32, shape tensor.Shape) error {
	ch := shape[shape.Rank()-1]
	if ch <= 0 || len(xs) == 0 || len(xs)%ch != 0 {
		return fmt.Errorf("nn: Normalization %s: cannot adapt %d values to channels of %v", l.LayerName, len(xs), shape)
	}
	n := float64(len(xs) / ch)
	l.Mean, l.Variance = make([]float64, ch), make([]float64, ch)
	for i, v := range xs {
		l.Mean[i%ch] += float64(v) / n
	}
	for i, v := range xs {
		d := float64(v) - l.Mean[i%ch]
		l.Variance[i%ch] += d * d / n
	}
	return nil
}

// SpatialDropout2D drops whole channels of NHWC input with probability
// Rate in training (one draw per example and channel, the kept ones scaled
// by 1/(1-Rate)), as Keras'.
type SpatialDropout2D struct {
	LayerName string
	Rate      float64
}

func (l *SpatialDropout2D) Name() string { return l.LayerName }

func (l *SpatialDropout2D) Forward(c *Context, x *graph.Node) *graph.Node {
	if !c.Training || l.Rate == 0 {
		return x
	}
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpDropoutMask, l.LayerName, "SpatialDropout2D", x)
	s := x.Shape()
	mask := graph.DropoutMask(c.StepNode(), tensor.Shape{s[0], 1, 1, s[3]}, x.DType(), l.Rate, c.Seed^hashName(l.LayerName))
	return graph.Mul(x, mask)
}

// Serializable (serialize.go).
var (
	_ = RegisterLayer("Conv2DTranspose", &Conv2DTranspose{})
	_ = RegisterLayer("Cropping2D", &Cropping2D{})
	_ = RegisterLayer("DepthwiseConv2D", &DepthwiseConv2D{})
	_ = RegisterLayer("GlobalMaxPooling2D", &GlobalMaxPooling2D{})
	_ = RegisterLayer("Normalization", &Normalization{})
	_ = RegisterLayer("Permute", &Permute{})
	_ = RegisterLayer("RepeatVector", &RepeatVector{})
	_ = RegisterLayer("Rescaling", &Rescaling{})
	_ = RegisterLayer("Reshape", &Reshape{})
	_ = RegisterLayer("SeparableConv2D", &SeparableConv2D{})
	_ = RegisterLayer("SpatialDropout2D", &SpatialDropout2D{})
	_ = RegisterLayer("UpSampling2D", &UpSampling2D{})
	_ = RegisterLayer("ZeroPadding2D", &ZeroPadding2D{})
)
