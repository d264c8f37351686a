package kernels

import "fmt"

// ConvAlgo names how a float32 convolution (or one of its gradients) runs.
// Every algorithm computes the same sums within float32 rounding, but not
// in the same order: the direct tiles sum each output's taps, and per tap
// its channels, in order; im2col's products block the taps and channels
// together. A run that must give the same bits as another must run the
// same algorithms (the CPU backend's choice cache pins them).
type ConvAlgo uint8

const (
	// ConvAuto is the built-in rule: the direct tiles wherever they apply
	// (for the filter gradient, past 16 input channels only on outputs of
	// at most 14x14 positions, a threshold measured on a Zen 4).
	ConvAuto ConvAlgo = iota
	// ConvDirect is the direct register tiles (vision_direct.go).
	ConvDirect
	// ConvIm2col lowers windows to rows and multiplies them as one packed
	// product (jobs.go; conv.go's chunks in float64).
	ConvIm2col
	// ConvWinograd is F(2×2, 3×3) (winograd.go), for 3×3 windows at
	// stride 1: 2.25 times fewer multiply-adds, a little more rounding.
	ConvWinograd
	// ConvWinograd4 is F(4×4, 3×3) (winograd.go), where F(2×2, 3×3)
	// runs: 4 times fewer multiply-adds than the direct sum, and 3 to 9
	// times its largest rounding error (docs/kernels.md).
	ConvWinograd4
)

var convAlgoNames = [...]string{ConvAuto: "auto", ConvDirect: "direct", ConvIm2col: "im2col", ConvWinograd: "winograd", ConvWinograd4: "winograd4"}

func (a ConvAlgo) String() string {
	if int(a) < len(convAlgoNames) {
		return convAlgoNames[a]
	}
	return fmt.Sprintf("ConvAlgo(%d)", a)
}

// IsWinograd reports whether a is one of Winograd's forms.
func (a ConvAlgo) IsWinograd() bool { return a == ConvWinograd || a == ConvWinograd4 }

// winogradTile is a Winograd form's outputs a tile across (m of F(m×m,
// 3×3)).
func (a ConvAlgo) winogradTile() int {
	if a == ConvWinograd4 {
		return 4
	}
	return 2
}

// ParseConvAlgo parses a ConvAlgo's name ("auto", "direct", "im2col",
// "winograd", "winograd4").
func ParseConvAlgo(s string) (ConvAlgo, error) {
	for a, n := range convAlgoNames {
		if n == s {
			return ConvAlgo(a), nil
		}
	}
	return 0, fmt.Errorf("unknown convolution algorithm %q (want auto, direct, im2col, winograd or winograd4)", s)
}

// ConvKind is one of a convolution's three products.
type ConvKind uint8

const (
	ConvForward    ConvKind = iota // Conv2D: y from x and the filter
	ConvInputGrad                  // Conv2DBackpropInput: dx from dy and the filter
	ConvFilterGrad                 // Conv2DBackpropFilter: dfilter from x and dy
)

var convKindNames = [...]string{ConvForward: "conv2d", ConvInputGrad: "conv2d_input_grad", ConvFilterGrad: "conv2d_filter_grad"}

func (k ConvKind) String() string {
	if int(k) < len(convKindNames) {
		return convKindNames[k]
	}
	return fmt.Sprintf("ConvKind(%d)", k)
}

// ConvAlgos returns the algorithms that can run a float32 convolution
// product of kind with geometry g and f filters, its products in float32
// (not bfloat16): ConvDirect where the direct tiles can take it (for the
// filter gradient of an input whose channels are not a multiple of 4, a
// stem's, the stem tiles: vision_stem.go),
// ConvIm2col, and ConvWinograd and ConvWinograd4 for a 3×3 window at
// stride 1 (WinogradOK).
// Dilated and grouped convolutions have one path of their own (nil).
func ConvAlgos(kind ConvKind, g ConvGeom, f int) []ConvAlgo {
	if g.General() {
		return nil
	}
	direct := false
	switch kind {
	case ConvForward:
		direct = directConvOK(g, f)
	case ConvInputGrad:
		_, direct = directInputGeom(g, f)
	case ConvFilterGrad:
		direct = directFilterCan(g, f) || stemFilterCan(g, f)
	}
	algos := []ConvAlgo{ConvIm2col}
	if direct {
		algos = []ConvAlgo{ConvDirect, ConvIm2col}
	}
	if _, _, ok := gemmSetup(f, false); ok && f > 0 && WinogradOK(g) {
		algos = append(algos, ConvWinograd, ConvWinograd4)
	}
	return algos
}

