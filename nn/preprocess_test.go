package nn_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// image is an NHWC batch as float64s, with its shape.
type image struct {
	n, h, w, c int
	v          []float64
}

func newImage(n, h, w, c int, f func(i int) float64) image {
	im := image{n, h, w, c, make([]float64, n*h*w*c)}
	for i := range im.v {
		im.v[i] = f(i)
	}
	return im
}

func (im image) at(n, y, x, c int) float64 { return im.v[((n*im.h+y)*im.w+x)*im.c+c] }
func (im image) shape() tensor.Shape       { return tensor.Shape{im.n, im.h, im.w, im.c} }

// sampleConstant reads image n of im at point (px, py) bilinearly, points
// outside [0, W-1]×[0, H-1] and neighbours outside the image reading fill
// (TensorFlow's constant fill mode, written from its definition).
func sampleConstant(im image, n, c int, px, py, fill float64) float64 {
	if px < 0 || px > float64(im.w-1) || py < 0 || py > float64(im.h-1) {
		return fill
	}
	x0, y0 := math.Floor(px), math.Floor(py)
	v := 0.0
	for _, p := range []struct{ x, y, w float64 }{
		{x0, y0, (1 - (py - y0)) * (1 - (px - x0))}, {x0 + 1, y0, (1 - (py - y0)) * (px - x0)},
		{x0, y0 + 1, (py - y0) * (1 - (px - x0))}, {x0 + 1, y0 + 1, (py - y0) * (px - x0)},
	} {
		if p.w == 0 {
			continue
		}
		if int(p.x) >= im.w || int(p.y) >= im.h {
			v += p.w * fill
		} else {
			v += p.w * im.at(n, int(p.y), int(p.x), c)
		}
	}
	return v
}

// affine returns im with output pixel (x, y) of image n read at
// m(n)·(x, y, 1), by sampleConstant; a NaN fill clamps the point into the
// image instead (the nearest fill mode).
func affine(im image, fill float64, m func(n int) [6]float64) []float64 {
	var out []float64
	for n := 0; n < im.n; n++ {
		a := m(n)
		for y := 0; y < im.h; y++ {
			for x := 0; x < im.w; x++ {
				px := a[0]*float64(x) + a[1]*float64(y) + a[2]
				py := a[3]*float64(x) + a[4]*float64(y) + a[5]
				if math.IsNaN(fill) {
					px, py = min(max(px, 0), float64(im.w-1)), min(max(py, 0), float64(im.h-1))
				}
				for c := 0; c < im.c; c++ {
					out = append(out, sampleConstant(im, n, c, px, py, fill))
				}
			}
		}
	}
	return out
}

