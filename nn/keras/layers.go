package keras

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
)

// Supported lists the Keras layer classes Parse maps (besides nested
// models: Sequential, Functional, Model).
var Supported = slices.Concat([]string{"InputLayer", "Dense", "Conv2D", "MaxPooling2D", "AveragePooling2D",
	"GlobalAveragePooling2D", "Flatten", "Dropout", "BatchNormalization", "LayerNormalization",
	"Activation", "ReLU", "Embedding",
	"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate", "Dot"}, visionClasses, sequenceClasses,
	applicationClasses, preprocessClasses)

// aliases are other spellings Keras accepts for the same classes.
var aliases = map[string]string{
	"MaxPool2D":              "MaxPooling2D",
	"AvgPool2D":              "AveragePooling2D",
	"GlobalAvgPool2D":        "GlobalAveragePooling2D",
	"GlobalMaxPool2D":        "GlobalMaxPooling2D",
	"Convolution2D":          "Conv2D",
	"Convolution2DTranspose": "Conv2DTranspose",
	"Deconvolution2D":        "Conv2DTranspose",
	"SeparableConvolution2D": "SeparableConv2D",
	"DepthwiseConvolution2D": "DepthwiseConv2D",
	"Convolution1D":          "Conv1D",
	"MaxPool1D":              "MaxPooling1D",
	"AvgPool1D":              "AveragePooling1D",
	"GlobalAvgPool1D":        "GlobalAveragePooling1D",
	"GlobalMaxPool1D":        "GlobalMaxPooling1D",
}

// mapped is one Keras layer call read and checked: its nn layer (an
// nn.Layer or nn.MultiLayer; nil for an InputLayer), and the output shapes
// and parameter counts that Keras' own arithmetic gives, which Parse
// cross-checks against the built model.
type mapped struct {
	layer        any
	out          []int   // per example, no batch: the first output
	outs         [][]int // every output (set from out for one-output layers)
	feed         []arg   // the nn layer's inputs in order; nil: the positional ones
	params       int     // every weight, as "Total params"
	nonTrainable int     // BatchNormalization's moving statistics
}

// arg names one tensor argument of a call: positional argument pos, or
// the tensor of keyword argument key.
type arg struct {
	pos int
	key string
}

// callIn is what one call of a layer takes: the shapes (per example) of its
// positional tensor arguments, those of its keyword tensor arguments, and
// its other keyword arguments (nil for a layer of a Sequential).
type callIn struct {
	shapes [][]int
	named  map[string][][]int
	kw     *fields
}

