package nn

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// BatchNormalization normalizes over every axis but the last (the
// channels; Axis, when set, names another one: Keras' axis, counting the
// batch as 0, so 1 is the height of NHWC input and -1 the last), with a
// learned scale (gamma) and shift (beta); NoScale and
// NoCenter drop them (Keras' scale=False, center=False: no gamma, no beta
// weight). In training it normalizes with the batch's mean and biased
// variance (one Moments op) and updates the moving statistics; in
// inference it uses those. Either way the normalization is
// x·scale + (beta - mean·scale), scale = gamma/√(variance + epsilon), as
// tf.nn.batch_normalization computes it: per-channel vectors and one
// elementwise pass over x, which the fusion pass joins to a following
// activation or residual sum.
type BatchNormalization struct {
	LayerName string
	Momentum  float64 // zero: 0.99
	Epsilon   float64 // zero: 1e-3
	NoScale   bool    // Keras' scale=False: no gamma
	NoCenter  bool    // Keras' center=False: no beta
	Axis      int     // zero: the last
}

func (b *BatchNormalization) Name() string { return b.LayerName }

func (b *BatchNormalization) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, b.LayerName)()
	mom, eps := or(b.Momentum, 0.99), or(b.Epsilon, 1e-3)
	r := x.Shape().Rank()
	axis := r - 1
	if b.Axis != 0 {
		if axis = axisOf(b.Axis, r); axis < 1 || axis >= r {
			throwf(graph.OpMoments, b.LayerName, "BatchNormalization over axis %d of input %v: the batch or outside it", b.Axis, x.Shape())
		}
	}
	n := x.Shape()[axis]
	ch := tensor.Shape{n}
	var gamma, beta *graph.Node
	if !b.NoScale {
		gamma = c.Weight(b.LayerName+"/gamma", ch, Constant{1}, true)
	}
	if !b.NoCenter {
		beta = c.Weight(b.LayerName+"/beta", ch, Constant{0}, true)
	}
	mm := c.Weight(b.LayerName+"/moving_mean", ch, Constant{0}, false)
	mv := c.Weight(b.LayerName+"/moving_variance", ch, Constant{1}, false)
	mean, variance := mm, mv
	if c.Training {
		xc := x // the normalized axis last, for Moments
		if axis != r-1 {
			perm := make([]int, 0, r)
			for i := range r {
				if i != axis {
					perm = append(perm, i)
				}
			}
			xc = graph.Transpose(x, append(perm, axis)...)
		}
		m := graph.Moments(xc) // [2, C]: mean, variance
		mean = graph.Reshape(graph.Slice(m, []int{0, 0}, []int{1, n}), n)
		variance = graph.Reshape(graph.Slice(m, []int{1, 0}, []int{2, n}), n)
		c.Updates = append(c.Updates,
			[2]*graph.Node{mm, graph.Add(graph.MulScalar(mm, mom), graph.MulScalar(mean, 1-mom))},
			[2]*graph.Node{mv, graph.Add(graph.MulScalar(mv, mom), graph.MulScalar(variance, 1-mom))})
	}
	std := graph.Sqrt(graph.AddScalar(variance, eps))
	var scale *graph.Node
	if gamma != nil {
		scale = graph.Div(gamma, std)
	} else {
		scale = graph.Div(graph.ScalarLike(std, 1), std)
	}
	shift := graph.Neg(graph.Mul(mean, scale))
	if beta != nil {
		shift = graph.Sub(beta, graph.Mul(mean, scale))
	}
	if axis != r-1 { // [C] -> [C, 1, ...]: broadcast along the axes after it
		bs := make([]int, r-axis)
		for i := range bs {
			bs[i] = 1
		}
		bs[0] = n
		scale, shift = graph.Reshape(scale, bs...), graph.Reshape(shift, bs...)
	} else if !c.Training {
		if y := foldIntoConv(x, scale); y != nil {
			return graph.Add(y, shift)
		}
	}
	return graph.Add(graph.Mul(x, scale), shift)
}

// foldIntoConv returns, when x is a plain float32 or float64 Conv2D,
// that convolution with its filter [KH, KW, C, F] scaled per output
// channel: conv(x, W)·scale = conv(x, W·scale), so in inference
// BatchNormalization costs a [KH, KW, C, F] product and a bias, not a pass
// over the output (the unscaled convolution is left unread and pruned).
// It returns nil otherwise.
func foldIntoConv(x, scale *graph.Node) *graph.Node {
	if x.Op() != graph.OpConv2D || x.Attr().BF16 {
		return nil
	}
	in, w := x.Inputs()[0], x.Inputs()[1]
	if w.DType() != scale.DType() {
		return nil
	}
	return graph.Conv2DWith(in, graph.Mul(w, scale), graph.ConvOptionsOf(x.Attr()))
}

func or(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// LayerNormalization normalizes each example over its last axis, with a
// learned scale and shift. With Fused it runs as one op (graph.LayerNorm):
// the same values, and the backward pass keeps each row's mean and 1/σ
// instead of three values of the input's size.
type LayerNormalization struct {
	LayerName string
	Epsilon   float64 // zero: 1e-3 (Keras' default)
	Fused     bool
}

func (l *LayerNormalization) Name() string { return l.LayerName }

func (l *LayerNormalization) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	eps := or(l.Epsilon, 1e-3)
	ch := tensor.Shape{x.Shape()[x.Shape().Rank()-1]}
	gamma := c.Weight(l.LayerName+"/gamma", ch, Constant{1}, true)
	beta := c.Weight(l.LayerName+"/beta", ch, Constant{0}, true)
	if l.Fused {
		return graph.LayerNorm(x, gamma, beta, eps)
	}
	last := x.Shape().Rank() - 1
	mean := graph.ReduceMeanKeep(x, last)
	centered := graph.Sub(x, mean)
	variance := graph.ReduceMeanKeep(graph.Square(centered), last)
	return graph.Add(graph.Mul(graph.Div(centered, graph.Sqrt(graph.AddScalar(variance, eps))), gamma), beta)
}
