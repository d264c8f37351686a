package nn

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
)

// Merge layers (Keras' keras.layers.merging): several inputs, one output.
// Elementwise merges broadcast as NumPy does (Keras asks for equal shapes
// but for the batch; every such input is accepted here too).

// mergeKind is an elementwise merge.
type mergeKind uint8

const (
	mergeAdd mergeKind = iota
	mergeSubtract
	mergeMultiply
	mergeAverage
	mergeMaximum
	mergeMinimum
)

// elementwiseMerge builds kind over xs (at least two; Subtract exactly two).
func elementwiseMerge(c *Context, name string, kind mergeKind, xs []*graph.Node) []*graph.Node {
	defer scoped(c, name)()
	if len(xs) < 2 || (kind == mergeSubtract && len(xs) != 2) {
		want := "at least two inputs"
		if kind == mergeSubtract {
			want = "two inputs"
		}
		panic(&graph.Error{Op: graph.OpAdd, Owner: name, Msg: fmt.Sprintf("merge layer %s takes %s, got %d", name, want, len(xs))})
	}
	y := xs[0]
	for _, x := range xs[1:] {
		switch kind {
		case mergeAdd, mergeAverage:
			y = graph.Add(y, x)
		case mergeSubtract:
			y = graph.Sub(y, x)
		case mergeMultiply:
			y = graph.Mul(y, x)
		case mergeMaximum:
			y = graph.Maximum(y, x)
		case mergeMinimum:
			y = graph.Minimum(y, x)
		}
	}
	if kind == mergeAverage {
		y = graph.MulScalar(y, 1/float64(len(xs)))
	}
	return []*graph.Node{y}
}

// Add sums its inputs (keras.layers.Add): a residual connection.
type Add struct{ LayerName string }

func (l *Add) Name() string { return l.LayerName }
func (l *Add) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	return elementwiseMerge(c, l.LayerName, mergeAdd, xs)
}

// Subtract is its first input minus its second (keras.layers.Subtract).
type Subtract struct{ LayerName string }

func (l *Subtract) Name() string { return l.LayerName }
func (l *Subtract) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	return elementwiseMerge(c, l.LayerName, mergeSubtract, xs)
}

// Multiply is the product of its inputs (keras.layers.Multiply).
type Multiply struct{ LayerName string }

func (l *Multiply) Name() string { return l.LayerName }
func (l *Multiply) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	return elementwiseMerge(c, l.LayerName, mergeMultiply, xs)
}

// Average is the mean of its inputs (keras.layers.Average).
type Average struct{ LayerName string }

func (l *Average) Name() string { return l.LayerName }
func (l *Average) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	return elementwiseMerge(c, l.LayerName, mergeAverage, xs)
}

// Maximum is the elementwise maximum of its inputs (keras.layers.Maximum).
type Maximum struct{ LayerName string }

func (l *Maximum) Name() string { return l.LayerName }
func (l *Maximum) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	return elementwiseMerge(c, l.LayerName, mergeMaximum, xs)
}

// Minimum is the elementwise minimum of its inputs (keras.layers.Minimum).
type Minimum struct{ LayerName string }

func (l *Minimum) Name() string { return l.LayerName }
func (l *Minimum) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	return elementwiseMerge(c, l.LayerName, mergeMinimum, xs)
}

// axisOf resolves a Keras axis (the batch is axis 0; negative counts from
// the end) of a rank-r tensor.
func axisOf(axis, r int) int {
	if axis < 0 {
		axis += r
	}
	return axis
}

// Concatenate joins its inputs along Axis (keras.layers.Concatenate).
// Axis counts the batch as axis 0, as Keras'; 0 stands for Keras' default,
// -1 (the last axis), since joining along the batch is not a layer's work.
type Concatenate struct {
	LayerName string
	Axis      int
}

func (l *Concatenate) Name() string { return l.LayerName }
func (l *Concatenate) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	defer scoped(c, l.LayerName)()
	if len(xs) == 0 {
		panic(&graph.Error{Op: graph.OpConcat, Owner: l.LayerName, Msg: "Concatenate of no inputs"})
	}
	axis := l.Axis
	if axis == 0 {
		axis = -1
	}
	return []*graph.Node{graph.Concat(axisOf(axis, xs[0].Shape().Rank()), xs...)}
}

// Dot is the dot product of two inputs along an axis of each
// (keras.layers.Dot): for [B, K] inputs, [B, 1]; for [B, M, K] and
// [B, N, K] with Axes (2, 2), [B, M, N]. Axes count the batch as axis 0; a
// zero pair means the last axis of each. With Normalize, each input is
// L2-normalized along its axis first (the cosine similarity).
type Dot struct {
	LayerName string
	Axes      [2]int
	Normalize bool
}

func (l *Dot) Name() string { return l.LayerName }
func (l *Dot) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	defer scoped(c, l.LayerName)()
	if len(xs) != 2 {
		panic(&graph.Error{Op: graph.OpMatMul, Owner: l.LayerName, Msg: fmt.Sprintf("Dot takes two inputs, got %d", len(xs))})
	}
	a, b := xs[0], xs[1]
	ra, rb := a.Shape().Rank(), b.Shape().Rank()
	if ra != rb || (ra != 2 && ra != 3) {
		panic(&graph.Error{Op: graph.OpMatMul, Owner: l.LayerName, Msg: fmt.Sprintf("Dot takes two inputs of rank 2 or 3, got %v and %v", a.Shape(), b.Shape())})
	}
	axA, axB := l.Axes[0], l.Axes[1]
	if axA == 0 && axB == 0 {
		axA, axB = -1, -1
	}
	axA, axB = axisOf(axA, ra), axisOf(axB, rb)
	if axA < 1 || axB < 1 || axA >= ra || axB >= rb {
		panic(&graph.Error{Op: graph.OpMatMul, Owner: l.LayerName, Msg: fmt.Sprintf("Dot axes %v of inputs %v and %v", l.Axes, a.Shape(), b.Shape())})
	}
	if l.Normalize {
		a, b = l2normalize(a, axA), l2normalize(b, axB)
	}
	if ra == 2 { // [B, K]·[B, K] -> [B, 1]
		n := a.Shape()[0]
		p := graph.MatMul(graph.Reshape(a, n, 1, a.Shape()[1]), graph.Reshape(b, n, b.Shape()[1], 1))
		return []*graph.Node{graph.Reshape(p, n, 1)}
	}
	// rank 3: contract axA of a with axB of b, batched over axis 0
	return []*graph.Node{graph.MatMulT(a, b, axA == 1, axB == 2)}
}

// l2normalize divides x by its L2 norm along axis (Keras' l2_normalize,
// epsilon 1e-12 under the square root).
func l2normalize(x *graph.Node, axis int) *graph.Node {
	ss := graph.ReduceSumKeep(graph.Square(x), axis)
	return graph.Div(x, graph.Sqrt(graph.Maximum(ss, graph.ScalarLike(ss, 1e-12))))
}

var (
	_ MultiLayer = (*Add)(nil)
	_ MultiLayer = (*Concatenate)(nil)
	_ MultiLayer = (*Dot)(nil)
	_ Model      = (*Functional)(nil)
	_ MultiLayer = (*Functional)(nil)
	_ Model      = (*ModelFunc)(nil)
)