func nearAll(t *testing.T, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d values, want %d", len(got), len(want))
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*max(1, math.Abs(want[i])) {
			t.Fatalf("element %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

// The random layers are the identity in inference, as in Keras; each
// geometric one, given a range of one value, applies Keras' matrix for it
// (checked against a direct bilinear resampling with constant fill), and
// RandomContrast Keras' (x - mean)·f + mean clipped to the value range.
func TestRandomLayersFixedDraws(t *testing.T) {
	im := newImage(2, 5, 6, 2, func(i int) float64 { return math.Sin(float64(i)*0.37) * 100 })
	constant := nn.Resampling{FillMode: "constant", FillValue: -7}
	cx, cy := float64(im.w-1)/2, float64(im.h-1)/2
	for _, tc := range []struct {
		name  string
		layer nn.Layer
		want  []float64
	}{
		{"rotation 90 degrees", &nn.RandomRotation{LayerName: "r", Factor: nn.Factor{Lower: 0.25, Upper: 0.25}, Resampling: constant},
			// cos 0, sin 1: (x, y) reads (cx - (y - cy), cy + (x - cx))
			affine(im, -7, func(int) [6]float64 { return [6]float64{0, -1, cx + cy, 1, 0, cy - cx} })},
		{"rotation -30 degrees", &nn.RandomRotation{LayerName: "r", Factor: nn.Factor{Lower: -1.0 / 12, Upper: -1.0 / 12}, Resampling: constant},
			affine(im, -7, func(int) [6]float64 {
				c, s := math.Cos(-math.Pi/6), math.Sin(-math.Pi/6)
				return [6]float64{c, -s, cx - cx*c + cy*s, s, c, cy - cx*s - cy*c}
			})},
		{"zoom", &nn.RandomZoom{LayerName: "z", HeightFactor: nn.Factor{Lower: 0.5, Upper: 0.5}, WidthFactor: &nn.Factor{Lower: -0.25, Upper: -0.25}, Resampling: constant},
			// x reads zx·x + (W-1)/2·(1 - zx), zx = 0.75; y with zy = 1.5
			affine(im, -7, func(int) [6]float64 { return [6]float64{0.75, 0, cx * 0.25, 0, 1.5, cy * -0.5} })},
		{"translation", &nn.RandomTranslation{LayerName: "t", HeightFactor: nn.Factor{Lower: 0.2, Upper: 0.2}, WidthFactor: nn.Factor{Lower: -0.5, Upper: -0.5}, Resampling: constant},
			// shifted 1 row down and 3 columns left: (x, y) reads (x + 3, y - 1)
			affine(im, -7, func(int) [6]float64 { return [6]float64{1, 0, 3, 0, 1, -1} })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := runVisionLayer(t, tc.layer, im.shape(), im.v, true, nil)
			nearAll(t, got, tc.want, 1e-9)
			got, _ = runVisionLayer(t, tc.layer, im.shape(), im.v, false, nil)
			nearAll(t, got, im.v, 0)
		})
	}
	// the angles span the range, a full turn either way (sin and cos are
	// composed from elementwise ops, to about 1e-10: pixels of about 100
	// move by less than 1e-6, far below float32's rounding)
	for _, turn := range []float64{-1, -0.7, -0.5, 0.1, 0.5, 0.9, 1} {
		t.Run("rotation by "+strconv.FormatFloat(turn, 'g', -1, 64)+" turn", func(t *testing.T) {
			// nearest filling: a corner that rounding puts a hair outside the
			// image reads the edge either way
			l := &nn.RandomRotation{LayerName: "r", Factor: nn.Factor{Lower: turn, Upper: turn}, Resampling: nn.Resampling{FillMode: "nearest"}}
			got, _ := runVisionLayer(t, l, im.shape(), im.v, true, nil)
			c, s := math.Cos(2*math.Pi*turn), math.Sin(2*math.Pi*turn)
			nearAll(t, got, affine(im, math.NaN(), func(int) [6]float64 { return [6]float64{c, -s, cx - cx*c + cy*s, s, c, cy - cx*s - cy*c} }), 1e-6)
		})
	}
	t.Run("contrast", func(t *testing.T) {
		l := &nn.RandomContrast{LayerName: "c", Factor: nn.Factor{Lower: -0.5, Upper: 0.5}, ValueRange: [2]float64{-50, 60}}
		got, _ := runVisionLayer(t, l, im.shape(), im.v, true, nil)
		var want []float64
		for n := 0; n < im.n; n++ {
			for y := 0; y < im.h; y++ {
				for x := 0; x < im.w; x++ {
					for c := 0; c < im.c; c++ {
						mean := 0.0
						for yy := 0; yy < im.h; yy++ {
							for xx := 0; xx < im.w; xx++ {
								mean += im.at(n, yy, xx, c) / float64(im.h*im.w)
							}
						}
						want = append(want, min(max((im.at(n, y, x, c)-mean)*1.5+mean, -50), 60))
					}
				}
			}
		}
		nearAll(t, got, want, 1e-12)
		got, _ = runVisionLayer(t, l, im.shape(), im.v, false, nil)
		nearAll(t, got, im.v, 0)
	})
}

// RandomFlip mirrors each image whole or leaves it, both outcomes within a
// batch; Keras 3's horizontal_and_vertical flips both axes on one draw,
// tf.keras 2's (Independent) on a draw each, so that all four outcomes
// occur.
func TestRandomFlip(t *testing.T) {
	const n, h, w = 64, 3, 4
	im := newImage(n, h, w, 1, func(i int) float64 { return float64(i) })
	mirrored := func(got []float64, b int, fx, fy bool) bool {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				sx, sy := x, y
				if fx {
					sx = w - 1 - x
				}
				if fy {
					sy = h - 1 - y
				}
				if got[(b*h+y)*w+x] != im.at(b, sy, sx, 0) {
					return false
				}
			}
		}
		return true
	}
	for _, tc := range []struct {
		layer    *nn.RandomFlip
		outcomes [][2]bool // (horizontal, vertical) flips that may occur
	}{
		{&nn.RandomFlip{LayerName: "f", Mode: "horizontal"}, [][2]bool{{false, false}, {true, false}}},
		{&nn.RandomFlip{LayerName: "f", Mode: "vertical"}, [][2]bool{{false, false}, {false, true}}},
		{&nn.RandomFlip{LayerName: "f"}, [][2]bool{{false, false}, {true, true}}},
		{&nn.RandomFlip{LayerName: "f", Independent: true}, [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}}},
	} {
		got, _ := runVisionLayer(t, tc.layer, im.shape(), im.v, true, nil)
		seen := map[[2]bool]int{}
		for b := 0; b < n; b++ {
			found := false
			for _, o := range tc.outcomes {
				if mirrored(got, b, o[0], o[1]) {
					seen[o]++
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("mode %q independent %v: image %d is none of %v", tc.layer.Mode, tc.layer.Independent, b, tc.outcomes)
			}
		}
		if len(seen) != len(tc.outcomes) {
			t.Errorf("mode %q independent %v: outcomes %v over %d images, want each of %v", tc.layer.Mode, tc.layer.Independent, seen, n, tc.outcomes)
		}
		inf, _ := runVisionLayer(t, tc.layer, im.shape(), im.v, false, nil)
		nearAll(t, inf, im.v, 0)
	}
}