// ConvRule returns the algorithm ConvAuto runs for kind, g and f: what
// the built-in rule picks.
//
// The rule never picks Winograd, whose rounding differs most. It gives a
// stem's filter gradient to the stem tiles: im2col's product there has
// [K, rows]·[rows, f] with K and f a few dozen at most, a shape that
// packing cannot feed on any CPU (7 times slower on the ResNet-20's stem).
func ConvRule(kind ConvKind, g ConvGeom, f int) ConvAlgo {
	algos := ConvAlgos(kind, g, f)
	if len(algos) == 0 || algos[0] != ConvDirect || (kind == ConvFilterGrad && !directFilterOK(g, f) && !stemFilterCan(g, f)) {
		return ConvIm2col
	}
	return ConvDirect
}

// ConvOn runs the float32 convolution product kind with algorithm algo on
// pool p, as Conv2DOn, Conv2DBackpropInputOn or Conv2DBackpropFilterOn do
// (dst; a, b: x and the filter, dy and the filter, or x and dy), and
// returns dst. An algorithm ConvAlgos does not offer for the geometry runs
// as ConvAuto.
func ConvOn(p *Pool, kind ConvKind, algo ConvAlgo, dst, a, b, work []float32, g ConvGeom, f int) []float32 {
	if algo.IsWinograd() {
		if winograd(p, kind, dst, a, b, work, g, f, algo.winogradTile()) {
			return dst
		}
		algo = ConvAuto
	}
	switch kind {
	case ConvInputGrad:
		return conv2DInput(p, "Conv2DBackpropInput", dst, a, b, work, g, f, MatMulOn[float32], false, algo)
	case ConvFilterGrad:
		return conv2DFilter(p, "Conv2DBackpropFilter", dst, a, b, work, g, f, MatMulOn[float32], false, algo)
	default:
		return conv2D(p, "Conv2D", dst, a, b, work, g, f, MatMulOn[float32], false, algo)
	}
}

// ConvMomentsOn runs the float32 forward convolution y = conv(x, filter)
// with algorithm algo as ConvOn does, and sets mom [2, f] to the mean
// and biased variance of each of y's channels as MomentsOn does over y's
// rows in groups of MomentsBlock(N·OH·OW, OH·OW), with the same bits: a
// BatchNormalization's statistics of the convolution's output. Where the
// product writes whole images at a time (Winograd's chunks of tiles), a
// group's sums are taken as soon as a chunk has written it, while it is in
// the cache, instead of in a second pass over y. mwork holds
// MomentsWork(N·OH·OW, f, block) float64s. It returns y.
func ConvMomentsOn(p *Pool, algo ConvAlgo, y, x, filter, work []float32, g ConvGeom, f int, mom []float32, mwork []float64) []float32 {
	const fn = "ConvMoments"
	rows := g.N * g.OH * g.OW
	block := MomentsBlock(rows, g.OH*g.OW)
	checkMoments(fn, len(mom), len(y), rows, f, block, len(mwork))
	done := wgSummed{}
	if algo.IsWinograd() {
		k, s := block/(g.OH*g.OW), newWgShape(ConvForward, g, f, algo.winogradTile())
		ran, chunk := winogradMoments(p, ConvForward, y, x, filter, work, g, f, algo.winogradTile(), mwork, k)
		if !ran {
			ConvOn(p, ConvForward, algo, y, x, filter, work, g, f)
		}
		done = wgSummed{chunk: chunk, k: k, n: g.N, img: s.th * s.tw}
	} else {
		ConvOn(p, ConvForward, algo, y, x, filter, work, g, f)
	}
	moments(p, mom, y, rows, f, block, mwork, done)
	return y
}
