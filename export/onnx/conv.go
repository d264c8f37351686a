package onnx

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Convolution and pooling (graph/conv.go), NHWC in headroom and NCHW in
// ONNX.
func init() {
	register(graph.OpConv2D, rule{batch: batchNHWC, emit: emitConv2D, product: true})
	register(graph.OpMaxPool2D, rule{batch: batchNHWC, emit: pool("MaxPool")})
	register(graph.OpAvgPool2D, rule{batch: batchNHWC, emit: pool("AveragePool")})
	registerNotExportable(trainingOnly, graph.OpConv2DBackpropInput, graph.OpConv2DBackpropFilter, graph.OpMaxPool2DGrad, graph.OpAvgPool2DGrad)
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
