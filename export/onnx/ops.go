package onnx

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// rule is how one graph op is exported: batch returns the batch axis of
// the node's value (see batch.go), emit appends the ONNX nodes that compute
// it and returns the name of the value.
type rule struct {
	batch func(c *converter, n *graph.Node) (int, error)
	emit  func(c *converter, n *graph.Node) (string, error)
}

// rules is the op table: an op missing here is an *UnsupportedError. To
// export a new op, add one entry (and a case to the tests' op models).
var rules = map[graph.Op]rule{
	graph.OpInput:    {batchLeaf, emitLeaf},
	graph.OpVariable: {batchLeaf, emitLeaf},
	graph.OpConstant: {batchLeaf, emitLeaf},

	graph.OpNeg:     {batchSame, unary("Neg")},
	graph.OpExp:     {batchSame, unary("Exp")},
	graph.OpLog:     {batchSame, unary("Log")},
	graph.OpSqrt:    {batchSame, unary("Sqrt")},
	graph.OpRelu:    {batchSame, unary("Relu")},
	graph.OpSigmoid: {batchSame, unary("Sigmoid")},
	graph.OpTanh:    {batchSame, unary("Tanh")},
	graph.OpErf:     {batchSame, unary("Erf")},
	graph.OpAbs:     {batchSame, unary("Abs")},
	graph.OpCast:    {batchSame, emitCast},

	graph.OpAdd:     {batchBroadcast, broadcasting("Add")},
	graph.OpSub:     {batchBroadcast, broadcasting("Sub")},
	graph.OpMul:     {batchBroadcast, broadcasting("Mul")},
	graph.OpDiv:     {batchBroadcast, broadcasting("Div")},
	graph.OpMaximum: {batchBroadcast, broadcasting("Max")},
	graph.OpMinimum: {batchBroadcast, broadcasting("Min")},

	graph.OpEqual:        {batchBroadcast, broadcasting("Equal")},
	graph.OpNotEqual:     {batchBroadcast, emitNotEqual},
	graph.OpLess:         {batchBroadcast, broadcasting("Less")},
	graph.OpLessEqual:    {batchBroadcast, broadcasting("LessOrEqual")},
	graph.OpGreater:      {batchBroadcast, broadcasting("Greater")},
	graph.OpGreaterEqual: {batchBroadcast, broadcasting("GreaterOrEqual")},
	graph.OpWhere:        {batchBroadcast, broadcasting("Where")},

	graph.OpReduceSum:  {batchReduce, reduce("ReduceSum")},
	graph.OpReduceMean: {batchReduce, reduce("ReduceMean")},
	graph.OpReduceMax:  {batchReduce, reduce("ReduceMax")},

	graph.OpMatMul: {batchMatMul, emitMatMul},

	graph.OpSoftmax:    {batchSame, lastAxis("Softmax")},
	graph.OpLogSoftmax: {batchSame, lastAxis("LogSoftmax")},

	graph.OpReshape:     {batchReshape, emitReshape},
	graph.OpTranspose:   {batchTranspose, emitTranspose},
	graph.OpBroadcastTo: {batchBroadcast, emitBroadcastTo},
	graph.OpConcat:      {batchConcat, emitConcat},
	graph.OpSlice:       {batchSlice, emitSlice},
	graph.OpUnslice:     {batchUnslice, emitUnslice},
	graph.OpGather:      {batchGather, emitGather},
	graph.OpOneHot:      {batchSame, emitOneHot},

	graph.OpConv2D:    {batchNHWC, emitConv2D},
	graph.OpMaxPool2D: {batchNHWC, pool("MaxPool")},
	graph.OpAvgPool2D: {batchNHWC, pool("AveragePool")},
}

// emitLeaf: an Input is a graph input (named in newConverter); a Variable
// or Constant becomes an initializer when first read (in).
func emitLeaf(c *converter, n *graph.Node) (string, error) { return c.value[n.ID()], nil }

