package onnx

import (
	"math"
	"strconv"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The vision layers' ops (graph/vision.go: nn's ReLU with max_value,
// LeakyReLU, ELU/SELU, swish, hard swish, softplus, softsign,
// Conv2DTranspose, UpSampling2D's bilinear resize).
func init() {
	register(graph.OpReluClip, rule{batch: batchSame, emit: emitReluClip})
	register(graph.OpElu, rule{batch: batchSame, emit: emitElu})
	register(graph.OpSilu, rule{batch: batchSame, emit: emitSilu})
	register(graph.OpHardSwish, rule{batch: batchSame, emit: unary("HardSwish")})
	register(graph.OpSoftplus, rule{batch: batchSame, emit: unary("Softplus")})
	register(graph.OpSoftsign, rule{batch: batchSame, emit: unary("Softsign")})
	register(graph.OpConv2DTranspose, rule{batch: batchNHWC, emit: emitConv2DTranspose})
	register(graph.OpResizeBilinear, rule{batch: batchNHWC, emit: emitResizeBilinear})
	registerNotExportable("BatchNormalization's batch statistics, a training step's: inference reads the moving averages", graph.OpMoments)
	registerNotExportable(trainingOnly, graph.OpResizeBilinearGrad, graph.OpReluClipGrad, graph.OpEluGrad, graph.OpSiluGrad,
		graph.OpHardSwishGrad, graph.OpSoftplusGrad, graph.OpSoftsignGrad)
}

// constScalar returns a scalar initializer of dtype dt (float32 or
// float64) holding v, shared by every node that needs it.
func (c *converter) constScalar(dt tensor.DType, v float64) string {
	key := "scalar:" + dt.String() + ":" + formatFloat(v)
	if name, ok := c.inits[key]; ok {
		return name
	}
	t := tensor.New(dt, tensor.Shape{})
	if dt == tensor.Float64 {
		t.Float64s()[0] = v
	} else {
		t.Float32s()[0] = float32(v)
	}
	name := c.addInit("const/"+dt.String(), hostTensor(t))
	c.inits[key] = name
	return name
}

// constF32 returns a float32 initializer holding vals (Resize's scales).
func (c *converter) constF32(vals ...float32) string {
	key := "f32:"
	for _, v := range vals {
		key += formatFloat(float64(v)) + ","
	}
	if name, ok := c.inits[key]; ok {
		return name
	}
	t := tensor.New(tensor.Float32, tensor.Shape{len(vals)})
	copy(t.Float32s(), vals)
	name := c.addInit("const/float", hostTensor(t))
	c.inits[key] = name
	return name
}

// formatFloat writes v exactly (a key of the shared constants).
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// emitReluClip: Keras' relu(x, negative_slope, max_value, threshold) as
// graph.ReluClip defines it. The common forms are one ONNX op (Relu,
// LeakyRelu, Clip for relu6); the others are built from Where, Clip, Relu
// and the arithmetic ops, in the kernel's order.
func emitReluClip(c *converter, n *graph.Node) (string, error) {
	x, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	a := n.Attr().Act
	maxValue, slope, th := a[0], a[1], a[2]
	dt := n.DType()
	clip := !math.IsNaN(maxValue)
	switch {
	case th == 0 && !clip && slope == 0:
		return c.node("Relu", "", []string{x}), nil
	case th == 0 && !clip:
		return c.node("LeakyRelu", "", []string{x}, attrF("alpha", float32(slope))), nil
	case th == 0 && slope == 0:
		return c.node("Clip", "", []string{x, c.constScalar(dt, 0), c.constScalar(dt, maxValue)}), nil
	}
	var p string
	if th == 0 {
		p = c.node("Relu", "pos", []string{x})
	} else {
		above := c.node("Greater", "above", []string{x, c.constScalar(dt, th)})
		p = c.node("Where", "pos", []string{above, x, c.constScalar(dt, 0)})
	}
	if clip {
		p = c.node("Clip", "clip", []string{p, c.constScalar(dt, 0), c.constScalar(dt, maxValue)})
	}
	if slope == 0 {
		return p, nil
	}
	below := c.node("Relu", "below", []string{c.node("Sub", "under", []string{c.constScalar(dt, th), x})})
	return c.node("Sub", "", []string{p, c.node("Mul", "leak", []string{below, c.constScalar(dt, slope)})}), nil
}

// emitElu: scale·elu(x, alpha); Keras' selu (alpha 1.6732632423543772,
// scale 1.0507009873554805) as ONNX's Selu.
func emitElu(c *converter, n *graph.Node) (string, error) {
	x, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	a := n.Attr().Act
	alpha, scale := a[0], a[1]
	if scale == 1 {
		return c.node("Elu", "", []string{x}, attrF("alpha", float32(alpha))), nil
	}
	if alpha == 1.6732632423543772 && scale == 1.0507009873554805 {
		return c.node("Selu", "", []string{x}, attrF("alpha", float32(alpha)), attrF("gamma", float32(scale))), nil
	}
	e := c.node("Elu", "elu", []string{x}, attrF("alpha", float32(alpha)))
	return c.node("Mul", "", []string{e, c.constScalar(n.DType(), scale)}), nil
}

// emitSilu: x·sigmoid(x).
func emitSilu(c *converter, n *graph.Node) (string, error) {
	x, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	return c.node("Mul", "", []string{x, c.node("Sigmoid", "sigmoid", []string{x})}), nil
}

// emitConv2DTranspose: Transpose(NHWC -> NCHW), ConvTranspose with the
// filter [KH, KW, Cout, Cin] stored as ONNX's [Cin, Cout, KH, KW],
// Transpose back. The transposed convolution is the gradient of the
// Conv2D over its output (graph.Conv2DTranspose): output cell i·s - pad +
// k·d receives input cell i through tap k, with pad that convolution's
// padding before; ONNX pads the end by what makes the output size, and
// adds the rows that convolution never read as output_padding.
// The filter stays float32 under --int8 (only Conv and MatMul are
// quantized).
func emitConv2DTranspose(c *converter, n *graph.Node) (string, error) {
	x, f := n.Inputs()[0], n.Inputs()[1]
	at := n.Attr()
	o := graph.ConvOptionsOf(at)
	xv, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	xv = c.node("Transpose", "nchw", []string{xv}, attrIs("perm", int64s(nchw)...))
	var wv string
	if isLeaf(f) {
		wv, err = c.weightOperand(f, hwioToOIHW, 0, false, false)
	} else {
		wv, err = c.in(n, 1)
		wv = c.node("Transpose", "filter", []string{wv}, attrIs("perm", int64s(hwioToOIHW)...))
	}
	if err != nil {
		return "", err
	}
	var begin, end, outPad [2]int64
	for i := range 2 {
		in, out, s := x.Shape()[1+i], n.Shape()[1+i], o.Strides[i]
		k := graph.EffectiveWindow(f.Shape()[i], o.Dilation[i])
		pad := 0
		if o.Same {
			pad = max((in-1)*s+k-out, 0) / 2
		}
		full := (in-1)*s + k - pad // the output's size with nothing cut at the end
		e := max(full-out, 0)
		begin[i], end[i], outPad[i] = int64(pad), int64(e), int64(out-(full-e))
	}
	y := c.node("ConvTranspose", "nchw", []string{xv, wv},
		attrIs("kernel_shape", int64(f.Shape()[0]), int64(f.Shape()[1])),
		attrIs("strides", int64(o.Strides[0]), int64(o.Strides[1])),
		attrIs("dilations", int64(o.Dilation[0]), int64(o.Dilation[1])),
		attrIs("pads", begin[0], begin[1], end[0], end[1]),
		attrIs("output_padding", outPad[0], outPad[1]))
	return c.node("Transpose", "", []string{y}, attrIs("perm", int64s(nhwc)...)), nil
}

// emitResizeBilinear: Resize in "linear" mode with half-pixel centres
// (TensorFlow's bilinear resize, which the kernel computes), over NCHW with
// scales (the batch stays symbolic).
func emitResizeBilinear(c *converter, n *graph.Node) (string, error) {
	x := n.Inputs()[0]
	xv, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	t := c.node("Transpose", "nchw", []string{xv}, attrIs("perm", int64s(nchw)...))
	sh, sw := float32(n.Shape()[1])/float32(x.Shape()[1]), float32(n.Shape()[2])/float32(x.Shape()[2])
	y := c.node("Resize", "resize", []string{t, "", c.constF32(1, 1, sh, sw)},
		attrS("mode", "linear"), attrS("coordinate_transformation_mode", "half_pixel"))
	return c.node("Transpose", "", []string{y}, attrIs("perm", int64s(nhwc)...)), nil
}
