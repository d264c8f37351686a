package nn

import (
	"math"
	"slices"

	"github.com/headroom-ml/headroom/graph"
)

// Keras 3's operations as nodes of a functional model. Python arithmetic
// on Keras tensors (x + inputs, x * (1/6)) and calls of keras.ops
// (ops.mean(x, axis=1)) are recorded in a functional config as nodes of
// their own, not as layers: Math and Reduce are those nodes here (the
// others map onto layers: Activation, Reshape, Permute, Concatenate).

// Math is an elementwise operation of keras.ops over its inputs and
// constants, broadcasting as NumPy does. Fn is the operation's name as
// keras.ops spells it:
//   - two operands: add, subtract, multiply, divide (true_divide),
//     maximum, minimum, power (with a constant integer exponent, or 0.5);
//   - one operand: negative, absolute, exp, log, sqrt, square,
//     reciprocal, erf, gelu_approximate (ops.gelu's default: the tanh
//     form, Hendrycks and Gimpel 2016, eq. 2);
//   - clip: x, then its lower and upper bounds.
//
// Operands lists the operands in order: nil takes the layer's next input,
// a number is that constant (x + 3.0 is [nil, 3]). A nil Operands takes
// the inputs in order.
type Math struct {
	LayerName string
	Fn        string
	Operands  []*float64
}

// mathArity is the number of operands of each Fn.
var mathArity = map[string]int{
	"add": 2, "subtract": 2, "multiply": 2, "divide": 2, "maximum": 2, "minimum": 2, "power": 2,
	"negative": 1, "absolute": 1, "exp": 1, "log": 1, "sqrt": 1, "square": 1, "reciprocal": 1, "erf": 1,
	"gelu_approximate": 1, "clip": 3,
}

// MathArity returns the number of operands of the operation fn, or 0 when
// Math does not compute it.
func MathArity(fn string) int { return mathArity[fn] }

func (l *Math) Name() string { return l.LayerName }

func (l *Math) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	defer scoped(c, l.LayerName)()
	n, ok := mathArity[l.Fn]
	if !ok {
		throwf(graph.OpInvalid, l.LayerName, "Math: unknown operation %q", l.Fn)
	}
	ops, consts := l.operands(xs)
	if len(ops) != n {
		throwf(graph.OpInvalid, l.LayerName, "Math %s takes %d operands, got %d", l.Fn, n, len(ops))
	}
	var like *graph.Node // a tensor operand: constants take its dtype
	for _, o := range ops {
		if o != nil {
			like = o
			break
		}
	}
	if like == nil {
		throwf(graph.OpInvalid, l.LayerName, "Math %s has no tensor operand", l.Fn)
	}
	for i, o := range ops {
		if o == nil {
			ops[i] = graph.ScalarLike(like, consts[i])
		}
	}
	x := ops[0]
	switch l.Fn {
	case "add":
		return one(graph.Add(x, ops[1]))
	case "subtract":
		return one(graph.Sub(x, ops[1]))
	case "multiply":
		return one(graph.Mul(x, ops[1]))
	case "divide":
		return one(graph.Div(x, ops[1]))
	case "maximum":
		return one(graph.Maximum(x, ops[1]))
	case "minimum":
		return one(graph.Minimum(x, ops[1]))
	case "power":
		if len(l.Operands) != 2 || l.Operands[0] != nil || l.Operands[1] == nil {
			throwf(graph.OpMul, l.LayerName, "power: the base must be a tensor and the exponent a constant")
		}
		return one(power(l.LayerName, x, *l.Operands[1]))
	case "negative":
		return one(graph.Neg(x))
	case "absolute":
		return one(graph.Abs(x))
	case "exp":
		return one(graph.Exp(x))
	case "log":
		return one(graph.Log(x))
	case "sqrt":
		return one(graph.Sqrt(x))
	case "square":
		return one(graph.Square(x))
	case "reciprocal":
		return one(graph.Div(graph.ScalarLike(x, 1), x))
	case "erf":
		return one(graph.Erf(x))
	case "gelu_approximate":
		// x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
		inner := graph.MulScalar(graph.Add(x, graph.MulScalar(graph.Mul(graph.Square(x), x), 0.044715)), math.Sqrt(2/math.Pi))
		return one(graph.Mul(graph.MulScalar(x, 0.5), graph.AddScalar(graph.Tanh(inner), 1)))
	case "clip":
		return one(graph.Minimum(graph.Maximum(x, ops[1]), ops[2]))
	}
	panic("unreachable")
}

