package keras

import (
	"slices"

	"github.com/headroom-ml/headroom/nn"
)

// The layers of vision networks (nn/vision.go, nn/activations2.go), each
// with Keras' shape and parameter arithmetic.

// visionMapper returns the mapping of a one-input vision layer class.
func visionMapper(class string) (func(name string, f *fields, in []int) mapped, bool) {
	switch class {
	case "DepthwiseConv2D":
		return depthwise, true
	case "SeparableConv2D":
		return separable, true
	case "Conv2DTranspose":
		return conv2DTranspose, true
	case "UpSampling2D":
		return upSampling, true
	case "ZeroPadding2D":
		return func(name string, f *fields, in []int) mapped { return pad2D(name, f, in, false) }, true
	case "Cropping2D":
		return func(name string, f *fields, in []int) mapped { return pad2D(name, f, in, true) }, true
	case "GlobalMaxPooling2D":
		return globalMax2D, true
	case "Reshape":
		return reshape, true
	case "Permute":
		return permute, true
	case "RepeatVector":
		return repeatVector, true
	case "Rescaling":
		return rescaling, true
	case "Normalization":
		return normalization, true
	case "SpatialDropout2D":
		return spatialDropout, true
	case "LeakyReLU":
		return leakyReLU, true
	case "ELU":
		return elu, true
	case "PReLU":
		return prelu, true
	case "Softmax":
		return softmax, true
	}
	return nil, false
}

// visionClasses are the classes visionMapper maps, for Supported.
var visionClasses = []string{"DepthwiseConv2D", "SeparableConv2D", "Conv2DTranspose", "UpSampling2D", "ZeroPadding2D",
	"Cropping2D", "GlobalMaxPooling2D", "Reshape", "Permute", "RepeatVector", "Rescaling", "Normalization",
	"SpatialDropout2D", "LeakyReLU", "ELU", "PReLU", "Softmax"}

// image checks that in is one example of NHWC input.
func image(f *fields, class string, in []int) bool {
	channelsLast(f)
	if len(in) != 3 {
		f.fail("%s needs an input of rank 3 (height, width, channels), got %v", class, in)
		return false
	}
	return f.err == nil
}

// depthwise: x [H, W, C] -> [OH, OW, C·M]; depthwise_kernel [KH, KW, C, M],
// bias [C·M].
func depthwise(name string, f *fields, in []int) mapped {
	kernel := f.pair("kernel_size", [2]int{}, true)
	strides := f.pair("strides", [2]int{1, 1}, false)
	same := padding(f)
	mult := f.positive("depth_multiplier", 1, false)
	dil := f.pair("dilation_rate", [2]int{1, 1}, false)
	act := activation(f)
	bias := f.boolean("use_bias", true)
	if !image(f, "DepthwiseConv2D", in) {
		return mapped{}
	}
	oh, ow, ok := windowed(f, "DepthwiseConv2D", in, dilated(kernel, dil), strides, same)
	if !ok {
		return mapped{}
	}
	params, err := mulAll(kernel[0], kernel[1], in[2], mult)
	if err != nil {
		f.fail("depthwise kernel: %v", err)
		return mapped{}
	}
	if bias {
		params += in[2] * mult
	}
	l := &nn.DepthwiseConv2D{LayerName: name, Kernel: kernel, Strides: strides, Same: same, DepthMultiplier: mult,
		Activation: act, NoBias: !bias, KernelInit: initializer(f, "depthwise_initializer")}
	if dil != [2]int{1, 1} {
		l.DilationRate = dil
	}
	return mapped{layer: l, out: []int{oh, ow, in[2] * mult}, params: params}
}

