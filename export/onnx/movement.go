package onnx

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The shape and data-movement ops (graph/shape.go), and Unslice, which is
// graph.Pad's op.
func init() {
	register(graph.OpReshape, rule{batch: batchReshape, emit: emitReshape})
	register(graph.OpTranspose, rule{batch: batchTranspose, emit: emitTranspose})
	register(graph.OpBroadcastTo, rule{batch: batchBroadcast, emit: emitBroadcastTo})
	register(graph.OpConcat, rule{batch: batchConcat, emit: emitConcat})
	register(graph.OpSlice, rule{batch: batchSlice, emit: emitSlice})
	register(graph.OpUnslice, rule{batch: batchUnslice, emit: emitUnslice})
	register(graph.OpGather, rule{batch: batchGather, emit: emitGather})
	register(graph.OpOneHot, rule{batch: batchSame, emit: emitOneHot})
	registerNotExportable(trainingOnly, graph.OpScatterAdd)
}

// emitReshape writes the target shape with -1 on the batch axis, so the
// model reshapes any batch. A reshaped weight is stored in its new shape
// when it is first read (valueOf), or in the form a product reads it
// (int8, transposed).
func emitReshape(c *converter, n *graph.Node) (string, error) {
	if isLeaf(n.Inputs()[0]) {
		return "", nil
	}
	x, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	shape := int64s(n.Shape())
	if a := c.axis[n.ID()]; a >= 0 {
		shape[a] = -1
	}
	return c.node("Reshape", "", []string{x, c.constI64(shape...)}), nil
}

func emitTranspose(c *converter, n *graph.Node) (string, error) {
	x, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	return c.node("Transpose", "", []string{x}, attrIs("perm", int64s(n.Attr().Perm)...)), nil
}

// emitBroadcastTo exports Expand; on the batch axis the shape says 1, which
// Expand's two-way broadcasting reads as "keep the input's size".
func emitBroadcastTo(c *converter, n *graph.Node) (string, error) {
	x, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	shape := int64s(n.Shape())
	if a := c.axis[n.ID()]; a >= 0 {
		shape[a] = 1
	}
	return c.node("Expand", "", []string{x, c.constI64(shape...)}), nil
}

func emitConcat(c *converter, n *graph.Node) (string, error) {
	in, err := c.ins(n)
	if err != nil {
		return "", err
	}
	return c.node("Concat", "", in, attrI("axis", int64(n.Attr().Axis))), nil
}

// emitSlice slices only the axes that are cut; a whole batch axis is left
// alone, so it stays symbolic.
func emitSlice(c *converter, n *graph.Node) (string, error) {
	x, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	at, s := n.Attr(), n.Inputs()[0].Shape()
	var starts, ends, axes []int64
	for i := range s {
		if at.Starts[i] == 0 && at.Ends[i] == s[i] {
			continue
		}
		starts = append(starts, int64(at.Starts[i]))
		ends = append(ends, int64(at.Ends[i]))
		axes = append(axes, int64(i))
	}
	if len(axes) == 0 {
		return c.node("Identity", "", []string{x}), nil
	}
	return c.node("Slice", "", []string{x, c.constI64(starts...), c.constI64(ends...), c.constI64(axes...)}), nil
}

// emitUnslice exports Unslice (x placed at Starts in zeros of the node's
// shape: graph.Pad, Keras' ZeroPadding2D) as Pad with zeros; the batch
// axis is padded by nothing, so it stays symbolic.
func emitUnslice(c *converter, n *graph.Node) (string, error) {
	x, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	s, out, starts := n.Inputs()[0].Shape(), n.Shape(), n.Attr().Starts
	pads := make([]int64, 2*len(s))
	for i := range s {
		pads[i], pads[len(s)+i] = int64(starts[i]), int64(out[i]-starts[i]-s[i])
	}
	return c.node("Pad", "", []string{x, c.constI64(pads...)}), nil
}

func emitGather(c *converter, n *graph.Node) (string, error) {
	in, err := c.ins(n)
	if err != nil {
		return "", err
	}
	return c.node("Gather", "", in, attrI("axis", 0)), nil
}

// emitOneHot compares the indices with 0..depth-1: an index outside
// [0, depth) gives a row of zeros, as headroom (and tf.one_hot) does; ONNX's
// OneHot would wrap negative indices.
func emitOneHot(c *converter, n *graph.Node) (string, error) {
	idx, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	depth := n.Attr().Depth
	r := tensor.New(tensor.Int32, tensor.Shape{depth})
	for i, v := 0, r.Int32s(); i < depth; i++ {
		v[i] = int32(i)
	}
	rng := c.addInit(n.Owner()+"/range", hostTensor(r))
	col := c.node("Unsqueeze", "unsqueeze", []string{idx, c.constI64(-1)})
	eq := c.node("Equal", "equal", []string{col, rng})
	return c.node("Cast", "", []string{eq}, attrI("to", int64(elemType(n.DType())))), nil
}