// unary exports an elementwise op of one operand as the ONNX op of the same
// meaning.
func unary(op string) func(*converter, *graph.Node) (string, error) {
	return func(c *converter, n *graph.Node) (string, error) {
		in, err := c.ins(n)
		if err != nil {
			return "", err
		}
		return c.node(op, "", in), nil
	}
}

// broadcasting exports an op that broadcasts its operands (ONNX broadcasts
// as NumPy does).
func broadcasting(op string) func(*converter, *graph.Node) (string, error) { return unary(op) }

func emitNotEqual(c *converter, n *graph.Node) (string, error) {
	in, err := c.ins(n)
	if err != nil {
		return "", err
	}
	return c.node("Not", "", []string{c.node("Equal", "equal", in)}), nil
}

func emitCast(c *converter, n *graph.Node) (string, error) {
	in, err := c.ins(n)
	if err != nil {
		return "", err
	}
	return c.node("Cast", "", in, attrI("to", int64(elemType(n.DType())))), nil
}

// reduce exports ReduceSum/Mean/Max over the node's axes. ReduceSum takes
// its axes as an input since opset 13, the others since opset 18.
func reduce(op string) func(*converter, *graph.Node) (string, error) {
	return func(c *converter, n *graph.Node) (string, error) {
		x, err := c.in(n, 0)
		if err != nil {
			return "", err
		}
		at := n.Attr()
		keep := attrI("keepdims", 0)
		if at.KeepDims {
			keep.I = 1
		}
		axes := int64s(at.Axes)
		if op == "ReduceSum" || c.opset >= 18 {
			return c.node(op, "", []string{x, c.constI64(axes...)}, keep), nil
		}
		return c.node(op, "", []string{x}, keep, attrIs("axes", axes...)), nil
	}
}

// lastAxis exports Softmax or LogSoftmax over the last axis.
func lastAxis(op string) func(*converter, *graph.Node) (string, error) {
	return func(c *converter, n *graph.Node) (string, error) {
		x, err := c.in(n, 0)
		if err != nil {
			return "", err
		}
		return c.node(op, "", []string{x}, attrI("axis", -1)), nil
	}
}

// emitMatMul: ONNX MatMul has no transposed operands: a weight is stored
// transposed, a computed operand goes through a Transpose. Under int8 the
// operands are quantized (see operand).
func emitMatMul(c *converter, n *graph.Node) (string, error) {
	a, b := n.Inputs()[0], n.Inputs()[1]
	at := n.Attr()
	var pa, pb []int
	if at.TransA {
		pa = swapLast(a.Shape().Rank())
	}
	if at.TransB {
		pb = swapLast(b.Shape().Rank())
	}
	// a weight's output channels: a's rows, b's columns
	av, err := c.operand(n, 0, pa, a.Shape().Rank()-2)
	if err != nil {
		return "", err
	}
	bv, err := c.operand(n, 1, pb, b.Shape().Rank()-1)
	if err != nil {
		return "", err
	}
	return c.node("MatMul", "", []string{av, bv}), nil
}

