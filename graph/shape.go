package graph

import (
	"github.com/headroom-ml/headroom/tensor"
)

// Reshape returns x with a new shape of the same size; one dimension may be
// -1 and is inferred. It is a view: no bytes move.
func Reshape(x *Node, shape ...int) *Node {
	g := x.g
	s := tensor.Shape(append([]int{}, shape...))
	infer, known := -1, 1
	for i, d := range s {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			g.throw(OpReshape, "bad target shape %v for %v", shape, x.shape)
		default:
			known *= d
		}
	}
	if infer >= 0 {
		if known == 0 || x.shape.Size()%known != 0 {
			g.throw(OpReshape, "cannot infer -1 in %v from %v", shape, x.shape)
		}
		s[infer] = x.shape.Size() / known
	}
	if s.Size() != x.shape.Size() {
		g.throw(OpReshape, "cannot reshape %v (%d elements) to %v (%d elements)", x.shape, x.shape.Size(), s, s.Size())
	}
	if err := s.Validate(); err != nil {
		g.throw(OpReshape, "%v", err)
	}
	if s.Equal(x.shape) {
		return x
	}
	return g.add(OpReshape, x.dtype, s, Attr{}, x)
}

// Transpose permutes x's dimensions: output dimension i is x's dimension
// perm[i]. With no perm it reverses the dimensions.
func Transpose(x *Node, perm ...int) *Node {
	g := x.g
	r := x.shape.Rank()
	if len(perm) == 0 {
		perm = make([]int, r)
		for i := range perm {
			perm[i] = r - 1 - i
		}
	}
	if len(perm) != r {
		g.throw(OpTranspose, "permutation %v does not fit shape %v", perm, x.shape)
	}
	seen := make([]bool, r)
	out := make(tensor.Shape, r)
	identity := true
	for i, p := range perm {
		if p < 0 || p >= r || seen[p] {
			g.throw(OpTranspose, "%v is not a permutation of the %d dimensions of %v", perm, r, x.shape)
		}
		seen[p] = true
		out[i] = x.shape[p]
		identity = identity && p == i
	}
	if identity {
		return x
	}
	return g.add(OpTranspose, x.dtype, out, Attr{Perm: append([]int{}, perm...)}, x)
}

// BroadcastTo expands x to shape under NumPy's broadcasting rule.
func BroadcastTo(x *Node, shape ...int) *Node {
	g := x.g
	s := tensor.Shape(append([]int{}, shape...))
	if !tensor.CanBroadcastTo(x.shape, s) {
		g.throw(OpBroadcastTo, "%v does not broadcast to %v", x.shape, s)
	}
	if s.Equal(x.shape) {
		return x
	}
	return g.add(OpBroadcastTo, x.dtype, s, Attr{}, x)
}

// Concat joins xs along axis; every other dimension must agree.
func Concat(axis int, xs ...*Node) *Node {
	if len(xs) == 0 {
		panic(&Error{Op: OpConcat, Msg: "no operands"})
	}
	g := xs[0].g
	first := xs[0]
	r := first.shape.Rank()
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		g.throw(OpConcat, "axis %d out of range for %v", axis, first.shape)
	}
	out := first.shape.Clone()
	out[axis] = 0
	for _, x := range xs {
		if x.dtype != first.dtype || x.shape.Rank() != r {
			g.throw(OpConcat, "operand %s%v does not match %s%v", x.dtype, x.shape, first.dtype, first.shape)
		}
		for i := range x.shape {
			if i != axis && x.shape[i] != first.shape[i] {
				g.throw(OpConcat, "shapes %v and %v differ outside axis %d", first.shape, x.shape, axis)
			}
		}
		out[axis] += x.shape[axis]
	}
	if len(xs) == 1 {
		return first
	}
	return g.add(OpConcat, first.dtype, out, Attr{Axis: axis}, xs...)
}

// Slice returns x[starts[0]:ends[0], ...], unit step. Missing trailing
// dimensions are taken whole.
func Slice(x *Node, starts, ends []int) *Node {
	g := x.g
	r := x.shape.Rank()
	if len(starts) > r || len(ends) != len(starts) {
		g.throw(OpSlice, "starts %v and ends %v do not fit shape %v", starts, ends, x.shape)
	}
	st, en := make([]int, r), make([]int, r)
	out := make(tensor.Shape, r)
	for i := 0; i < r; i++ {
		st[i], en[i] = 0, x.shape[i]
		if i < len(starts) {
			st[i], en[i] = starts[i], ends[i]
		}
		if st[i] < 0 || en[i] > x.shape[i] || st[i] > en[i] {
			g.throw(OpSlice, "range [%d:%d] out of bounds for dimension %d of %v", st[i], en[i], i, x.shape)
		}
		out[i] = en[i] - st[i]
	}
	return g.add(OpSlice, x.dtype, out, Attr{Starts: st, Ends: en}, x)
}

// Gather takes rows of params along its first dimension:
// params [V, ...], indices int32 [...I] -> [...I, ...]. An index outside
// [0, V) is a run-time error naming the op.
func Gather(params, indices *Node) *Node {
	g := params.g
	if indices.dtype != tensor.Int32 {
		g.throw(OpGather, "indices must be int32, got %s%v", indices.dtype, indices.shape)
	}
	if params.shape.Rank() < 1 {
		g.throw(OpGather, "params must have rank >= 1, got %v", params.shape)
	}
	out := append(indices.shape.Clone(), params.shape[1:]...)
	return g.add(OpGather, params.dtype, out, Attr{}, params, indices)
}

// OneHot returns indices int32 [...] as dtype [..., depth] with 1 at each
// index and 0 elsewhere; an index outside [0, depth) gives a row of zeros
// (as tf.one_hot).
func OneHot(indices *Node, depth int, dtype tensor.DType) *Node {
	g := indices.g
	if indices.dtype != tensor.Int32 {
		g.throw(OpOneHot, "indices must be int32, got %s%v", indices.dtype, indices.shape)
	}
	if depth <= 0 {
		g.throw(OpOneHot, "depth %d must be positive", depth)
	}
	if dtype != tensor.Float32 && dtype != tensor.Float64 {
		g.throw(OpOneHot, "dtype must be float32 or float64, got %s", dtype)
	}
	out := append(indices.shape.Clone(), depth)
	return g.add(OpOneHot, dtype, out, Attr{Depth: depth}, indices)
}
