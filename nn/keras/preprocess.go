package keras

import (
	"math"
	"slices"

	"github.com/headroom-ml/headroom/nn"
)

// Keras' image preprocessing layers saved inside models (nn/preprocess.go):
// Resizing, and the random augmentations, active in training and the
// identity in inference as in Keras. Their seeds are not read: nn draws
// from the model's seed and the layer's name.

// maxSide bounds the sides Resizing resizes to.
const maxSide = 1 << 20

// preprocessClasses are the classes mapped here, for Supported.
var preprocessClasses = []string{"Resizing", "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation", "RandomContrast"}

// preprocessMapper returns the mapping of a preprocessing layer class.
func preprocessMapper(class string) (func(name string, f *fields, in []int) mapped, bool) {
	switch class {
	case "Resizing":
		return resizing, true
	case "RandomFlip":
		return randomFlip, true
	case "RandomRotation":
		return randomRotation, true
	case "RandomZoom":
		return randomZoom, true
	case "RandomTranslation":
		return randomTranslation, true
	case "RandomContrast":
		return randomContrast, true
	}
	return nil, false
}

// resizing: [H, W, C] -> [height, width, C].
func resizing(name string, f *fields, in []int) mapped {
	h, w := f.positive("height", 0, true), f.positive("width", 0, true)
	if h > maxSide || w > maxSide {
		// nearest resizing gathers through an index of this many rows
		f.fail("height %d or width %d: headroom resizes to at most %d pixels a side", h, w, maxSide)
	}
	interp := f.str("interpolation", "bilinear")
	if interp != "bilinear" && interp != "nearest" {
		f.unsupported("interpolation %q is not supported: nn.Resizing has bilinear and nearest", interp)
	}
	if f.boolean("antialias", false) {
		f.unsupported("antialias=true is not supported: nn.Resizing resizes as tf.image.resize without antialiasing")
	}
	crop, pad := f.boolean("crop_to_aspect_ratio", false), f.boolean("pad_to_aspect_ratio", false)
	if crop && pad {
		f.fail("crop_to_aspect_ratio and pad_to_aspect_ratio: Keras takes one of them")
	}
	if fm := f.str("fill_mode", "constant"); fm != "constant" {
		f.unsupported("fill_mode %q is not supported: Keras' Resizing pads with a constant", fm)
	}
	fill := f.float("fill_value", 0)
	if !image(f, "Resizing", in) {
		return mapped{}
	}
	out := []int{h, w, in[2]}
	if err := checkSize(out); err != nil {
		f.fail("output %v: %v", out, err)
		return mapped{}
	}
	return mapped{layer: &nn.Resizing{LayerName: name, Height: h, Width: w, Interpolation: interp,
		CropToAspectRatio: crop, PadToAspectRatio: pad, FillValue: fill}, out: out}
}

// randomFlip: mode; tf.keras 2 flips each axis on a draw of its own,
// Keras 3 both on one.
func randomFlip(name string, f *fields, in []int) mapped {
	mode := f.str("mode", "horizontal_and_vertical")
	if mode != "horizontal" && mode != "vertical" && mode != "horizontal_and_vertical" {
		f.fail("mode %q: want horizontal, vertical or horizontal_and_vertical", mode)
	}
	if !image(f, "RandomFlip", in) {
		return mapped{}
	}
	return mapped{layer: &nn.RandomFlip{LayerName: name, Mode: mode, Independent: f.keras2}, out: in}
}

// randomRotation: factor in fractions of a turn.
func randomRotation(name string, f *fields, in []int) mapped {
	fac := factor(f, "factor", -1)
	r := resampling(f)
	if !image(f, "RandomRotation", in) {
		return mapped{}
	}
	return mapped{layer: &nn.RandomRotation{LayerName: name, Factor: fac, Resampling: r}, out: in}
}

