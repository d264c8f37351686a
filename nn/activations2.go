package nn

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
)

// The activations of vision models (Keras 3's names; Keras 2 differs only
// in hard_sigmoid, see below), and the activation layers ReLU, LeakyReLU,
// ELU, PReLU and Softmax. Which are ops and which compositions:
//   - ops (graph/vision.go), because a composition would keep a second
//     activation alive for the backward pass or make several passes:
//     relu6 and leaky_relu (ReluClip, whose gradient reads only its
//     output), elu and selu (Elu, likewise), silu/swish, hard_silu/
//     hard_swish, softplus, softsign (their gradients read only the input);
//   - compositions that cost nothing extra: hard_sigmoid (an affine map,
//     fused, then ReluClip), exponential (Exp), log_softmax, mish
//     (x·tanh(softplus(x)): three ops, kept for its rarity), and PReLU
//     (Where(x > 0, x, alpha·x): the backward pass keeps a one-byte mask
//     beside x, which the layer before keeps anyway).
//
// hard_sigmoid is Keras 3's relu6(x + 3)/6 = clip(x/6 + 0.5, 0, 1) (as
// PyTorch and JAX); Keras 2's was clip(0.2·x + 0.5, 0, 1), available as
// "hard_sigmoid_keras2".
func init() {
	registerActivation("relu6", func(x *graph.Node) *graph.Node { return graph.ReluClip(x, 6, 0, 0) })
	registerActivation("leaky_relu", func(x *graph.Node) *graph.Node { return graph.ReluClip(x, graph.NoMax, 0.2, 0) }) // Keras 3's default slope
	registerActivation("elu", func(x *graph.Node) *graph.Node { return graph.Elu(x, 1, 1) })
	registerActivation("selu", func(x *graph.Node) *graph.Node { return graph.Elu(x, seluAlpha, seluScale) })
	registerActivation("silu", func(x *graph.Node) *graph.Node { return graph.Silu(x) })
	registerActivation("swish", func(x *graph.Node) *graph.Node { return graph.Silu(x) })
	registerActivation("hard_silu", func(x *graph.Node) *graph.Node { return graph.HardSwish(x) })
	registerActivation("hard_swish", func(x *graph.Node) *graph.Node { return graph.HardSwish(x) })
	registerActivation("hard_sigmoid", func(x *graph.Node) *graph.Node {
		return graph.ReluClip(graph.AddScalar(graph.MulScalar(x, 1.0/6), 0.5), 1, 0, 0)
	})
	registerActivation("hard_sigmoid_keras2", func(x *graph.Node) *graph.Node {
		return graph.ReluClip(graph.AddScalar(graph.MulScalar(x, 0.2), 0.5), 1, 0, 0)
	})
	registerActivation("softplus", func(x *graph.Node) *graph.Node { return graph.Softplus(x) })
	registerActivation("softsign", func(x *graph.Node) *graph.Node { return graph.Softsign(x) })
	registerActivation("exponential", func(x *graph.Node) *graph.Node { return graph.Exp(x) })
	registerActivation("log_softmax", func(x *graph.Node) *graph.Node { return graph.LogSoftmax(x) })
	registerActivation("mish", func(x *graph.Node) *graph.Node { return graph.Mul(x, graph.Tanh(graph.Softplus(x))) })
}

// SELU's constants (Klambauer et al., "Self-Normalizing Neural Networks",
// 2017), as Keras.
const (
	seluAlpha = 1.6732632423543772848170429916717
	seluScale = 1.0507009873554804934193349852946
)

// ReLU is Keras' ReLU layer: max(x, 0) clipped at MaxValue (nil: no
// clip), with NegativeSlope·(x - Threshold) below Threshold (see
// graph.ReluClip for Keras' exact formula). A plain ReLU is graph.Relu.
type ReLU struct {
	LayerName     string
	MaxValue      *float64 // Keras' max_value (None: nil)
	NegativeSlope float64
	Threshold     float64
}