// RandomRotation draws an angle per image: over a batch of copies of one
// image, the results differ, and each is the image rotated by some angle
// in the range (the pixel at the centre of an odd-sized image stays).
func TestRandomRotationDrawsPerImage(t *testing.T) {
	const n = 16
	im := newImage(n, 5, 5, 1, func(i int) float64 { return float64(i % 25) })
	l := &nn.RandomRotation{LayerName: "r", Factor: nn.Factor{Lower: -0.5, Upper: 0.5}, Resampling: nn.Resampling{FillMode: "constant"}}
	got, _ := runVisionLayer(t, l, im.shape(), im.v, true, nil)
	distinct := map[float64]bool{}
	for b := 0; b < n; b++ {
		if c := got[b*25+12]; math.Abs(c-12) > 1e-9 {
			t.Errorf("image %d: the centre pixel moved: %v, want 12", b, c)
		}
		distinct[got[b*25+3]] = true
	}
	if len(distinct) < n/2 {
		t.Errorf("%d distinct results over %d images: want one angle per image", len(distinct), n)
	}
}

// Resizing: bilinear as tf.image.resize (identity at the same size),
// nearest reading ⌊(o + 0.5)·in/out⌋ for integer and other ratios, and
// the crop to the target's aspect ratio (a centred box) before resizing.
func TestResizing(t *testing.T) {
	im := newImage(1, 4, 6, 1, func(i int) float64 { return float64(i) })
	nearest := func(oh, ow int) []float64 {
		var out []float64
		for y := 0; y < oh; y++ {
			for x := 0; x < ow; x++ {
				sy := min(int(math.Floor((float64(y)+0.5)*4/float64(oh))), 3)
				sx := min(int(math.Floor((float64(x)+0.5)*6/float64(ow))), 5)
				out = append(out, im.at(0, sy, sx, 0))
			}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		layer *nn.Resizing
		shape tensor.Shape
		want  []float64
	}{
		{"same size", &nn.Resizing{LayerName: "r", Height: 4, Width: 6}, tensor.Shape{1, 4, 6, 1}, im.v},
		{"nearest up 2x", &nn.Resizing{LayerName: "r", Height: 8, Width: 12, Interpolation: "nearest"}, tensor.Shape{1, 8, 12, 1}, nearest(8, 12)},
		{"nearest down", &nn.Resizing{LayerName: "r", Height: 2, Width: 3, Interpolation: "nearest"}, tensor.Shape{1, 2, 3, 1}, nearest(2, 3)},
		{"nearest 3/4 and 5/6", &nn.Resizing{LayerName: "r", Height: 3, Width: 5, Interpolation: "nearest"}, tensor.Shape{1, 3, 5, 1}, nearest(3, 5)},
		// crop to 1:1: the centred 4x4 box (columns 1 to 4), then 4x4 -> 2x2
		// bilinear with half-pixel centres reads positions 0.5 and 2.5: the
		// mean of each 2x2 block
		{"crop to aspect ratio", &nn.Resizing{LayerName: "r", Height: 2, Width: 2, CropToAspectRatio: true}, tensor.Shape{1, 2, 2, 1},
			[]float64{(1 + 2 + 7 + 8) / 4.0, (3 + 4 + 9 + 10) / 4.0, (13 + 14 + 19 + 20) / 4.0, (15 + 16 + 21 + 22) / 4.0}},
		// pad to 4:6 -> 6x6 rows: one row of 9 above and below, then the same size
		{"pad to aspect ratio", &nn.Resizing{LayerName: "r", Height: 6, Width: 6, PadToAspectRatio: true, FillValue: 9}, tensor.Shape{1, 6, 6, 1},
			append(append([]float64{9, 9, 9, 9, 9, 9}, im.v...), 9, 9, 9, 9, 9, 9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, shape := runVisionLayer(t, tc.layer, im.shape(), im.v, false, nil)
			if !shape.Equal(tc.shape) {
				t.Fatalf("shape %v, want %v", shape, tc.shape)
			}
			nearAll(t, got, tc.want, 1e-12)
		})
	}
}

// The geometric random layers pass gradients to their input: in training
// each is a linear map of it (ImageTransform's gradient), checked by
// central differences; LayerScale learns gamma; ScaledAdd, Math and
// Reduce have their gradients too.
func TestNewLayerGradients(t *testing.T) {
	img := []layerIn{{name: "x", shape: tensor.Shape{2, 4, 5, 2}}}
	two := []layerIn{{name: "a", shape: tensor.Shape{2, 3}}, {name: "b", shape: tensor.Shape{2, 3}}}
	half, three := 0.5, 3.0
	for _, tc := range []struct {
		name     string
		layer    any
		ins      []layerIn
		training bool
	}{
		{"rotation", &nn.RandomRotation{LayerName: "r", Factor: nn.Factor{Lower: -0.3, Upper: 0.3}}, img, true},
		{"zoom", &nn.RandomZoom{LayerName: "z", HeightFactor: nn.Factor{Lower: -0.4, Upper: 0.3}, Resampling: nn.Resampling{FillMode: "wrap"}}, img, true},
		{"translation", &nn.RandomTranslation{LayerName: "t", HeightFactor: nn.Factor{Lower: -0.3, Upper: 0.3}, WidthFactor: nn.Factor{Lower: -0.2, Upper: 0.4}}, img, true},
		{"flip", &nn.RandomFlip{LayerName: "f"}, img, true},
		{"resizing", &nn.Resizing{LayerName: "r", Height: 3, Width: 7}, img, false},
		{"resizing nearest", &nn.Resizing{LayerName: "r", Height: 3, Width: 7, Interpolation: "nearest"}, img, false},
		{"layer scale", &nn.LayerScale{LayerName: "s", InitValues: 1e-6}, img, false},
		{"scaled add", &nn.ScaledAdd{LayerName: "s", Scale: 0.17}, two, false},
		{"math add constant", &nn.Math{LayerName: "m", Fn: "add", Operands: []*float64{&three, nil}}, two[:1], false},
		{"math divide", &nn.Math{LayerName: "m", Fn: "divide"}, two, false},
		{"math power", &nn.Math{LayerName: "m", Fn: "power", Operands: []*float64{nil, &three}}, two[:1], false},
		{"math gelu", &nn.Math{LayerName: "m", Fn: "gelu_approximate"}, two[:1], false},
		{"math clip", &nn.Math{LayerName: "m", Fn: "clip", Operands: []*float64{nil, &half, &three}}, two[:1], false},
		{"reduce mean", &nn.Reduce{LayerName: "r", Fn: "mean", Axes: []int{1, 2}, KeepDims: true}, img, false},
		{"reduce min", &nn.Reduce{LayerName: "r", Fn: "min", Axes: []int{-1}}, img, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runLayer(t, tc.layer, tc.ins, tensor.Float64, 5, tc.training).checkGrads()
		})
	}
}