// randomZoom: height_factor, and width_factor (null: the height's draw).
func randomZoom(name string, f *fields, in []int) mapped {
	hf := factor(f, "height_factor", -1)
	var wf *nn.Factor
	if f.has("width_factor") {
		w := factor(f, "width_factor", -1)
		wf = &w
	}
	for _, fac := range []*nn.Factor{&hf, wf} {
		if fac != nil && fac.Lower <= -1 {
			f.fail("zoom factor %v: each bound must be above -1", *fac)
		}
	}
	r := resampling(f)
	if !image(f, "RandomZoom", in) {
		return mapped{}
	}
	return mapped{layer: &nn.RandomZoom{LayerName: name, HeightFactor: hf, WidthFactor: wf, Resampling: r}, out: in}
}

// randomTranslation: height_factor and width_factor, fractions of the
// image's size.
func randomTranslation(name string, f *fields, in []int) mapped {
	hf, wf := factor(f, "height_factor", -1), factor(f, "width_factor", -1)
	r := resampling(f)
	if !image(f, "RandomTranslation", in) {
		return mapped{}
	}
	return mapped{layer: &nn.RandomTranslation{LayerName: name, HeightFactor: hf, WidthFactor: wf, Resampling: r}, out: in}
}

// randomContrast: the factor f drawn from [1 - lower, 1 + upper]. Keras 3
// reads a number f as (0, f) (its factor bounds are [0, 1]) and writes the
// pair; tf.keras 2 reads it as (f, f).
func randomContrast(name string, f *fields, in []int) mapped {
	fac := factor(f, "factor", 0)
	if v, _ := f.get("factor"); f.keras2 && !isList(f, "factor") && v != nil {
		x := f.float("factor", 0)
		fac = nn.Factor{Lower: math.Abs(x), Upper: math.Abs(x)}
	}
	vr := [2]float64{0, 255}
	if isList(f, "value_range") {
		l := f.values("value_range", 2)
		if f.err == nil && len(l) == 2 {
			vr = [2]float64{l[0], l[1]}
		}
	}
	if !image(f, "RandomContrast", in) {
		return mapped{}
	}
	return mapped{layer: &nn.RandomContrast{LayerName: name, Factor: fac, ValueRange: vr}, out: in}
}

// factor reads a random layer's range as Keras' _set_factor: a pair
// (sorted), or a number v as (max(-|v|, lowest), |v|), where lowest is
// the layer's lower bound (-1, or 0 for RandomContrast).
func factor(f *fields, key string, lowest float64) nn.Factor {
	v, ok := f.get(key)
	if !ok {
		f.fail("%s is missing", key)
		return nn.Factor{}
	}
	if _, isList := v.([]any); isList {
		l := f.list(key)
		if f.err != nil {
			return nn.Factor{}
		}
		if len(l) != 2 {
			f.fail("%s: want a number or a pair, got %d values", key, len(l))
			return nn.Factor{}
		}
		slices.Sort(l)
		if l[0] < -1 || l[1] > 1 {
			f.fail("%s %v: each bound must be in [-1, 1]", key, l)
		}
		return nn.Factor{Lower: l[0], Upper: l[1]}
	}
	x := math.Abs(f.float(key, 0))
	if x > 1 {
		f.fail("%s %v: want a number in [-1, 1]", key, x)
	}
	return nn.Factor{Lower: max(-x, lowest), Upper: x}
}

// resampling reads interpolation, fill_mode and fill_value.
func resampling(f *fields) nn.Resampling {
	r := nn.Resampling{Interpolation: f.str("interpolation", "bilinear"), FillMode: f.str("fill_mode", "reflect"),
		FillValue: f.float("fill_value", 0)}
	if r.Interpolation != "bilinear" && r.Interpolation != "nearest" {
		f.unsupported("interpolation %q is not supported: want bilinear or nearest", r.Interpolation)
	}
	switch r.FillMode {
	case "reflect", "wrap", "constant", "nearest":
	default:
		f.unsupported("fill_mode %q is not supported: want reflect, wrap, constant or nearest", r.FillMode)
	}
	return r
}