// separable: a depthwise step [KH, KW, C, M] then a pointwise one
// [1, 1, C·M, filters], bias [filters].
func separable(name string, f *fields, in []int) mapped {
	filters := f.positive("filters", 0, true)
	kernel := f.pair("kernel_size", [2]int{}, true)
	strides := f.pair("strides", [2]int{1, 1}, false)
	same := padding(f)
	mult := f.positive("depth_multiplier", 1, false)
	dil := f.pair("dilation_rate", [2]int{1, 1}, false)
	act := activation(f)
	bias := f.boolean("use_bias", true)
	if !image(f, "SeparableConv2D", in) {
		return mapped{}
	}
	oh, ow, ok := windowed(f, "SeparableConv2D", in, dilated(kernel, dil), strides, same)
	if !ok {
		return mapped{}
	}
	dw, err1 := mulAll(kernel[0], kernel[1], in[2], mult)
	pw, err2 := mulAll(in[2], mult, filters)
	if err1 != nil || err2 != nil {
		f.fail("kernels of %dx%dx%dx%d and %dx%d values exceed 2^40", kernel[0], kernel[1], in[2], mult, in[2]*mult, filters)
		return mapped{}
	}
	params := dw + pw
	if bias {
		params += filters
	}
	l := &nn.SeparableConv2D{LayerName: name, Filters: filters, Kernel: kernel, Strides: strides, Same: same, DepthMultiplier: mult,
		Activation: act, NoBias: !bias, DepthwiseInit: initializer(f, "depthwise_initializer"), PointwiseInit: initializer(f, "pointwise_initializer")}
	if dil != [2]int{1, 1} {
		l.DilationRate = dil
	}
	return mapped{layer: l, out: []int{oh, ow, filters}, params: params}
}

// conv2DTranspose: x [H, W, C] -> [OH, OW, filters] with Keras'
// deconv_output_length; kernel [KH, KW, filters, C], bias [filters].
func conv2DTranspose(name string, f *fields, in []int) mapped {
	filters := f.positive("filters", 0, true)
	kernel := f.pair("kernel_size", [2]int{}, true)
	strides := f.pair("strides", [2]int{1, 1}, false)
	same := padding(f)
	dil := f.pair("dilation_rate", [2]int{1, 1}, false)
	act := activation(f)
	bias := f.boolean("use_bias", true)
	var outPad []int
	if f.has("output_padding") {
		p := f.pair("output_padding", [2]int{}, false)
		if v, _ := f.get("output_padding"); isZeroPair(v) {
			p = [2]int{}
		}
		outPad = []int{p[0], p[1]}
	}
	if !image(f, "Conv2DTranspose", in) {
		return mapped{}
	}
	k := dilated(kernel, dil)
	var out [2]int
	for i := range out {
		switch {
		case outPad == nil && same:
			out[i] = in[i] * strides[i]
		case outPad == nil:
			out[i] = in[i]*strides[i] + max(k[i]-strides[i], 0)
		default:
			if outPad[i] >= strides[i] && outPad[i] >= dil[i] {
				f.fail("output_padding %v must be below the strides %v or the dilation", outPad, strides)
				return mapped{}
			}
			pad := 0
			if same {
				pad = k[i] / 2
			}
			out[i] = (in[i]-1)*strides[i] + k[i] - 2*pad + outPad[i]
		}
		if out[i] <= 0 {
			f.fail("output size %d: the transposed convolution does not fit input %v", out[i], in)
			return mapped{}
		}
	}
	params, err := mulAll(kernel[0], kernel[1], filters, in[2])
	if err != nil {
		f.fail("kernel: %v", err)
		return mapped{}
	}
	if bias {
		params += filters
	}
	o := []int{out[0], out[1], filters}
	if err := checkSize(o); err != nil {
		f.fail("output %v: %v", o, err)
		return mapped{}
	}
	l := &nn.Conv2DTranspose{LayerName: name, Filters: filters, Kernel: kernel, Strides: strides, Same: same, OutputPadding: outPad,
		Activation: act, NoBias: !bias, KernelInit: initializer(f, "kernel_initializer")}
	if dil != [2]int{1, 1} {
		l.DilationRate = dil
	}
	return mapped{layer: l, out: o, params: params}
}

func isZeroPair(v any) bool {
	l, ok := v.([]any)
	if !ok || len(l) != 2 {
		return false
	}
	for _, e := range l {
		if n, err := toInt(e); err != nil || n != 0 {
			return false
		}
	}
	return true
}