// emitReshape writes the target shape with -1 on the batch axis, so the
// model reshapes any batch.
func emitReshape(c *converter, n *graph.Node) (string, error) {
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

// nchw and nhwc are the permutations between headroom's NHWC activations
// and ONNX's NCHW ones; hwioToOIHW stores a Keras filter as ONNX's.
var (
	nchw       = []int{0, 3, 1, 2}
	nhwc       = []int{0, 2, 3, 1}
	hwioToOIHW = []int{3, 2, 0, 1}
)

// pads returns ONNX's pads [top, left, bottom, right] for Keras/TensorFlow
// padding of input [H, W] with window k and strides s: "same" pads
// (out-1)*s + k - n in all, the odd cell at the end (TensorFlow's
// convention); "valid" pads nothing.
func pads(h, w int, k, s [2]int, same bool) []int64 {
	if !same {
		return []int64{0, 0, 0, 0}
	}
	p := make([]int64, 4)
	for i, n := range []int{h, w} {
		out := graph.ConvOutSize(n, k[i], s[i], true)
		total := max((out-1)*s[i]+k[i]-n, 0)
		p[i], p[i+2] = int64(total/2), int64(total-total/2)
	}
	return p
}

// emitConv2D: Transpose(NHWC -> NCHW), Conv with the filter stored OIHW,
// Transpose back. onnxruntime's layout optimizer removes the transposes
// between consecutive convolutions and pools. A bias added to the
// convolution's output is folded into the Conv (as its input B), which
// lets onnxruntime fuse an int8 Conv into one integer kernel.
func emitConv2D(c *converter, n *graph.Node) (string, error) {
	x := n.Inputs()[0]
	at := n.Attr()
	xv, err := c.operand(n, 0, nchw, -1)
	if err != nil {
		return "", err
	}
	wv, err := c.operand(n, 1, hwioToOIHW, 0)
	if err != nil {
		return "", err
	}
	in := []string{xv, wv}
	add, bias := c.convBias(n)
	if add != nil {
		bv, err := c.biasOperand(bias, xv, wv)
		if err != nil {
			return "", err
		}
		in = append(in, bv)
	}
	o := graph.ConvOptionsOf(at) // dilation and groups (ONNX's OIHW weight of C/group inputs is HWIO's transpose)
	extent := [2]int{graph.EffectiveWindow(at.Window[0], o.Dilation[0]), graph.EffectiveWindow(at.Window[1], o.Dilation[1])}
	y := c.node("Conv", "nchw", in,
		attrIs("kernel_shape", int64(at.Window[0]), int64(at.Window[1])),
		attrIs("strides", int64(at.Strides[0]), int64(at.Strides[1])),
		attrIs("pads", pads(x.Shape()[1], x.Shape()[2], extent, at.Strides, at.Same)...),
		attrIs("dilations", int64(o.Dilation[0]), int64(o.Dilation[1])), attrI("group", int64(o.Groups)))
	out := c.node("Transpose", "", []string{y}, attrIs("perm", int64s(nhwc)...))
	if add != nil {
		c.fused[add.ID()] = out
	}
	return out, nil
}

// convBias returns the Add that adds a bias (a leaf [F]) to n's output and
// the bias, when that Add is n's only reader and n is not a model output.
func (c *converter) convBias(n *graph.Node) (add, bias *graph.Node) {
	uses := c.uses[n.ID()]
	if len(uses) != 1 || uses[0].Op() != graph.OpAdd {
		return nil, nil
	}
	for _, o := range c.m.Outputs {
		if o.Node == n {
			return nil, nil
		}
	}
	add = uses[0]
	for _, b := range add.Inputs() {
		if b != n && isLeaf(b) && b.DType() == n.DType() && b.Shape().Equal(tensor.Shape{n.Shape()[3]}) {
			return add, b
		}
	}
	return nil, nil
}

// biasOperand stores a folded bias: as int32 when the product's operands
// are quantized, as is otherwise.
func (c *converter) biasOperand(b *graph.Node, xv, wv string) (string, error) {
	key := "bias:" + b.Owner() + ":" + xv
	if v, ok := c.inits[key]; ok {
		return v, nil
	}
	t, err := c.leafTensor(b)
	if err != nil {
		return "", err
	}
	name := b.Attr().Name
	if name == "" {
		name = b.Owner()
	}
	v := ""
	if c.int8 != nil {
		v = c.quantizedBias(name, t, xv, wv)
	}
	if v == "" {
		v = c.addInit(name, hostTensor(t))
	}
	c.inits[key] = v
	return v, nil
}

// pool exports MaxPool2D or AvgPool2D as MaxPool or AveragePool between
// transposes; average pooling does not count padded cells (as Keras).
func pool(op string) func(*converter, *graph.Node) (string, error) {
	return func(c *converter, n *graph.Node) (string, error) {
		x := n.Inputs()[0]
		xv, err := c.in(n, 0)
		if err != nil {
			return "", err
		}
		at := n.Attr()
		attrs := []*attribute{
			attrIs("kernel_shape", int64(at.Window[0]), int64(at.Window[1])),
			attrIs("strides", int64(at.Strides[0]), int64(at.Strides[1])),
			attrIs("pads", pads(x.Shape()[1], x.Shape()[2], at.Window, at.Strides, at.Same)...),
		}
		if op == "AveragePool" {
			attrs = append(attrs, attrI("count_include_pad", 0))
		}
		t := c.node("Transpose", "nchw", []string{xv}, attrIs("perm", int64s(nchw)...))
		y := c.node(op, "pool", []string{t}, attrs...)
		return c.node("Transpose", "", []string{y}, attrIs("perm", int64s(nhwc)...)), nil
	}
}

// operand returns the ONNX value of input i of a product (MatMul, Conv),
// permuted by perm (nil: as is). A weight (a leaf) is permuted when stored;
// under int8 it is stored as int8 per output channel (axis chanAxis of the
// permuted weight) with a DequantizeLinear, and a computed operand goes
// through QuantizeLinear/DequantizeLinear with its calibrated range. Without
// int8, a bfloat16 product (Attr.BF16) rounds its operands to bfloat16, as
// headroom computes it.
func (c *converter) operand(n *graph.Node, i int, perm []int, chanAxis int) (string, error) {
	x := n.Inputs()[i]
	bf16 := n.Attr().BF16 && c.int8 == nil
	if isLeaf(x) && (perm != nil || bf16 || c.int8 != nil) {
		return c.weightOperand(x, perm, chanAxis, bf16, c.int8 != nil)
	}
	v, err := c.in(n, i)
	if err != nil {
		return "", err
	}
	if perm != nil {
		v = c.node("Transpose", "operand", []string{v}, attrIs("perm", int64s(perm)...))
	}
	switch {
	case c.int8 != nil:
		return c.activationQDQ(x, v)
	case bf16:
		v = c.node("Cast", "bf16", []string{v}, attrI("to", dtBFloat16))
		v = c.node("Cast", "f32", []string{v}, attrI("to", dtFloat))
	}
	return v, nil
}

// weightOperand stores leaf x permuted (and rounded to bfloat16 values, or
// quantized to int8 along chanAxis), once per form.
func (c *converter) weightOperand(x *graph.Node, perm []int, chanAxis int, bf16, quantize bool) (string, error) {
	key := "w:" + x.Owner() + ":" + permKey(perm)
	switch {
	case quantize:
		key += ":int8"
	case bf16:
		key += ":bf16"
	}
	if v, ok := c.inits[key]; ok {
		return v, nil
	}
	t, err := c.leafTensor(x)
	if err != nil {
		return "", err
	}
	if perm != nil {
		t = permute(t, perm)
	}
	name := x.Attr().Name
	if name == "" {
		name = x.Owner()
	}
	if perm != nil {
		name += "/" + permName(perm)
	}
	var v string
	switch {
	case quantize:
		v, err = c.quantizedWeight(name, t, chanAxis)
		if err != nil {
			return "", err
		}
	case bf16 && t.DType() == tensor.Float32:
		v = c.addInit(name+"/bf16", hostTensor(roundBF16(t)))
	default:
		v = c.addInit(name, hostTensor(t))
	}
	c.inits[key] = v
	return v, nil
}

func permKey(p []int) string {
	b := make([]byte, len(p))
	for i, v := range p {
		b[i] = byte('0' + v)
	}
	return string(b)
}

// permName names a stored permutation: "oihw" for a filter, "T" for a
// transposed matrix.
func permName(p []int) string {
	if len(p) == 4 && p[0] == 3 && p[1] == 2 && p[2] == 0 && p[3] == 1 {
		return "oihw"
	}
	if len(p) >= 2 && p[len(p)-1] == len(p)-2 {
		return "T"
	}
	return "perm" + permKey(p)
}
