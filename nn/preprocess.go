package nn

import (
	"math"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Keras' image preprocessing layers, as models save them (Keras 3's
// keras.layers; tf.keras 2's keras.layers.experimental.preprocessing):
// Resizing, which works in training and inference alike, and the random
// augmentations RandomFlip, RandomRotation, RandomZoom, RandomTranslation
// and RandomContrast, which change each training example by draws of its
// own and are the identity in inference, as in Keras. Their draws are
// graph.RandomUniform, a function of (the model's seed, the layer's name,
// the step) as Dropout's masks, so a resumed run draws the same; Keras'
// seed argument is not read. The geometric ones resample each image with
// graph.ImageTransform (TensorFlow's ImageProjectiveTransformV3, which
// Keras' affine_transform calls) at the matrix Keras computes for the
// draw.

// Resizing resizes NHWC images to Height×Width (Keras' Resizing): bilinear
// (Interpolation "" or "bilinear") as tf.image.resize with half-pixel
// centres and no antialiasing (graph.ResizeBilinear), or "nearest" (input
// cell ⌊(o + 0.5)·in/out⌋, as tf.image.resize's nearest). With
// CropToAspectRatio the largest centred box of the target's aspect ratio
// is cropped first; with PadToAspectRatio the image is padded (FillValue)
// to that ratio first, as Keras' resize computes both.
type Resizing struct {
	LayerName                           string
	Height, Width                       int
	Interpolation                       string
	CropToAspectRatio, PadToAspectRatio bool
	FillValue                           float64
}

func (l *Resizing) Name() string { return l.LayerName }

func (l *Resizing) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpResizeBilinear, l.LayerName, "Resizing", x)
	if l.Height <= 0 || l.Width <= 0 {
		throwf(graph.OpResizeBilinear, l.LayerName, "Resizing to %dx%d", l.Height, l.Width)
	}
	s := x.Shape()
	h, w := s[1], s[2]
	switch {
	case l.CropToAspectRatio && l.PadToAspectRatio:
		throwf(graph.OpResizeBilinear, l.LayerName, "Resizing crops or pads to the aspect ratio, not both")
	case l.CropToAspectRatio: // keras/src/backend/tensorflow/image.py: resize
		ch := min(max(int(float32(w*l.Height)/float32(l.Width)), 1), h)
		cw := min(max(int(float32(h*l.Width)/float32(l.Height)), 1), w)
		top, left := int(float32(h-ch)/2), int(float32(w-cw)/2)
		if ch != h || cw != w {
			x = graph.Slice(x, []int{0, top, left, 0}, []int{s[0], top + ch, left + cw, s[3]})
		}
	case l.PadToAspectRatio:
		ph := max(int(float32(w*l.Height)/float32(l.Width)), h)
		pw := max(int(float32(h*l.Width)/float32(l.Height)), w)
		top, left := int(float32(ph-h)/2), int(float32(pw-w)/2)
		if top > 0 || left > 0 { // Keras pads top rows (or left columns) on both sides
			x = graph.AddScalar(graph.Pad(graph.AddScalar(x, -l.FillValue), []int{0, top, left, 0}, []int{0, top, left, 0}), l.FillValue)
		}
	}
	switch l.Interpolation {
	case "", "bilinear":
		if x.Shape()[1] == l.Height && x.Shape()[2] == l.Width {
			return x // half-pixel centres read every cell where it is
		}
		return graph.ResizeBilinear(x, l.Height, l.Width)
	case "nearest":
		return resizeNearest(x, l.Height, l.Width)
	}
	throwf(graph.OpResizeBilinear, l.LayerName, "Resizing interpolation %q: want bilinear or nearest", l.Interpolation)
	return nil
}

// resizeNearest resizes x [N, H, W, C] to [N, oh, ow, C] reading input
// cell ⌊(o + 0.5)·H/oh⌋ (clamped) of each axis: a broadcast for an
// integer factor up, else a gather along each axis that changes.
func resizeNearest(x *graph.Node, oh, ow int) *graph.Node {
	s := x.Shape()
	if oh%s[1] == 0 && ow%s[2] == 0 {
		if oh == s[1] && ow == s[2] {
			return x
		}
		return graph.UpSampleNearest(x, [2]int{oh / s[1], ow / s[2]})
	}
	for axis, out := range map[int]int{1: oh, 2: ow} {
		in := x.Shape()[axis]
		if in == out {
			continue
		}
		idx := tensor.New(tensor.Int32, tensor.Shape{out})
		for o := range out {
			idx.SetFloat64At(o, float64(min(int(math.Floor((float64(o)+0.5)*float64(in)/float64(out))), in-1)))
		}
		// move axis first, gather its rows, move it back
		perm := []int{axis, 0, 3 - axis, 3}
		if axis == 2 {
			perm = []int{2, 0, 1, 3}
		}
		t := graph.Transpose(x, perm...)
		ts := t.Shape()
		rows := graph.Gather(graph.Reshape(t, ts[0], ts[1]*ts[2]*ts[3]), x.Graph().Constant(idx))
		t = graph.Reshape(rows, out, ts[1], ts[2], ts[3])
		inv := make([]int, 4)
		for i, p := range perm {
			inv[p] = i
		}
		x = graph.Transpose(t, inv...)
	}
	return x
}

