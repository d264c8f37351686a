package onnx

import (
	"strconv"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The matrix product (graph/linalg.go), and the operands of the products
// (MatMul, Conv): weights stored in the form the product reads them, int8
// under quantization.
func init() {
	register(graph.OpMatMul, rule{batch: batchMatMul, emit: emitMatMul, product: true})
}

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

// operand returns the ONNX value of input i of a product (MatMul, Conv),
// permuted by perm (nil: as is). A weight (a leaf, or a reshaped leaf:
// isWeight) is permuted when stored;
// under int8 it is stored as int8 per output channel (axis chanAxis of the
// permuted weight) with a DequantizeLinear, and a computed operand goes
// through QuantizeLinear/DequantizeLinear with its calibrated range. Without
// int8, a bfloat16 product (Attr.BF16) rounds its operands to bfloat16, as
// headroom computes it.
func (c *converter) operand(n *graph.Node, i int, perm []int, chanAxis int) (string, error) {
	x := n.Inputs()[i]
	bf16 := n.Attr().BF16 && c.int8 == nil
	if isWeight(x) && (perm != nil || bf16 || c.int8 != nil) {
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
	key := "w:" + strconv.Itoa(x.ID()) + ":" + permKey(perm) // a node: owners repeat
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
	if x.Op() == graph.OpReshape { // stored in the shape the product reads
		name = x.Inputs()[0].Attr().Name + "/reshaped"
	}
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
