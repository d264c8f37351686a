package autodiff

import (
	"math"
	"slices"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// rule returns the gradient of the loss with respect to each input of n,
// given gy, the gradient with respect to n (nil for inputs without one). A
// rule reads forward values only through c.in(n, i) and c.val(n), so that
// they can be rematerialized.
type rule func(c *vjp, n, gy *graph.Node) []*graph.Node

// rules is the VJP table: one rule per differentiable op.
var rules [graph.NumOps]rule

// moreRules are the rules of op families kept in files of their own
// (registerRules), added to the table after the core ones.
var moreRules []func()

// registerRules adds a family's rules to the table when the package
// initializes: var _ = registerRules(func() { rules[graph.OpX] = ... }).
func registerRules(f func()) bool {
	moreRules = append(moreRules, f)
	return true
}

func init() {
	defer func() {
		for _, f := range moreRules {
			f()
		}
	}()
	rules = [graph.NumOps]rule{
		graph.OpNeg:  func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.Neg(gy)) },
		graph.OpExp:  func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.Mul(gy, c.val(n))) },
		graph.OpLog:  func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.Div(gy, c.in(n, 0))) },
		graph.OpSqrt: func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.Div(gy, graph.MulScalar(c.val(n), 2))) },
		// relu, sigmoid and tanh read their output, not their input, so the
		// input can be overwritten in place.
		graph.OpRelu:    func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.ReluGrad(c.val(n), gy)) },
		graph.OpSigmoid: func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.SigmoidGrad(c.val(n), gy)) },
		graph.OpTanh:    func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.TanhGrad(c.val(n), gy)) },
		graph.OpCast:    ruleCast,
		graph.OpAdd: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			return two(unbroadcast(gy, raw(n, 0)), unbroadcast(gy, raw(n, 1)))
		},
		graph.OpSub: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			return two(unbroadcast(gy, raw(n, 0)), unbroadcast(graph.Neg(gy), raw(n, 1)))
		},
		graph.OpMul: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			a, b := c.in(n, 0), c.in(n, 1)
			return two(unbroadcast(graph.Mul(gy, b), a), unbroadcast(graph.Mul(gy, a), b))
		},
		graph.OpDiv: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			a, b := c.in(n, 0), c.in(n, 1)
			// d(a/b)/db = -(a/b)/b
			return two(unbroadcast(graph.Div(gy, b), a), unbroadcast(graph.Neg(graph.Div(graph.Mul(gy, c.val(n)), b)), b))
		},
		graph.OpMaximum: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			return select2(c, graph.GreaterEqual(c.in(n, 0), c.in(n, 1)), n, gy)
		},
		graph.OpMinimum: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			return select2(c, graph.LessEqual(c.in(n, 0), c.in(n, 1)), n, gy)
		},
		graph.OpWhere: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			cond := c.in(n, 0)
			zero := graph.ScalarLike(gy, 0)
			return []*graph.Node{nil, unbroadcast(graph.Where(cond, gy, zero), raw(n, 1)), unbroadcast(graph.Where(cond, zero, gy), raw(n, 2))}
		},
		graph.OpReduceSum:  func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(expandReduced(n, gy)) },
		graph.OpReduceMean: ruleReduceMean,
		graph.OpReduceMax:  ruleReduceMax,
		graph.OpMatMul:     ruleMatMul,
		graph.OpSoftmax:    func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.SoftmaxGrad(c.val(n), gy)) },
		graph.OpLogSoftmax: func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.LogSoftmaxGrad(c.val(n), gy)) },
		graph.OpSoftmaxCrossEntropy: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			return two(graph.SoftmaxCrossEntropyGrad(c.in(n, 0), c.in(n, 1), gy), nil)
		},
		graph.OpReshape: func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.Reshape(gy, raw(n, 0).Shape()...)) },
		graph.OpTranspose: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			perm := n.Attr().Perm
			inv := make([]int, len(perm))
			for i, p := range perm {
				inv[p] = i
			}
			return one(graph.Transpose(gy, inv...))
		},
		graph.OpBroadcastTo: func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(unbroadcast(gy, raw(n, 0))) },
		graph.OpConcat:      ruleConcat,
		graph.OpSlice: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			return one(graph.Unslice(gy, raw(n, 0).Shape(), n.Attr().Starts))
		},
		graph.OpGather: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			return two(graph.ScatterAdd(c.in(n, 1), gy, raw(n, 0).Shape()), nil)
		},
		graph.OpOneHot: func(c *vjp, n, gy *graph.Node) []*graph.Node { return nil },
		graph.OpConv2D: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			x, f, at := c.in(n, 0), c.in(n, 1), n.Attr()
			return two(graph.Conv2DBackpropInput(gy, f, x.Shape(), at.Strides, at.Same),
				graph.Conv2DBackpropFilter(x, gy, f.Shape(), at.Strides, at.Same))
		},
		graph.OpMaxPool2D: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			at := n.Attr()
			return one(graph.MaxPool2DGrad(c.in(n, 0), gy, at.Window, at.Strides, at.Same))
		},
		graph.OpAvgPool2D: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			at := n.Attr()
			return one(graph.AvgPool2DGrad(gy, raw(n, 0).Shape(), at.Window, at.Strides, at.Same))
		},
		// d erf(x)/dx = 2/sqrt(pi) * exp(-x*x)
		graph.OpErf: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			x := c.in(n, 0)
			return one(graph.Mul(gy, graph.MulScalar(graph.Exp(graph.Neg(graph.Square(x))), 2/math.Sqrt(math.Pi))))
		},
		// d|x|/dx = sign(x), taken as +1 at 0
		graph.OpAbs: func(c *vjp, n, gy *graph.Node) []*graph.Node {
			x := c.in(n, 0)
			return one(graph.Where(graph.GreaterEqual(x, graph.ScalarLike(x, 0)), gy, graph.Neg(gy)))
		},
		graph.OpDropoutMask: none,
		// comparisons have zero gradient almost everywhere and no float inputs to feed
		graph.OpEqual: none, graph.OpNotEqual: none, graph.OpLess: none,
		graph.OpLessEqual: none, graph.OpGreater: none, graph.OpGreaterEqual: none,
	}
}

