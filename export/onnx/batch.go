package onnx

import (
	"fmt"
	"slices"

	"github.com/headroom-ml/headroom/graph"
)

// Batch tracking. headroom builds a graph at a concrete batch size B; the
// exported model takes any batch N. Each node's value has at most one axis
// that scales with the batch (its batch axis, -1 for none): the inputs'
// axis 0, and from there each op's rule below. The exporter uses it to keep
// shapes written into the model (Reshape targets, Expand shapes, Slice
// bounds) symbolic in N, and to refuse what would only work at B: a value
// that does not scale with the batch meeting one that does along the batch
// axis. A graph built at B = 1 cannot tell a batch axis from any other axis
// of size 1: build the graph to export at a batch larger than 1.

// batchLeaf: Inputs are batch-first; weights and constants have no batch.
func batchLeaf(c *converter, n *graph.Node) (int, error) {
	if n.Op() == graph.OpInput {
		return 0, nil
	}
	return -1, nil
}

// batchSame: the output has the batch axis of input 0 (elementwise unary
// ops, Cast, softmax over the last axis).
func batchSame(c *converter, n *graph.Node) (int, error) {
	return c.axis[n.Inputs()[0].ID()], nil
}

// batchBroadcast aligns the inputs' batch axes under NumPy broadcasting
// (trailing dimensions line up): they must agree, and an input without one
// must have size 1 along it.
func batchBroadcast(c *converter, n *graph.Node) (int, error) {
	return c.aligned(n, n.Inputs(), n.Shape().Rank())
}

// aligned returns the batch axis of an output of rank r whose trailing
// dimensions line up with those of xs.
func (c *converter) aligned(n *graph.Node, xs []*graph.Node, r int) (int, error) {
	ax := -1
	for _, x := range xs {
		if a := c.axis[x.ID()]; a >= 0 {
			a += r - x.Shape().Rank()
			if ax >= 0 && a != ax {
				return 0, unsupported(n, "operands have their batch on different axes (%d and %d)", ax, a)
			}
			ax = a
		}
	}
	if ax < 0 {
		return -1, nil
	}
	for _, x := range xs {
		if c.axis[x.ID()] >= 0 {
			continue
		}
		if i := ax - (r - x.Shape().Rank()); i >= 0 && x.Shape()[i] != 1 {
			return 0, unsupported(n, "operand %s%v does not scale with the batch but has size %d along the batch axis %d",
				x.Owner(), x.Shape(), x.Shape()[i], ax)
		}
	}
	return ax, nil
}

// batchReduce: the batch axis survives unless it is reduced.
func batchReduce(c *converter, n *graph.Node) (int, error) {
	a := c.axis[n.Inputs()[0].ID()]
	at := n.Attr()
	if a < 0 || slices.Contains(at.Axes, a) {
		return -1, nil
	}
	if at.KeepDims {
		return a, nil
	}
	out := a
	for _, r := range at.Axes {
		if r < a {
			out--
		}
	}
	return out, nil
}

// batchMatMul: a's rows and b's columns are output axes, the leading
// (batch) dimensions are shared; a batch on the contracted axis leaves none.
func batchMatMul(c *converter, n *graph.Node) (int, error) {
	a, b := n.Inputs()[0], n.Inputs()[1]
	r := n.Shape().Rank()
	ra, rb := a.Shape().Rank(), b.Shape().Rank()
	at := n.Attr()
	rows, cols := ra-2, rb-1 // the axes of a and b that become output axes r-2 and r-1
	if at.TransA {
		rows = ra - 1
	}
	if at.TransB {
		cols = rb - 2
	}
	var ax []int
	if x := c.axis[a.ID()]; x >= 0 {
		switch {
		case x < ra-2:
			ax = append(ax, x)
		case x == rows:
			ax = append(ax, r-2)
		}
	}
	if x := c.axis[b.ID()]; x >= 0 {
		switch {
		case x < rb-2:
			ax = append(ax, x+r-rb)
		case x == cols:
			ax = append(ax, r-1)
		}
	}
	switch {
	case len(ax) == 0:
		return -1, nil
	case len(ax) == 2 && ax[0] != ax[1]:
		return 0, unsupported(n, "operands have their batch on different axes (%d and %d)", ax[0], ax[1])
	}
	if ax[0] < r-2 { // a shared leading dimension: both operands must scale
		for _, x := range []*graph.Node{a, b} {
			if x.Shape().Rank() > 2 && c.axis[x.ID()] < 0 {
				return 0, unsupported(n, "operand %s%v does not scale with the batch", x.Owner(), x.Shape())
			}
		}
	}
	return ax[0], nil
}