// Math computes each operation of keras.ops on its inputs and constants,
// broadcasting as NumPy; Reduce each reduction.
func TestMathAndReduce(t *testing.T) {
	x := []float64{-2, -0.5, 0, 1, 2.5, 4}
	three, six := 3.0, 1/6.0
	for _, tc := range []struct {
		name  string
		layer any
		f     func(v float64) float64
	}{
		{"x + 3", &nn.Math{LayerName: "m", Fn: "add", Operands: []*float64{nil, &three}}, func(v float64) float64 { return v + 3 }},
		{"3 - x", &nn.Math{LayerName: "m", Fn: "subtract", Operands: []*float64{&three, nil}}, func(v float64) float64 { return 3 - v }},
		{"x * 1/6", &nn.Math{LayerName: "m", Fn: "multiply", Operands: []*float64{nil, &six}}, func(v float64) float64 { return v / 6 }},
		{"maximum(x, 3)", &nn.Math{LayerName: "m", Fn: "maximum", Operands: []*float64{nil, &three}}, func(v float64) float64 { return max(v, 3) }},
		{"x ** 3", &nn.Math{LayerName: "m", Fn: "power", Operands: []*float64{nil, &three}}, func(v float64) float64 { return v * v * v }},
		{"negative", &nn.Math{LayerName: "m", Fn: "negative"}, func(v float64) float64 { return -v }},
		{"absolute", &nn.Math{LayerName: "m", Fn: "absolute"}, math.Abs},
		{"square", &nn.Math{LayerName: "m", Fn: "square"}, func(v float64) float64 { return v * v }},
		{"erf", &nn.Math{LayerName: "m", Fn: "erf"}, math.Erf},
		{"gelu tanh", &nn.Math{LayerName: "m", Fn: "gelu_approximate"}, func(v float64) float64 {
			return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runLayer(t, tc.layer, []layerIn{{name: "x", shape: tensor.Shape{2, 3}}}, tensor.Float64, 1, false)
			r.set("x", x)
			r.run()
			want := make([]float64, len(x))
			for i, v := range x {
				want[i] = tc.f(v)
			}
			nearAll(t, r.get("out0"), want, 1e-14)
		})
	}
	t.Run("reduce", func(t *testing.T) {
		// x [2, 3, 2]: max over axis 1 keeping it, min over the last
		v := []float64{1, 6, 3, 2, 5, 4, -1, -6, -3, -2, -5, -4}
		r := runLayer(t, &nn.Reduce{LayerName: "r", Fn: "max", Axes: []int{1}, KeepDims: true}, []layerIn{{name: "x", shape: tensor.Shape{2, 3, 2}}}, tensor.Float64, 1, false)
		r.set("x", v)
		r.run()
		nearAll(t, r.get("out0"), []float64{5, 6, -1, -2}, 0)
		r = runLayer(t, &nn.Reduce{LayerName: "r", Fn: "min", Axes: []int{-1}}, []layerIn{{name: "x", shape: tensor.Shape{2, 3, 2}}}, tensor.Float64, 1, false)
		r.set("x", v)
		r.run()
		nearAll(t, r.get("out0"), []float64{1, 2, 4, -6, -3, -5}, 0)
	})
}

