package keras

import (
	"slices"

	"github.com/headroom-ml/headroom/nn"
)

// The layer classes keras.applications defines for itself (module
// keras.src.applications.<model>, not exported as keras.layers):
// ConvNeXt's LayerScale and StochasticDepth, Inception-ResNet-v2's
// CustomScaleLayer.

// applicationClasses are the classes mapped here, for Supported.
var applicationClasses = []string{"LayerScale", "StochasticDepth", "CustomScaleLayer"}

// layerScale: gamma [projection_dim], x [..., C] with C = projection_dim.
func layerScale(name string, f *fields, in []int) mapped {
	dim := f.positive("projection_dim", 0, true)
	init := f.float("init_values", 0)
	if f.err != nil {
		return mapped{}
	}
	if c := in[len(in)-1]; c != dim {
		f.fail("projection_dim %d does not match the input's last axis, %v", dim, in)
		return mapped{}
	}
	return mapped{layer: &nn.LayerScale{LayerName: name, InitValues: init}, out: in, params: dim}
}

// stochasticDepth drops the residual branch of whole examples in
// training, scaling the kept ones by 1/(1 - drop_path_rate): nn.Dropout
// with one draw per example.
func stochasticDepth(name string, f *fields, in []int) mapped {
	rate := f.float("drop_path_rate", 0)
	if !(rate >= 0 && rate < 1) {
		f.fail("drop_path_rate %v is not in [0, 1)", rate)
		return mapped{}
	}
	noise := make([]int, len(in)+1)
	for i := 1; i < len(noise); i++ {
		noise[i] = 1
	}
	return mapped{layer: &nn.Dropout{LayerName: name, Rate: rate, NoiseShape: noise}, out: in}
}

// customScale: inputs [x, r] of one shape -> x + scale·r.
func customScale(name string, f *fields, in callIn) mapped {
	xs, ok := merged(f, "CustomScaleLayer", in, 2)
	if !ok {
		return mapped{}
	}
	scale := f.float("scale", 1)
	if len(xs) != 2 || !slices.Equal(xs[0], xs[1]) {
		f.fail("CustomScaleLayer takes two inputs of one shape, got %v", xs)
		return mapped{}
	}
	return mapped{layer: &nn.ScaledAdd{LayerName: name, Scale: scale}, out: xs[0]}
}