func (l *ReLU) Name() string { return l.LayerName }

func (l *ReLU) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	if l.MaxValue == nil && l.NegativeSlope == 0 && l.Threshold == 0 {
		return graph.Relu(x)
	}
	mx := graph.NoMax
	if l.MaxValue != nil {
		mx = *l.MaxValue
	}
	return graph.ReluClip(x, mx, l.NegativeSlope, l.Threshold)
}

// LeakyReLU is x for x >= 0 and NegativeSlope·x below (Keras 2's alpha,
// Keras 3's negative_slope; zero means Keras' default, 0.3).
type LeakyReLU struct {
	LayerName     string
	NegativeSlope float64
}

func (l *LeakyReLU) Name() string { return l.LayerName }

func (l *LeakyReLU) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	return graph.ReluClip(x, graph.NoMax, or(l.NegativeSlope, 0.3), 0)
}

// ELU is x for x > 0 and Alpha·(e^x - 1) elsewhere (zero Alpha: Keras'
// default 1).
type ELU struct {
	LayerName string
	Alpha     float64
}

func (l *ELU) Name() string { return l.LayerName }

func (l *ELU) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	return graph.Elu(x, or(l.Alpha, 1), 1)
}

// PReLU is x for x > 0 and alpha·x elsewhere with a learned alpha (He et
// al., 2015) of one example's shape, shared (size 1) along SharedAxes
// (Keras' axes: 1 is the first after the batch). Its weight "alpha" starts
// at AlphaInit (nil: zeros, Keras' default).
type PReLU struct {
	LayerName  string
	SharedAxes []int
	AlphaInit  Initializer
}

func (l *PReLU) Name() string { return l.LayerName }

func (l *PReLU) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	shape := x.Shape()[1:].Clone()
	for _, a := range l.SharedAxes {
		if a < 1 || a > shape.Rank() {
			panic(&graph.Error{Op: graph.OpMul, Owner: l.LayerName, Msg: fmt.Sprintf("PReLU shared axis %d outside 1..%d of input %v", a, shape.Rank(), x.Shape())})
		}
		shape[a-1] = 1
	}
	alpha := c.Weight(l.LayerName+"/alpha", shape, orDefault(l.AlphaInit, Constant{0}), true)
	if alpha.DType() != x.DType() {
		alpha = graph.Cast(alpha, x.DType())
	}
	return graph.Where(graph.Greater(x, graph.ScalarLike(x, 0)), x, graph.Mul(x, alpha))
}

// Softmax normalizes along Axis (Keras' axis: -1, the default when zero,
// is the last; the batch is axis 0). Another axis than the last is moved
// last and back (two transposes around the softmax).
type Softmax struct {
	LayerName string
	Axis      int
}

func (l *Softmax) Name() string { return l.LayerName }

func (l *Softmax) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	r := x.Shape().Rank()
	axis := l.Axis
	if axis == 0 {
		axis = -1
	}
	axis = axisOf(axis, r)
	if axis < 1 || axis >= r {
		panic(&graph.Error{Op: graph.OpSoftmax, Owner: l.LayerName, Msg: fmt.Sprintf("Softmax axis %d of input %v", l.Axis, x.Shape())})
	}
	if axis == r-1 {
		return graph.Softmax(x)
	}
	perm := make([]int, r)
	for i := range perm {
		perm[i] = i
	}
	perm[axis], perm[r-1] = r-1, axis // a swap is its own inverse
	return graph.Transpose(graph.Softmax(graph.Transpose(x, perm...)), perm...)
}

// Serializable (serialize.go).
var (
	_ = RegisterLayer("ELU", &ELU{})
	_ = RegisterLayer("LeakyReLU", &LeakyReLU{})
	_ = RegisterLayer("PReLU", &PReLU{})
	_ = RegisterLayer("ReLU", &ReLU{})
	_ = RegisterLayer("Softmax", &Softmax{})
)