// upSampling: [H, W, C] -> [H·SH, W·SW, C], nearest or bilinear.
func upSampling(name string, f *fields, in []int) mapped {
	size := f.pair("size", [2]int{2, 2}, false)
	interp := f.str("interpolation", "nearest")
	if interp != "nearest" && interp != "bilinear" {
		f.unsupported("interpolation %q is not supported: nn.UpSampling2D has nearest and bilinear", interp)
	}
	if !image(f, "UpSampling2D", in) {
		return mapped{}
	}
	out := []int{in[0] * size[0], in[1] * size[1], in[2]}
	if err := checkSize(out); err != nil {
		f.fail("output %v: %v", out, err)
		return mapped{}
	}
	return mapped{layer: &nn.UpSampling2D{LayerName: name, Size: size, Interpolation: interp}, out: out}
}

// pad2D: ZeroPadding2D adds, Cropping2D removes, ((top, bottom), (left,
// right)) rows and columns: written as n, (h, w) or ((t, b), (l, r)).
func pad2D(name string, f *fields, in []int, crop bool) mapped {
	key, class, def := "padding", "ZeroPadding2D", 1
	if crop {
		key, class, def = "cropping", "Cropping2D", 0
	}
	p := [2][2]int{{def, def}, {def, def}}
	if v, ok := f.get(key); ok {
		var ok2 bool
		if p, ok2 = pads(v); !ok2 {
			f.fail("%s: want n, (height, width) or ((top, bottom), (left, right)) of non-negative integers, got %s", key, describe(v))
		}
	}
	if !image(f, class, in) {
		return mapped{}
	}
	out := []int{in[0], in[1], in[2]}
	for i := range 2 {
		if crop {
			out[i] -= p[i][0] + p[i][1]
		} else {
			out[i] += p[i][0] + p[i][1]
		}
	}
	if out[0] <= 0 || out[1] <= 0 {
		f.fail("cropping %v leaves nothing of input %v", p, in)
		return mapped{}
	}
	if err := checkSize(out); err != nil {
		f.fail("output %v: %v", out, err)
		return mapped{}
	}
	if crop {
		return mapped{layer: &nn.Cropping2D{LayerName: name, Cropping: p}, out: out}
	}
	return mapped{layer: &nn.ZeroPadding2D{LayerName: name, Padding: p}, out: out}
}

// pads reads n, [h, w] or [[t, b], [l, r]].
func pads(v any) ([2][2]int, bool) {
	var p [2][2]int
	small := func(e any) (int, bool) {
		n, err := toInt(e)
		return n, err == nil && n >= 0 && n <= maxInt32
	}
	if n, ok := small(v); ok {
		return [2][2]int{{n, n}, {n, n}}, true
	}
	l, ok := v.([]any)
	if !ok || len(l) != 2 {
		return p, false
	}
	for i, e := range l {
		if n, ok := small(e); ok {
			p[i] = [2]int{n, n}
			continue
		}
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return p, false
		}
		for j, x := range pair {
			n, ok := small(x)
			if !ok {
				return p, false
			}
			p[i][j] = n
		}
	}
	return p, true
}

// globalMax2D: [H, W, C] -> [C], or [1, 1, C] with keepdims.
func globalMax2D(name string, f *fields, in []int) mapped {
	keep := f.boolean("keepdims", false)
	if !image(f, "GlobalMaxPooling2D", in) {
		return mapped{}
	}
	out := []int{in[2]}
	if keep {
		out = []int{1, 1, in[2]}
	}
	return mapped{layer: &nn.GlobalMaxPooling2D{LayerName: name, KeepDims: keep}, out: out}
}

// reshape: target_shape (one entry may be -1) of as many values.
func reshape(name string, f *fields, in []int) mapped {
	v, _ := f.get("target_shape")
	list, ok := v.([]any)
	if !ok || len(list) == 0 || len(list) > maxRank {
		f.fail("target_shape: want a list of at most %d sizes, got %s", maxRank, describe(v))
		return mapped{}
	}
	n, _ := mulAll(in...)
	target := make([]int, len(list))
	free, known := -1, 1
	for i, e := range list {
		d, err := toInt(e)
		switch {
		case err == nil && d == -1 && free < 0:
			free = i
			continue
		case err != nil || d < 1 || d > maxInt32:
			f.fail("target_shape[%d]: want a positive size or one -1, got %s", i, describe(e))
			return mapped{}
		}
		target[i] = d
		if known > maxElements/d {
			f.fail("target_shape %s holds more than 2^40 values", describe(v))
			return mapped{}
		}
		known *= d
	}
	if free >= 0 {
		if n%known != 0 {
			f.fail("target_shape %s does not divide the input's %d values", describe(v), n)
			return mapped{}
		}
		target[free] = n / known
		known = n
	}
	if known != n {
		f.fail("target_shape %v holds %d values, the input %v %d", target, known, in, n)
		return mapped{}
	}
	return mapped{layer: &nn.Reshape{LayerName: name, TargetShape: slices.Clone(target)}, out: target}
}