// one returns the single input of a one-input layer.
func (in callIn) one(f *fields, class string) ([]int, bool) {
	if len(in.named) != 0 {
		var keys []string
		for k := range in.named {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		f.unsupported("keyword tensor arguments (%s) are not supported for %s", strings.Join(keys, ", "), class)
		return nil, false
	}
	if len(in.shapes) != 1 {
		n := len(in.shapes)
		for _, s := range in.named {
			n += len(s)
		}
		f.fail("%s takes one input tensor, got %d", class, n)
		return nil, false
	}
	return in.shapes[0], true
}

// mapLayer maps one call of a Keras layer of class (canonical spelling)
// onto nn. Problems are recorded on f.
func mapLayer(class, name string, f *fields, in callIn) mapped {
	var m mapped
	if mm, ok := multiMapper(class); ok {
		m = mm(name, f, in)
	} else {
		x, ok := in.one(f, class)
		if !ok {
			return mapped{}
		}
		m = mapSingle(class, name, f, x)
	}
	if m.outs == nil && m.out != nil {
		m.outs = [][]int{m.out}
	}
	if m.out == nil && len(m.outs) > 0 {
		m.out = m.outs[0]
	}
	return m
}

// mapSingle maps a one-input, one-output layer with input in (per example).
func mapSingle(class, name string, f *fields, in []int) mapped {
	switch class {
	case "Dense":
		return dense(name, f, in)
	case "Conv2D":
		return conv2D(name, f, in)
	case "MaxPooling2D", "AveragePooling2D":
		return pool2D(name, class == "MaxPooling2D", f, in)
	case "GlobalAveragePooling2D":
		keep := f.boolean("keepdims", false)
		if !image(f, "GlobalAveragePooling2D", in) {
			return mapped{}
		}
		out := []int{in[2]}
		if keep {
			out = []int{1, 1, in[2]}
		}
		return mapped{layer: &nn.GlobalAveragePooling2D{LayerName: name, KeepDims: keep}, out: out}
	case "Flatten":
		channelsLast(f)
		n := 1
		for _, d := range in {
			n *= d // bounded: in was checked against maxElements
		}
		return mapped{layer: &nn.Flatten{LayerName: name}, out: []int{n}}
	case "Dropout":
		rate := f.float("rate", 0)
		if !(rate >= 0 && rate < 1) {
			f.fail("rate %v is not in [0, 1)", rate)
		}
		return mapped{layer: &nn.Dropout{LayerName: name, Rate: rate, NoiseShape: noiseShape(f, in)}, out: in}
	case "BatchNormalization":
		return batchNorm(name, f, in)
	case "LayerNormalization":
		return layerNorm(name, f, in)
	case "Activation":
		if !f.has("activation") {
			f.fail("activation is missing")
		}
		return mapped{layer: &nn.Activation{LayerName: name, Fn: activation(f)}, out: in}
	case "ReLU":
		return relu(name, f, in)
	case "Embedding":
		return embedding(name, f, in)
	case "LayerScale":
		return layerScale(name, f, in)
	case "StochasticDepth":
		return stochasticDepth(name, f, in)
	}
	if m, ok := visionMapper(class); ok {
		return m(name, f, in)
	}
	if m, ok := sequenceMapper(class); ok {
		return m(name, f, in)
	}
	if m, ok := preprocessMapper(class); ok {
		return m(name, f, in)
	}
	f.fail("internal: no mapping for class %s", class)
	return mapped{}
}

// noiseShape reads Dropout's noise_shape: one size (or null, the input's)
// per axis of the input, the batch first; nil when absent.
func noiseShape(f *fields, in []int) []int {
	v, ok := f.get("noise_shape")
	if !ok {
		return nil
	}
	list, isList := v.([]any)
	if !isList || len(list) != len(in)+1 {
		f.fail("noise_shape %s: want one size or null per axis of the input (rank %d, batch included)", describe(v), len(in)+1)
		return nil
	}
	out := make([]int, len(list))
	for i, e := range list {
		if e == nil {
			continue // 0: the input's size
		}
		n, err := toInt(e)
		if err != nil || (n != 1 && (i == 0 || n != in[i-1])) {
			f.fail("noise_shape %s: size %s of axis %d is neither 1, null nor the input's", describe(v), describe(e), i)
			return nil
		}
		out[i] = n
	}
	return out
}

// dense: x [..., in] -> [..., units]; kernel [in, units], bias [units].
func dense(name string, f *fields, in []int) mapped {
	units := f.positive("units", 0, true)
	act := activation(f)
	bias := f.boolean("use_bias", true)
	if f.err != nil {
		return mapped{}
	}
	k := in[len(in)-1]
	params, err := mul(k, units)
	if err != nil {
		f.fail("kernel [%d, %d]: %v", k, units, err)
		return mapped{}
	}
	if bias {
		params += units
	}
	out := append(append([]int{}, in[:len(in)-1]...), units)
	if err := checkSize(out); err != nil {
		f.fail("output %v: %v", out, err)
	}
	return mapped{
		layer:  &nn.Dense{LayerName: name, Units: units, Activation: act, NoBias: !bias, KernelInit: initializer(f, "kernel_initializer")},
		out:    out,
		params: params,
	}
}

// conv2D: x [H, W, C] -> [OH, OW, filters]; kernel [KH, KW, C/groups,
// filters] (HWIO), bias [filters]. A dilated kernel spans
// KH + (KH-1)·(dilation-1) rows.
func conv2D(name string, f *fields, in []int) mapped {
	filters := f.positive("filters", 0, true)
	kernel := f.pair("kernel_size", [2]int{}, true)
	strides := f.pair("strides", [2]int{1, 1}, false)
	same := padding(f)
	channelsLast(f)
	dil := f.pair("dilation_rate", [2]int{1, 1}, false)
	groups := f.positive("groups", 1, false)
	act := activation(f)
	bias := f.boolean("use_bias", true)
	if f.err != nil {
		return mapped{}
	}
	if dil != [2]int{1, 1} && strides != [2]int{1, 1} {
		f.fail("dilation_rate %v with strides %v: Keras allows one of them above 1, not both", dil, strides)
		return mapped{}
	}
	if len(in) != 3 {
		f.fail("Conv2D needs an input of rank 3 (height, width, channels), got %v", in)
		return mapped{}
	}
	if in[2]%groups != 0 || filters%groups != 0 {
		f.fail("groups=%d must divide the input channels %d and the filters %d", groups, in[2], filters)
		return mapped{}
	}
	oh, ow, ok := windowed(f, "Conv2D", in, dilated(kernel, dil), strides, same)
	if !ok {
		return mapped{}
	}
	params, err := mulAll(kernel[0], kernel[1], in[2]/groups, filters)
	if err != nil {
		f.fail("kernel %dx%dx%dx%d: %v", kernel[0], kernel[1], in[2]/groups, filters, err)
		return mapped{}
	}
	if bias {
		params += filters
	}
	out := []int{oh, ow, filters}
	if err := checkSize(out); err != nil {
		f.fail("output %v: %v", out, err)
	}
	l := &nn.Conv2D{LayerName: name, Filters: filters, Kernel: kernel, Strides: strides, Same: same,
		Activation: act, NoBias: !bias, KernelInit: initializer(f, "kernel_initializer")}
	if dil != [2]int{1, 1} {
		l.DilationRate = dil
	}
	if groups != 1 {
		l.Groups = groups
	}
	return mapped{layer: l, out: out, params: params}
}

// dilated returns the extent of a kernel with the given dilation.
func dilated(k, d [2]int) [2]int {
	return [2]int{k[0] + (k[0]-1)*(d[0]-1), k[1] + (k[1]-1)*(d[1]-1)}
}

// pool2D: x [H, W, C] -> [OH, OW, C]; strides default to the pool size.
func pool2D(name string, max bool, f *fields, in []int) mapped {
	pool := f.pair("pool_size", [2]int{2, 2}, false)
	strides := f.pair("strides", pool, false)
	same := padding(f)
	channelsLast(f)
	if f.err != nil {
		return mapped{}
	}
	oh, ow, ok := windowed(f, "pooling", in, pool, strides, same)
	if !ok {
		return mapped{}
	}
	return mapped{layer: &nn.Pool2D{LayerName: name, Max: max, Pool: pool, Strides: strides, Same: same},
		out: []int{oh, ow, in[2]}}
}

// windowed returns the output height and width of a window over [H, W, C],
// with Keras' "valid"/"same" arithmetic (graph.ConvOutSize).
func windowed(f *fields, what string, in []int, win, strides [2]int, same bool) (int, int, bool) {
	if len(in) != 3 {
		f.fail("%s needs an input of rank 3 (height, width, channels), got %v", what, in)
		return 0, 0, false
	}
	oh := graph.ConvOutSize(in[0], win[0], strides[0], same)
	ow := graph.ConvOutSize(in[1], win[1], strides[1], same)
	if oh <= 0 || ow <= 0 {
		f.fail("window %dx%d does not fit input %v with valid padding", win[0], win[1], in)
		return 0, 0, false
	}
	return oh, ow, true
}

// batchNorm: gamma, beta (trainable), moving_mean, moving_variance (not),
// each [channels], over the last axis only.
func batchNorm(name string, f *fields, in []int) mapped {
	axis := oneAxis(f, "BatchNormalization", in)
	mom := f.float("momentum", 0.99)
	eps := f.float("epsilon", 1e-3)
	if !(mom > 0 && mom < 1) {
		f.unsupported("momentum %v is not supported: nn.BatchNormalization takes a momentum in (0, 1)", mom)
	}
	if !(eps > 0) {
		f.unsupported("epsilon %v is not supported: nn.BatchNormalization takes a positive epsilon", eps)
	}
	scale, center := f.boolean("scale", true), f.boolean("center", true)
	if f.boolean("renorm", false) {
		f.unsupported("renorm=true is not supported by nn.BatchNormalization")
	}
	if f.has("virtual_batch_size") {
		f.unsupported("virtual_batch_size is not supported by nn.BatchNormalization")
	}
	if f.has("adjustment") {
		f.unsupported("adjustment is not supported by nn.BatchNormalization")
	}
	if f.err != nil {
		return mapped{}
	}
	c := in[axis-1]
	affine := 0
	if scale {
		affine += c
	}
	if center {
		affine += c
	}
	l := &nn.BatchNormalization{LayerName: name, Momentum: mom, Epsilon: eps, NoScale: !scale, NoCenter: !center}
	if axis != len(in) {
		l.Axis = axis
	}
	return mapped{layer: l, out: in, params: affine + 2*c, nonTrainable: 2 * c}
}

// oneAxis reads "axis", one axis of an input of per-example shape in
// (Keras counts the batch: for NHWC input 3, [3] and -1 all name the
// channels), and returns it counted from the batch (1 ... len(in)).
func oneAxis(f *fields, class string, in []int) int {
	ax := f.axes("axis", []int{-1})
	rank := len(in) + 1
	if len(ax) != 1 {
		f.unsupported("axis %v is not supported: nn.%s normalizes over one axis", ax, class)
		return rank - 1
	}
	a := ax[0]
	if a < 0 {
		a += rank
	}
	if a < 1 || a >= rank {
		f.fail("axis %d is out of range for an input of rank %d (batch included), or the batch", ax[0], rank)
		return rank - 1
	}
	return a
}

// layerNorm: gamma, beta [channels], normalizing the last axis of each example.
func layerNorm(name string, f *fields, in []int) mapped {
	lastAxis(f, "LayerNormalization", in)
	eps := f.float("epsilon", 1e-3)
	if !(eps > 0) {
		f.unsupported("epsilon %v is not supported: nn.LayerNormalization takes a positive epsilon", eps)
	}
	affine(f, "LayerNormalization")
	if f.boolean("rms_scaling", false) {
		f.unsupported("rms_scaling=true is not supported by nn.LayerNormalization")
	}
	return mapped{layer: &nn.LayerNormalization{LayerName: name, Epsilon: eps}, out: in, params: 2 * in[len(in)-1]}
}

// affine rejects center=false or scale=false: nn's normalizations always
// learn both gamma and beta, so the parameter count would differ.
func affine(f *fields, class string) {
	if !f.boolean("center", true) || !f.boolean("scale", true) {
		f.unsupported("center=false or scale=false is not supported: nn.%s always learns beta and gamma", class)
	}
}

// lastAxis checks that "axis" names the last axis of an input of per-example
// shape in. Keras counts the batch dimension: for NHWC input axis 3, [3]
// and -1 all name the channels.
func lastAxis(f *fields, class string, in []int) {
	ax := f.axes("axis", []int{-1})
	rank := len(in) + 1
	if len(ax) != 1 {
		f.unsupported("axis %v is not supported: nn.%s normalizes over one axis, the last", ax, class)
		return
	}
	a := ax[0]
	if a < 0 {
		a += rank
	}
	switch {
	case a < 0 || a >= rank:
		f.fail("axis %d is out of range for an input of rank %d (batch included)", ax[0], rank)
	case a != rank-1:
		f.unsupported("axis %d is not supported: nn.%s uses the last axis (%d or -1 for an input of rank %d, batch included)",
			ax[0], class, rank-1, rank)
	}
}

// embedding: indices [...] -> [..., output_dim]; embeddings [input_dim, output_dim].
func embedding(name string, f *fields, in []int) mapped {
	vocab := f.positive("input_dim", 0, true)
	dim := f.positive("output_dim", 0, true)
	if f.has("lora_rank") {
		f.unsupported("lora_rank is not supported by nn.Embedding")
	}
	if f.err != nil {
		return mapped{}
	}
	if len(in)+1 > maxRank {
		f.fail("output rank %d exceeds the maximum %d", len(in)+1, maxRank)
		return mapped{}
	}
	params, err := mul(vocab, dim)
	if err != nil {
		f.fail("embeddings [%d, %d]: %v", vocab, dim, err)
		return mapped{}
	}
	out := append(append([]int{}, in...), dim)
	if err := checkSize(out); err != nil {
		f.fail("output %v: %v", out, err)
	}
	return mapped{layer: &nn.Embedding{LayerName: name, InputDim: vocab, OutputDim: dim}, out: out, params: params}
}

func padding(f *fields) bool {
	switch p := f.str("padding", "valid"); strings.ToLower(p) {
	case "valid":
		return false
	case "same":
		return true
	default:
		f.unsupported("padding %q is not supported: want \"valid\" or \"same\"", p)
	}
	return false
}

// channelsLast accepts data_format channels_last (or absent/null, Keras'
// default image_data_format).
func channelsLast(f *fields) {
	if d := f.str("data_format", "channels_last"); d != "channels_last" {
		f.unsupported("data_format %q is not supported: headroom is channels_last (NHWC), as Keras' default; rebuild the model with data_format=\"channels_last\"", d)
	}
}

// activation reads "activation": a name, or a dict form ({"class_name":
// "function", "config": "relu"}, {"class_name": "ReLU", "config": {...}}).
func activation(f *fields) string { return activationOf(f, "activation", "linear") }

// activationOf reads the activation under key (def when absent). Keras 2's
// hard_sigmoid (clip(0.2·x + 0.5, 0, 1)) is not Keras 3's (relu6(x + 3)/6).
func activationOf(f *fields, key, def string) string {
	v, ok := f.get(key)
	if !ok {
		return def
	}
	name := ""
	switch t := v.(type) {
	case string:
		name = t
	case map[string]any:
		if s, ok := t["config"].(string); ok {
			name = s
		} else if s, ok := t["class_name"].(string); ok {
			name = strings.ToLower(s)
		}
	}
	if name == "" {
		f.fail("%s: want a name such as \"relu\", got %s", key, describe(v))
		return def
	}
	// Keras 2 serializes some functions with their module path.
	name = strings.TrimPrefix(strings.TrimPrefix(name, "keras.activations."), "tf.keras.activations.")
	if name == "hard_sigmoid" && f.keras2 {
		name = "hard_sigmoid_keras2"
	}
	for _, a := range nn.Activations {
		if name == a {
			return name
		}
	}
	f.unsupported("%s %q is not supported; supported: %s", key, name, strings.Join(nn.Activations, ", "))
	return def
}

// initializer maps a Keras kernel initializer onto nn's. Those nn lacks
// (orthogonal, lecun_normal, ...) return nil: nn's default glorot_uniform.
// Initializers change the first step, not shapes or memory.
func initializer(f *fields, key string) nn.Initializer {
	v, ok := f.get(key)
	if !ok {
		return nil
	}
	class, conf := "", map[string]any{}
	switch t := v.(type) {
	case string:
		class = t
	case map[string]any:
		class, _ = t["class_name"].(string)
		if c, ok := t["config"].(map[string]any); ok {
			conf = c
		}
	}
	cf := &fields{m: conf}
	switch snake(class) {
	case "glorot_uniform":
		return nn.GlorotUniform{}
	case "he_normal":
		return nn.HeNormal{}
	case "zeros":
		return nn.Constant{V: 0}
	case "ones":
		return nn.Constant{V: 1}
	case "constant":
		if x := cf.float("value", 0); cf.err == nil {
			return nn.Constant{V: x}
		}
	case "random_uniform":
		lo, hi := cf.float("minval", -0.05), cf.float("maxval", 0.05)
		if cf.err == nil && lo <= hi {
			return nn.Uniform{Lo: lo, Hi: hi}
		}
	case "variance_scaling": // what Keras 2.0-2.2 wrote for glorot_uniform and he_normal
		scale, mode, dist := cf.float("scale", 1), cf.str("mode", "fan_in"), cf.str("distribution", "truncated_normal")
		switch {
		case scale == 1 && mode == "fan_avg" && dist == "uniform":
			return nn.GlorotUniform{}
		case scale == 2 && mode == "fan_in" && (dist == "normal" || dist == "truncated_normal"):
			return nn.HeNormal{}
		}
	}
	return nil
}

// mul returns a*b, or an error above maxElements.
func mul(a, b int) (int, error) {
	if a < 0 || b < 0 || (b != 0 && a > maxElements/b) {
		return 0, fmt.Errorf("%d x %d values exceed 2^40", a, b)
	}
	return a * b, nil
}

func mulAll(xs ...int) (int, error) {
	n := 1
	for _, x := range xs {
		var err error
		if n, err = mul(n, x); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func checkSize(s []int) error {
	_, err := mulAll(s...)
	return err
}