// batchReshape finds the output axis that holds the input's batch axis: the
// one after the same number of elements and a multiple of the batch (B
// rows may become B*T rows or B blocks of T rows, but not be split).
func batchReshape(c *converter, n *graph.Node) (int, error) {
	x := n.Inputs()[0]
	a := c.axis[x.ID()]
	if a < 0 {
		return -1, nil
	}
	prefix := 1
	for _, d := range x.Shape()[:a] {
		prefix *= d
	}
	p := 1
	for k, d := range n.Shape() {
		if p == prefix && c.batch > 0 && d%c.batch == 0 {
			return k, nil
		}
		p *= d
	}
	return 0, unsupported(n, "reshape %v -> %v splits the batch axis %d", x.Shape(), n.Shape(), a)
}

// batchTranspose follows the batch axis through the permutation.
func batchTranspose(c *converter, n *graph.Node) (int, error) {
	a := c.axis[n.Inputs()[0].ID()]
	if a < 0 {
		return -1, nil
	}
	return slices.Index(n.Attr().Perm, a), nil
}

// batchConcat: every operand has its batch on the same axis, or none has.
func batchConcat(c *converter, n *graph.Node) (int, error) {
	ax := c.axis[n.Inputs()[0].ID()]
	for _, x := range n.Inputs() {
		if c.axis[x.ID()] != ax {
			return 0, unsupported(n, "operands %s (batch axis %d) and %s (batch axis %d) do not scale alike",
				n.Inputs()[0].Owner(), ax, x.Owner(), c.axis[x.ID()])
		}
	}
	return ax, nil
}

// batchSlice: a slice that keeps the whole batch axis keeps it; one that
// cuts it has a fixed size.
func batchSlice(c *converter, n *graph.Node) (int, error) {
	x := n.Inputs()[0]
	a := c.axis[x.ID()]
	if a < 0 {
		return -1, nil
	}
	if at := n.Attr(); at.Starts[a] != 0 || at.Ends[a] != x.Shape()[a] {
		return -1, nil
	}
	return a, nil
}

// batchUnslice: the batch axis of x, where nothing is placed before or
// after it.
func batchUnslice(c *converter, n *graph.Node) (int, error) {
	x := n.Inputs()[0]
	a := c.axis[x.ID()]
	if a < 0 {
		return -1, nil
	}
	if n.Attr().Starts[a] != 0 || n.Shape()[a] != x.Shape()[a] {
		return -1, nil
	}
	return a, nil
}

// batchGather: indices [...I] and params [V, ...] -> [...I, ...].
func batchGather(c *converter, n *graph.Node) (int, error) {
	p, idx := n.Inputs()[0], n.Inputs()[1]
	pa, ia := c.axis[p.ID()], c.axis[idx.ID()]
	switch {
	case pa == 0:
		return 0, unsupported(n, "gathering rows of a batch (%s) is not exported", p.Owner())
	case pa > 0 && ia >= 0:
		return 0, unsupported(n, "both params and indices scale with the batch")
	case pa > 0:
		return idx.Shape().Rank() + pa - 1, nil
	}
	return ia, nil
}

// batchNHWC: convolution and pooling take the batch on axis 0 of x; the
// filter has none.
func batchNHWC(c *converter, n *graph.Node) (int, error) {
	a := c.axis[n.Inputs()[0].ID()]
	if a > 0 {
		return 0, unsupported(n, "the batch is on axis %d of the NHWC input, not 0", a)
	}
	if len(n.Inputs()) > 1 && c.axis[n.Inputs()[1].ID()] >= 0 {
		return 0, unsupported(n, "the filter scales with the batch")
	}
	return a, nil
}

// batchParam returns the batch axis of a value written in the model (graph
// inputs and outputs) and its symbolic name: "N", or "k*N" where the axis
// holds k rows per example.
func (c *converter) batchParam(n *graph.Node) (axis int, param string) {
	a := c.axis[n.ID()]
	if a < 0 {
		return -1, ""
	}
	d := n.Shape()[a]
	if c.batch <= 0 || d == c.batch {
		return a, BatchDim
	}
	return a, fmt.Sprintf("%d*%s", d/c.batch, BatchDim)
}