// permute: dims, a permutation of 1 ... rank (the batch stays first).
func permute(name string, f *fields, in []int) mapped {
	dims := f.axes("dims", nil)
	if f.err != nil {
		return mapped{}
	}
	if len(dims) != len(in) {
		f.fail("dims %v: want a permutation of 1 to %d", dims, len(in))
		return mapped{}
	}
	out := make([]int, len(in))
	seen := make([]bool, len(in))
	for i, d := range dims {
		if d < 1 || d > len(in) || seen[d-1] {
			f.fail("dims %v: want a permutation of 1 to %d", dims, len(in))
			return mapped{}
		}
		seen[d-1] = true
		out[i] = in[d-1]
	}
	return mapped{layer: &nn.Permute{LayerName: name, Dims: dims}, out: out}
}

// repeatVector: [F] -> [n, F].
func repeatVector(name string, f *fields, in []int) mapped {
	n := f.positive("n", 0, true)
	if f.err != nil {
		return mapped{}
	}
	if len(in) != 1 {
		f.fail("RepeatVector needs an input of rank 1 (features), got %v", in)
		return mapped{}
	}
	out := []int{n, in[0]}
	if err := checkSize(out); err != nil {
		f.fail("output %v: %v", out, err)
		return mapped{}
	}
	return mapped{layer: &nn.RepeatVector{LayerName: name, Times: n}, out: out}
}

// rescaling: x·scale + offset; either may be a list (one value per
// channel, as EfficientNet's), which broadcasts against the last axis.
func rescaling(name string, f *fields, in []int) mapped {
	l := &nn.Rescaling{LayerName: name}
	if isList(f, "scale") {
		l.Scales = f.values("scale", in[len(in)-1])
	} else {
		l.Scale = f.float("scale", 1)
	}
	if isList(f, "offset") {
		l.Offsets = f.values("offset", in[len(in)-1])
	} else {
		l.Offset = f.float("offset", 0)
	}
	return mapped{layer: l, out: in}
}

// isList reports whether key holds a list.
func isList(f *fields, key string) bool {
	v, _ := f.get(key)
	_, ok := v.([]any)
	return ok
}

// normalization over the last axis: with mean and variance given they are
// constants (no weights), else the non-trainable weights mean, variance
// [C] and count (2·C + 1 params, as Keras counts them).
func normalization(name string, f *fields, in []int) mapped {
	ax := f.axes("axis", []int{-1})
	if f.err == nil && (len(ax) != 1 || (ax[0] != -1 && ax[0] != len(in))) {
		f.unsupported("axis %v is not supported: nn.Normalization normalizes the last axis", ax)
	}
	invert := f.boolean("invert", false)
	c := in[len(in)-1]
	mean, variance := f.values("mean", c), f.values("variance", c)
	if (mean == nil) != (variance == nil) {
		f.fail("mean and variance: give both or neither")
	}
	if f.err != nil {
		return mapped{}
	}
	l := &nn.Normalization{LayerName: name, Mean: mean, Variance: variance, Invert: invert}
	if mean != nil {
		return mapped{layer: l, out: in}
	}
	return mapped{layer: l, out: in, params: 2*c + 1, nonTrainable: 2*c + 1}
}

// values reads a number or a list of c numbers (nil when absent).
func (f *fields) values(key string, c int) []float64 {
	v, ok := f.get(key)
	if !ok {
		return nil
	}
	if _, isList := v.([]any); !isList {
		x := f.float(key, 0)
		return []float64{x}
	}
	out := f.list(key)
	if f.err == nil && len(out) != 1 && len(out) != c {
		f.fail("%s: want 1 or %d values, got %d", key, c, len(out))
	}
	return out
}