// operands returns the operation's operands in order: a tensor, or nil
// with its constant in consts.
func (l *Math) operands(xs []*graph.Node) ([]*graph.Node, []float64) {
	if l.Operands == nil {
		return slices.Clone(xs), make([]float64, len(xs))
	}
	ops, consts := make([]*graph.Node, len(l.Operands)), make([]float64, len(l.Operands))
	next := 0
	for i, o := range l.Operands {
		if o != nil {
			consts[i] = *o
			continue
		}
		if next >= len(xs) {
			throwf(graph.OpInvalid, l.LayerName, "Math %s: %d operands are inputs, the layer has %d", l.Fn, next+1, len(xs))
		}
		ops[i] = xs[next]
		next++
	}
	if next != len(xs) {
		throwf(graph.OpInvalid, l.LayerName, "Math %s takes %d inputs, got %d", l.Fn, next, len(xs))
	}
	return ops, consts
}

// power returns x^p for a constant p: repeated products for a small
// integer, a square root for ±0.5.
func power(layer string, x *graph.Node, p float64) *graph.Node {
	switch {
	case p == 0.5:
		return graph.Sqrt(x)
	case p == -0.5:
		return graph.Div(graph.ScalarLike(x, 1), graph.Sqrt(x))
	case p == math.Trunc(p) && math.Abs(p) <= 8 && p != 0:
		y := x
		for i := 1; i < int(math.Abs(p)); i++ {
			y = graph.Mul(y, x)
		}
		if p < 0 {
			y = graph.Div(graph.ScalarLike(x, 1), y)
		}
		return y
	case p == 0:
		return graph.Add(graph.Mul(x, graph.ScalarLike(x, 0)), graph.ScalarLike(x, 1))
	}
	throwf(graph.OpMul, layer, "power with exponent %v: headroom takes an integer exponent up to 8, or ±0.5", p)
	return nil
}

func one(x *graph.Node) []*graph.Node { return []*graph.Node{x} }

// Reduce is a reduction of keras.ops over Axes (counting the batch as
// axis 0, as keras.ops sees it; the batch itself may not be reduced): Fn
// is mean, sum, max or min; KeepDims keeps each reduced axis with size 1.
type Reduce struct {
	LayerName string
	Fn        string
	Axes      []int
	KeepDims  bool
}

func (l *Reduce) Name() string { return l.LayerName }

func (l *Reduce) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	r := x.Shape().Rank()
	axes := make([]int, len(l.Axes))
	for i, a := range l.Axes {
		if a = axisOf(a, r); a < 1 || a >= r {
			throwf(graph.OpReduceSum, l.LayerName, "%s over axis %d of input %v: the batch and axes outside the input cannot be reduced", l.Fn, l.Axes[i], x.Shape())
		}
		axes[i] = a
	}
	if len(axes) == 0 {
		throwf(graph.OpReduceSum, l.LayerName, "%s over no axes (a reduction over the batch too)", l.Fn)
	}
	switch l.Fn {
	case "mean":
		if l.KeepDims {
			return graph.ReduceMeanKeep(x, axes...)
		}
		return graph.ReduceMean(x, axes...)
	case "sum":
		if l.KeepDims {
			return graph.ReduceSumKeep(x, axes...)
		}
		return graph.ReduceSum(x, axes...)
	case "max":
		if l.KeepDims {
			return graph.ReduceMaxKeep(x, axes...)
		}
		return graph.ReduceMax(x, axes...)
	case "min": // -max(-x)
		if l.KeepDims {
			return graph.Neg(graph.ReduceMaxKeep(graph.Neg(x), axes...))
		}
		return graph.Neg(graph.ReduceMax(graph.Neg(x), axes...))
	}
	throwf(graph.OpReduceSum, l.LayerName, "Reduce: unknown reduction %q (want mean, sum, max or min)", l.Fn)
	return nil
}

// Serializable (serialize.go).
var (
	_ = RegisterLayer("Math", &Math{})
	_ = RegisterLayer("Reduce", &Reduce{})
)
