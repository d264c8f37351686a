package autodiff

import (
	"math"

	"github.com/headroom-ml/headroom/graph"
)

// The VJP rules of the elementwise ops (graph/elementwise.go) and of
// dropout's mask.
func init() {
	register(graph.OpNeg, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.Neg(gy)) })
	register(graph.OpExp, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.Mul(gy, c.val(n))) })
	register(graph.OpLog, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.Div(gy, c.in(n, 0))) })
	register(graph.OpSqrt, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return one(graph.Div(gy, graph.MulScalar(c.val(n), 2)))
	})
	// relu, sigmoid and tanh read their output, not their input, so the
	// input can be overwritten in place.
	register(graph.OpRelu, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.ReluGrad(c.val(n), gy)) })
	register(graph.OpSigmoid, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.SigmoidGrad(c.val(n), gy)) })
	register(graph.OpTanh, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.TanhGrad(c.val(n), gy)) })
	register(graph.OpCast, ruleCast)
	register(graph.OpAdd, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return two(unbroadcast(gy, raw(n, 0)), unbroadcast(gy, raw(n, 1)))
	})
	register(graph.OpSub, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return two(unbroadcast(gy, raw(n, 0)), unbroadcast(graph.Neg(gy), raw(n, 1)))
	})
	register(graph.OpMul, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		a, b := c.in(n, 0), c.in(n, 1)
		return two(unbroadcast(graph.Mul(gy, b), a), unbroadcast(graph.Mul(gy, a), b))
	})
	register(graph.OpDiv, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		a, b := c.in(n, 0), c.in(n, 1)
		// d(a/b)/db = -(a/b)/b
		return two(unbroadcast(graph.Div(gy, b), a), unbroadcast(graph.Neg(graph.Div(graph.Mul(gy, c.val(n)), b)), b))
	})
	register(graph.OpMaximum, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return select2(c, graph.GreaterEqual(c.in(n, 0), c.in(n, 1)), n, gy)
	})
	register(graph.OpMinimum, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		return select2(c, graph.LessEqual(c.in(n, 0), c.in(n, 1)), n, gy)
	})
	register(graph.OpWhere, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		cond := c.in(n, 0)
		zero := graph.ScalarLike(gy, 0)
		return []*graph.Node{nil, unbroadcast(graph.Where(cond, gy, zero), raw(n, 1)), unbroadcast(graph.Where(cond, zero, gy), raw(n, 2))}
	})
	// d erf(x)/dx = 2/sqrt(pi) * exp(-x*x)
	register(graph.OpErf, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		x := c.in(n, 0)
		return one(graph.Mul(gy, graph.MulScalar(graph.Exp(graph.Neg(graph.Square(x))), 2/math.Sqrt(math.Pi))))
	})
	// d|x|/dx = sign(x), taken as +1 at 0
	register(graph.OpAbs, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		x := c.in(n, 0)
		return one(graph.Where(graph.GreaterEqual(x, graph.ScalarLike(x, 0)), gy, graph.Neg(gy)))
	})
	// comparisons have zero gradient almost everywhere and no float inputs
	// to feed; a dropout mask is a function of the step alone
	registerZero(graph.OpEqual, graph.OpNotEqual, graph.OpLess, graph.OpLessEqual, graph.OpGreater, graph.OpGreaterEqual,
		graph.OpDropoutMask)
	registerNoRule(internal, graph.OpReluGrad, graph.OpSigmoidGrad, graph.OpTanhGrad)
	registerNoRule("made by compile's fusion pass, after differentiation", graph.OpFused)
}

func ruleCast(c *vjp, n, gy *graph.Node) []*graph.Node {
	x := raw(n, 0)
	if !x.DType().IsFloat() {
		return nil
	}
	return one(graph.Cast(gy, x.DType()))
}

// select2 routes gy to the first operand where mask holds and to the second
// elsewhere (Maximum and Minimum).
func select2(c *vjp, mask, n, gy *graph.Node) []*graph.Node {
	zero := graph.ScalarLike(gy, 0)
	return two(unbroadcast(graph.Where(mask, gy, zero), raw(n, 0)), unbroadcast(graph.Where(mask, zero, gy), raw(n, 1)))
}