// spatialDropout drops whole channels of NHWC input.
func spatialDropout(name string, f *fields, in []int) mapped {
	rate := f.float("rate", 0)
	if !(rate >= 0 && rate < 1) {
		f.fail("rate %v is not in [0, 1)", rate)
	}
	if !image(f, "SpatialDropout2D", in) {
		return mapped{}
	}
	return mapped{layer: &nn.SpatialDropout2D{LayerName: name, Rate: rate}, out: in}
}

// relu maps Keras' ReLU layer: plain, it is nn.Activation "relu" (one op);
// with max_value, negative_slope or threshold, nn.ReLU.
func relu(name string, f *fields, in []int) mapped {
	slope, threshold := f.float("negative_slope", 0), f.float("threshold", 0)
	var maxValue *float64
	if f.has("max_value") {
		m := f.float("max_value", 0)
		if f.err == nil && m < 0 {
			f.fail("max_value %v is negative", m)
		}
		maxValue = &m
	}
	if slope < 0 {
		f.fail("negative_slope %v is negative", slope)
	}
	if maxValue == nil && slope == 0 && threshold == 0 {
		return mapped{layer: &nn.Activation{LayerName: name, Fn: "relu"}, out: in}
	}
	return mapped{layer: &nn.ReLU{LayerName: name, MaxValue: maxValue, NegativeSlope: slope, Threshold: threshold}, out: in}
}

// leakyReLU: Keras 2's alpha or Keras 3's negative_slope (default 0.3).
func leakyReLU(name string, f *fields, in []int) mapped {
	slope := f.float("negative_slope", f.float("alpha", 0.3))
	if slope < 0 {
		f.fail("negative_slope %v is negative", slope)
	}
	if slope == 0 { // nn reads zero as Keras' default
		return mapped{layer: &nn.Activation{LayerName: name, Fn: "relu"}, out: in}
	}
	return mapped{layer: &nn.LeakyReLU{LayerName: name, NegativeSlope: slope}, out: in}
}

// elu: alpha (default 1).
func elu(name string, f *fields, in []int) mapped {
	alpha := f.float("alpha", 1)
	if alpha == 0 {
		return mapped{layer: &nn.Activation{LayerName: name, Fn: "relu"}, out: in}
	}
	return mapped{layer: &nn.ELU{LayerName: name, Alpha: alpha}, out: in}
}

// prelu: alpha of one example's shape, size 1 along shared_axes (1 is the
// first axis after the batch).
func prelu(name string, f *fields, in []int) mapped {
	shared := f.axes("shared_axes", nil)
	if f.err != nil {
		return mapped{}
	}
	shape := slices.Clone(in)
	for _, a := range shared {
		if a < 1 || a > len(in) {
			f.fail("shared_axes %v: axis %d is out of range for an input of rank %d (batch included)", shared, a, len(in)+1)
			return mapped{}
		}
		shape[a-1] = 1
	}
	params, _ := mulAll(shape...)
	return mapped{layer: &nn.PReLU{LayerName: name, SharedAxes: shared, AlphaInit: initializer(f, "alpha_initializer")}, out: in, params: params}
}

// softmax over axis (counting the batch; -1 the last).
func softmax(name string, f *fields, in []int) mapped {
	ax := f.axes("axis", []int{-1})
	if f.err != nil {
		return mapped{}
	}
	if len(ax) != 1 {
		f.unsupported("axis %v is not supported: nn.Softmax normalizes along one axis", ax)
		return mapped{}
	}
	a, rank := ax[0], len(in)+1
	if a < 0 {
		a += rank
	}
	if a < 1 || a >= rank {
		f.fail("axis %d is out of range for an input of rank %d (batch included), or the batch", ax[0], rank)
		return mapped{}
	}
	if a == rank-1 {
		return mapped{layer: &nn.Activation{LayerName: name, Fn: "softmax"}, out: in}
	}
	return mapped{layer: &nn.Softmax{LayerName: name, Axis: a}, out: in}
}