// Factor is a range [Lower, Upper] a random layer draws from uniformly.
type Factor struct{ Lower, Upper float64 }

// uniform returns draws uniform in [f.Lower, f.Upper) of shape and x's
// dtype, from the stream named by layer and what.
func (f Factor) uniform(c *Context, x *graph.Node, layer, what string, shape tensor.Shape) *graph.Node {
	u := graph.RandomUniform(c.StepNode(), shape, x.DType(), c.Seed^hashName(layer+"/"+what))
	if f.Upper == f.Lower {
		return graph.AddScalar(graph.MulScalar(u, 0), f.Lower)
	}
	return graph.AddScalar(graph.MulScalar(u, f.Upper-f.Lower), f.Lower)
}

// RandomFlip flips each training image (NHWC) with probability 1/2:
// Mode "horizontal" mirrors its columns, "vertical" its rows, and
// "horizontal_and_vertical" (the default, "") both on one draw, as Keras
// 3; with Independent, on a draw each, as tf.keras 2.
type RandomFlip struct {
	LayerName   string
	Mode        string
	Independent bool
}

func (l *RandomFlip) Name() string { return l.LayerName }

func (l *RandomFlip) Forward(c *Context, x *graph.Node) *graph.Node {
	if !c.Training {
		return x
	}
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpImageTransform, l.LayerName, "RandomFlip", x)
	s := x.Shape()
	w, h := float64(s[2]-1), float64(s[1]-1)
	// each image's flip as a transform: Keras flips where a draw <= 0.5
	flips := func(what string) *graph.Node {
		u := graph.RandomUniform(c.StepNode(), tensor.Shape{s[0], 1}, x.DType(), c.Seed^hashName(l.LayerName+"/"+what))
		return graph.LessEqual(u, graph.ScalarLike(u, 0.5))
	}
	pick := func(cond *graph.Node, flipped, kept []float64) *graph.Node {
		return graph.Where(cond, rowConstant(c, x, flipped), rowConstant(c, x, kept))
	}
	identity := []float64{1, 0, 0, 0, 1, 0, 0, 0}
	var t *graph.Node
	switch l.Mode {
	case "horizontal":
		t = pick(flips("flip"), []float64{-1, 0, w, 0, 1, 0, 0, 0}, identity)
	case "vertical":
		t = pick(flips("flip"), []float64{1, 0, 0, 0, -1, h, 0, 0}, identity)
	case "", "horizontal_and_vertical":
		if !l.Independent {
			t = pick(flips("flip"), []float64{-1, 0, w, 0, -1, h, 0, 0}, identity)
			break
		}
		t = graph.Add(pick(flips("flip_horizontal"), []float64{-1, 0, w, 0, 0, 0, 0, 0}, []float64{1, 0, 0, 0, 0, 0, 0, 0}),
			pick(flips("flip_vertical"), []float64{0, 0, 0, 0, -1, h, 0, 0}, []float64{0, 0, 0, 0, 1, 0, 0, 0}))
	default:
		throwf(graph.OpImageTransform, l.LayerName, "RandomFlip mode %q: want horizontal, vertical or horizontal_and_vertical", l.Mode)
	}
	// every point read is a pixel: nearest interpolation copies it
	return graph.ImageTransform(x, t, graph.ImageTransformOptions{Fill: graph.FillReflect})
}

// rowConstant returns v as a [1, len(v)] constant of x's dtype.
func rowConstant(c *Context, x *graph.Node, v []float64) *graph.Node {
	t := tensor.New(x.DType(), tensor.Shape{1, len(v)})
	for i, f := range v {
		t.SetFloat64At(i, f)
	}
	return c.G.Constant(t)
}

// Resampling is how the geometric random layers read the image at the
// points their transform gives: bilinear (Interpolation "" or "bilinear")
// or "nearest"; FillMode "reflect" (the default, ""), "wrap", "constant"
// (FillValue) or "nearest" for points outside it.
type Resampling struct {
	Interpolation, FillMode string
	FillValue               float64
}