// Dropout with a noise shape (0, 1, 1, 1) keeps or drops each example
// whole (EfficientNet's blocks; ConvNeXt's StochasticDepth); the global
// poolings keep their axes with KeepDims; Rescaling scales each channel by
// its own value.
func TestDropoutNoiseShapeKeepDimsRescaling(t *testing.T) {
	const n = 40
	ones := newImage(n, 2, 3, 2, func(int) float64 { return 1 })
	got, _ := runVisionLayer(t, &nn.Dropout{LayerName: "d", Rate: 0.5, NoiseShape: []int{0, 1, 1, 1}}, ones.shape(), ones.v, true, nil)
	kept := 0
	for b := 0; b < n; b++ {
		first := got[b*12]
		if first != 0 && first != 2 {
			t.Fatalf("example %d: got %v, want 0 or 2", b, first)
		}
		for i := 1; i < 12; i++ {
			if got[b*12+i] != first {
				t.Fatalf("example %d is not kept or dropped whole: %v", b, got[b*12:b*12+12])
			}
		}
		if first == 2 {
			kept++
		}
	}
	if kept == 0 || kept == n {
		t.Errorf("%d of %d examples kept at rate 0.5", kept, n)
	}
	im := newImage(1, 2, 2, 2, func(i int) float64 { return float64(i) })
	got, shape := runVisionLayer(t, &nn.GlobalAveragePooling2D{LayerName: "g", KeepDims: true}, im.shape(), im.v, false, nil)
	if !shape.Equal(tensor.Shape{1, 1, 1, 2}) {
		t.Fatalf("GlobalAveragePooling2D keepdims shape %v", shape)
	}
	nearAll(t, got, []float64{3, 4}, 0)
	got, shape = runVisionLayer(t, &nn.GlobalPooling1D{LayerName: "g", Max: true, KeepDims: true}, tensor.Shape{1, 4, 2}, im.v, false, nil)
	if !shape.Equal(tensor.Shape{1, 1, 2}) {
		t.Fatalf("GlobalPooling1D keepdims shape %v", shape)
	}
	nearAll(t, got, []float64{6, 7}, 0)
	got, _ = runVisionLayer(t, &nn.Rescaling{LayerName: "r", Scales: []float64{2, -1}, Offsets: []float64{1, 0.5}}, im.shape(), im.v, false, nil)
	nearAll(t, got, []float64{1, -0.5, 5, -2.5, 9, -4.5, 13, -6.5}, 0)
}

// A random layer's draws are a function of (seed, layer, step), as
// Dropout's: the same step draws the same, so a resumed run repeats it.
func TestRandomLayersRepeat(t *testing.T) {
	im := newImage(4, 5, 5, 1, func(i int) float64 { return float64(i % 7) })
	l := &nn.RandomZoom{LayerName: "z", HeightFactor: nn.Factor{Lower: -0.3, Upper: 0.3}}
	a, _ := runVisionLayer(t, l, im.shape(), im.v, true, nil)
	b, _ := runVisionLayer(t, l, im.shape(), im.v, true, nil)
	nearAll(t, a, b, 0)
}