func none(c *vjp, n, gy *graph.Node) []*graph.Node { return nil }

// raw returns input i of n for its shape or dtype only (never recomputed).
func raw(n *graph.Node, i int) *graph.Node { return n.Inputs()[i] }

func one(a *graph.Node) []*graph.Node    { return []*graph.Node{a} }
func two(a, b *graph.Node) []*graph.Node { return []*graph.Node{a, b} }

// unbroadcast sums gy over the axes along which x was broadcast to gy's
// shape, and reshapes the result to x's shape.
func unbroadcast(gy, x *graph.Node) *graph.Node {
	if gy.Shape().Equal(x.Shape()) {
		return gy
	}
	axes := tensor.ReducedAxes(x.Shape(), gy.Shape())
	r := gy
	if len(axes) > 0 {
		r = graph.ReduceSum(gy, axes...)
	}
	return graph.Reshape(r, x.Shape()...)
}

// expandReduced broadcasts the gradient of a reduction back over the
// reduced axes of its input.
func expandReduced(n, gy *graph.Node) *graph.Node {
	x := raw(n, 0)
	return graph.BroadcastTo(graph.Reshape(gy, keepShape(x.Shape(), n.Attr().Axes)...), x.Shape()...)
}

func keepShape(s tensor.Shape, axes []int) []int {
	k := s.Clone()
	for _, a := range axes {
		k[a] = 1
	}
	return k
}

func ruleCast(c *vjp, n, gy *graph.Node) []*graph.Node {
	x := raw(n, 0)
	if !x.DType().IsFloat() {
		return nil
	}
	return one(graph.Cast(gy, x.DType()))
}

func ruleReduceMean(c *vjp, n, gy *graph.Node) []*graph.Node {
	x := raw(n, 0)
	count := 1
	for _, a := range n.Attr().Axes {
		count *= x.Shape()[a]
	}
	return one(graph.MulScalar(expandReduced(n, gy), 1/float64(count)))
}

// ruleReduceMax shares the gradient equally among the elements equal to the
// maximum, as TensorFlow does.
func ruleReduceMax(c *vjp, n, gy *graph.Node) []*graph.Node {
	x := c.in(n, 0)
	keep := keepShape(x.Shape(), n.Attr().Axes)
	mask := graph.Cast(graph.Equal(x, graph.Reshape(c.val(n), keep...)), x.DType())
	count := graph.ReduceSumKeep(mask, n.Attr().Axes...)
	return one(graph.Mul(mask, graph.Div(graph.Reshape(gy, keep...), count)))
}

// select2 routes gy to the first operand where mask holds and to the second
// elsewhere (Maximum and Minimum).
func select2(c *vjp, mask, n, gy *graph.Node) []*graph.Node {
	zero := graph.ScalarLike(gy, 0)
	return two(unbroadcast(graph.Where(mask, gy, zero), raw(n, 0)), unbroadcast(graph.Where(mask, zero, gy), raw(n, 1)))
}

// ruleMatMul: for C = op(A)·op(B), d op(A) = G·op(B)ᵀ and d op(B) = op(A)ᵀ·G;
// when an operand is stored transposed its gradient is transposed back by
// swapping the product's operands, never by copying.
func ruleMatMul(c *vjp, n, gy *graph.Node) []*graph.Node {
	a, b := c.in(n, 0), c.in(n, 1)
	ta, tb := n.Attr().TransA, n.Attr().TransB
	var ga, gb *graph.Node
	if !ta {
		ga = graph.MatMulT(gy, b, false, !tb) // G·op(B)ᵀ
	} else {
		ga = graph.MatMulT(b, gy, tb, true) // op(B)·Gᵀ
	}
	if b.Shape().Rank() == 2 && a.Shape().Rank() > 2 {
		// b is shared by every batch element: fold the batch into rows.
		if ta {
			panic(&graph.Error{Op: graph.OpMatMul, Owner: n.Owner(), Msg: "gradient of a batched matmul with a transposed first operand and a shared second operand is not supported"})
		}
		k, m := a.Shape()[a.Shape().Rank()-1], gy.Shape()[gy.Shape().Rank()-1]
		a2, g2 := graph.Reshape(a, -1, k), graph.Reshape(gy, -1, m)
		if !tb {
			gb = graph.MatMulT(a2, g2, true, false)
		} else {
			gb = graph.MatMulT(g2, a2, true, false)
		}
		return two(ga, gb)
	}
	if !tb {
		gb = graph.MatMulT(a, gy, !ta, false) // op(A)ᵀ·G
	} else {
		gb = graph.MatMulT(gy, a, true, ta) // Gᵀ·op(A)
	}
	return two(ga, gb)
}

func ruleConcat(c *vjp, n, gy *graph.Node) []*graph.Node {
	axis := n.Attr().Axis
	out := make([]*graph.Node, len(n.Inputs()))
	off := 0
	for i, x := range n.Inputs() {
		starts := make([]int, gy.Shape().Rank())
		ends := slices.Clone([]int(gy.Shape()))
		starts[axis], ends[axis] = off, off+x.Shape()[axis]
		off = ends[axis]
		out[i] = graph.Slice(gy, starts, ends)
	}
	return out
}