func (r Resampling) options(layer string) graph.ImageTransformOptions {
	o := graph.ImageTransformOptions{Bilinear: r.Interpolation == "" || r.Interpolation == "bilinear", FillValue: r.FillValue}
	if r.Interpolation != "" && r.Interpolation != "bilinear" && r.Interpolation != "nearest" {
		throwf(graph.OpImageTransform, layer, "interpolation %q: want bilinear or nearest", r.Interpolation)
	}
	switch r.FillMode {
	case "", "reflect":
		o.Fill = graph.FillReflect
	case "wrap":
		o.Fill = graph.FillWrap
	case "constant":
		o.Fill = graph.FillConstant
	case "nearest":
		o.Fill = graph.FillNearest
	default:
		throwf(graph.OpImageTransform, layer, "fill mode %q: want reflect, wrap, constant or nearest", r.FillMode)
	}
	return o
}

// affineRows builds the [N, 8] transforms [a0, a1, a2, b0, b1, b2, 0, 0]
// from columns [N, 1] (nil for zero) like like.
func affineRows(like *graph.Node, cols ...*graph.Node) *graph.Node {
	zero := graph.MulScalar(like, 0)
	parts := make([]*graph.Node, 8)
	for i := range parts {
		parts[i] = zero
		if i < len(cols) && cols[i] != nil {
			parts[i] = cols[i]
		}
	}
	return graph.Concat(1, parts...)
}

// RandomRotation rotates each training image (NHWC) about its centre by an
// angle drawn uniformly from Factor (fractions of a full turn, each in
// [-1, 1]; Keras' factor f alone is [-f, f]), counter-clockwise for a
// positive one, with Keras' matrix (its _compute_affine_matrix: the centre
// at ((W-1)/2, (H-1)/2)).
type RandomRotation struct {
	LayerName string
	Factor    Factor
	Resampling
}

func (l *RandomRotation) Name() string { return l.LayerName }

func (l *RandomRotation) Forward(c *Context, x *graph.Node) *graph.Node {
	if !c.Training {
		return x
	}
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpImageTransform, l.LayerName, "RandomRotation", x)
	if l.Factor.Lower < -1 || l.Factor.Upper > 1 || l.Factor.Lower > l.Factor.Upper {
		throwf(graph.OpImageTransform, l.LayerName, "RandomRotation factor %v: want -1 <= lower <= upper <= 1", l.Factor)
	}
	o := l.options(l.LayerName)
	s := x.Shape()
	turn := Factor{2 * math.Pi * l.Factor.Lower, 2 * math.Pi * l.Factor.Upper}
	angle := turn.uniform(c, x, l.LayerName, "angle", tensor.Shape{s[0], 1})
	sin, cos := sinCos(angle)
	cx, cy := float64(s[2]-1)/2, float64(s[1]-1)/2
	// a0 = cos, a1 = -sin, a2 = cx - cx·a0 - cy·a1; b0 = sin, b1 = cos, b2 = cy - cx·b0 - cy·b1
	a2 := graph.AddScalar(graph.Add(graph.MulScalar(cos, -cx), graph.MulScalar(sin, cy)), cx)
	b2 := graph.AddScalar(graph.Sub(graph.MulScalar(sin, -cx), graph.MulScalar(cos, cy)), cy)
	return graph.ImageTransform(x, affineRows(angle, cos, graph.Neg(sin), a2, sin, cos, b2), o)
}

// sinCos returns sin θ and cos θ for angles θ with |θ| <= 2π (a full turn
// either way), composed of elementwise ops (graph has no trigonometric
// op, and a layer draws one angle per image): the Taylor series of a =
// θ/4 to degree 15 and 14 in Horner form (|a| <= π/2: error below 1e-11),
// then doubled twice (sin 2a = 2·sin a·cos a, cos 2a = 1 - 2·sin² a).
func sinCos(theta *graph.Node) (sin, cos *graph.Node) {
	a := graph.MulScalar(theta, 0.25)
	a2 := graph.Mul(a, a)
	one := graph.ScalarLike(a, 1)
	// sin a = a·(1 - a²/(2·3)·(1 - a²/(4·5)·(... (1 - a²/(14·15)))))
	s, co := one, one
	for k := 7; k >= 1; k-- {
		s = graph.Sub(one, graph.Mul(graph.MulScalar(a2, 1/float64((2*k)*(2*k+1))), s))
		co = graph.Sub(one, graph.Mul(graph.MulScalar(a2, 1/float64((2*k-1)*(2*k))), co))
	}
	sin, cos = graph.Mul(a, s), co
	for range 2 {
		sin, cos = graph.MulScalar(graph.Mul(sin, cos), 2), graph.Sub(one, graph.MulScalar(graph.Mul(sin, sin), 2))
	}
	return sin, cos
}

// RandomZoom zooms each training image (NHWC) about its centre: its height
// by 1 + a draw from HeightFactor and its width by 1 + a draw from
// WidthFactor (nil: the height's draw), each factor in (-1, 1]; a
// positive one zooms out (the image shrinks), as Keras' (its
// _get_zoom_matrix).
type RandomZoom struct {
	LayerName    string
	HeightFactor Factor
	WidthFactor  *Factor
	Resampling
}

func (l *RandomZoom) Name() string { return l.LayerName }

func (l *RandomZoom) Forward(c *Context, x *graph.Node) *graph.Node {
	if !c.Training {
		return x
	}
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpImageTransform, l.LayerName, "RandomZoom", x)
	o := l.options(l.LayerName)
	s := x.Shape()
	shape := tensor.Shape{s[0], 1}
	zy := Factor{1 + l.HeightFactor.Lower, 1 + l.HeightFactor.Upper}.uniform(c, x, l.LayerName, "height", shape)
	zx := zy
	if l.WidthFactor != nil {
		zx = Factor{1 + l.WidthFactor.Lower, 1 + l.WidthFactor.Upper}.uniform(c, x, l.LayerName, "width", shape)
	}
	// x_offset = (W-1)/2·(1 - zx), y_offset = (H-1)/2·(1 - zy)
	ox := graph.AddScalar(graph.MulScalar(zx, -float64(s[2]-1)/2), float64(s[2]-1)/2)
	oy := graph.AddScalar(graph.MulScalar(zy, -float64(s[1]-1)/2), float64(s[1]-1)/2)
	return graph.ImageTransform(x, affineRows(zy, zx, nil, ox, nil, zy, oy), o)
}

// RandomTranslation shifts each training image (NHWC) by a draw from
// HeightFactor times its height (rows) and one from WidthFactor times its
// width (columns), each factor in [-1, 1], as Keras' (its
// _get_translation_matrix).
type RandomTranslation struct {
	LayerName                 string
	HeightFactor, WidthFactor Factor
	Resampling
}

func (l *RandomTranslation) Name() string { return l.LayerName }

func (l *RandomTranslation) Forward(c *Context, x *graph.Node) *graph.Node {
	if !c.Training {
		return x
	}
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpImageTransform, l.LayerName, "RandomTranslation", x)
	o := l.options(l.LayerName)
	s := x.Shape()
	shape := tensor.Shape{s[0], 1}
	ty := graph.MulScalar(l.HeightFactor.uniform(c, x, l.LayerName, "height", shape), -float64(s[1]))
	tx := graph.MulScalar(l.WidthFactor.uniform(c, x, l.LayerName, "width", shape), -float64(s[2]))
	one := graph.AddScalar(graph.MulScalar(tx, 0), 1)
	return graph.ImageTransform(x, affineRows(tx, one, nil, tx, nil, one, ty), o)
}

// RandomContrast scales each training image's (NHWC) deviation from its
// mean (per channel, over height and width) by a factor drawn from
// [1 - Factor.Lower, 1 + Factor.Upper], then clips it to ValueRange (zero:
// Keras' default [0, 255]), as Keras': (x - mean)·f + mean.
type RandomContrast struct {
	LayerName  string
	Factor     Factor
	ValueRange [2]float64
}

func (l *RandomContrast) Name() string { return l.LayerName }

func (l *RandomContrast) Forward(c *Context, x *graph.Node) *graph.Node {
	if !c.Training {
		return x
	}
	defer scoped(c, l.LayerName)()
	needNHWC(graph.OpReduceMean, l.LayerName, "RandomContrast", x)
	lo, hi := l.ValueRange[0], l.ValueRange[1]
	if lo == 0 && hi == 0 {
		hi = 255
	}
	f := Factor{1 - l.Factor.Lower, 1 + l.Factor.Upper}.uniform(c, x, l.LayerName, "contrast", tensor.Shape{x.Shape()[0], 1, 1, 1})
	mean := graph.ReduceMeanKeep(x, 1, 2)
	y := graph.Add(graph.Mul(graph.Sub(x, mean), f), mean)
	return graph.Minimum(graph.Maximum(y, graph.ScalarLike(y, lo)), graph.ScalarLike(y, hi))
}

// Serializable (serialize.go).
var (
	_ = RegisterLayer("RandomContrast", &RandomContrast{})
	_ = RegisterLayer("RandomFlip", &RandomFlip{})
	_ = RegisterLayer("RandomRotation", &RandomRotation{})
	_ = RegisterLayer("RandomTranslation", &RandomTranslation{})
	_ = RegisterLayer("RandomZoom", &RandomZoom{})
	_ = RegisterLayer("Resizing", &Resizing{})
)
