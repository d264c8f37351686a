package onnx

import (
	"fmt"
	"math"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Int8Options configure post-training quantization to int8 in the QDQ
// format (QuantizeLinear/DequantizeLinear around the products, which
// onnxruntime fuses into integer kernels or runs as written).
//
// Weights read by a product (MatMul, Conv2D) are stored as int8, symmetric,
// one scale per output channel: scale_c = max|w_c| / 127, w ≈ q·scale_c. The
// products' computed operands are quantized asymmetrically per tensor from
// their calibrated ranges: scale = (max - min) / 255 with the range widened
// to hold 0, zero point = round(-min/scale) (uint8; int8 shifts it by -128).
// Everything else (biases, activations between products, the logits and
// softmax) stays float. See Jacob et al., "Quantization and Training of
// Neural Networks for Efficient Integer-Arithmetic-Only Inference" (CVPR
// 2018), section 2, for the affine scheme.
type Int8Options struct {
	// Ranges holds the range of every value Quantized lists (Calibrate
	// measures them).
	Ranges Ranges
	// SignedActivations quantizes activations to int8 rather than uint8.
	SignedActivations bool
	// ReduceRange stores weights in 7 bits ([-63, 63]): onnxruntime's
	// advice for x86 CPUs without VNNI, whose uint8·int8 products can
	// saturate 16-bit sums.
	ReduceRange bool
}

// Range is the smallest and largest value a tensor held.
type Range struct{ Min, Max float32 }

// Ranges maps values of a graph (nodes) to their ranges.
type Ranges map[*graph.Node]Range

// Quantized returns the values whose ranges an int8 export of m needs, in
// id order: the operands of its products (MatMul, Conv2D) that are computed,
// not weights.
func Quantized(m Model) []*graph.Node {
	if m.Graph == nil {
		return nil
	}
	live := liveNodes(m)
	seen := make([]bool, m.Graph.Len())
	for _, n := range m.Graph.Nodes() {
		if !live[n.ID()] || !rules[n.Op()].product {
			continue
		}
		for _, x := range n.Inputs() {
			if !isWeight(x) {
				seen[x.ID()] = true
			}
		}
	}
	var out []*graph.Node
	for id, s := range seen {
		if s {
			out = append(out, m.Graph.Node(id))
		}
	}
	return out
}

// Calibrate runs m's float graph on headroom's CPU runtime for the given
// number of batches and returns the range of every value Quantized lists.
// fill writes batch i into the model's inputs, given by Input name; each
// batch has the graph's batch size.
func Calibrate(m Model, batches int, fill func(i int, inputs map[string]tensor.Tensor) error) (Ranges, error) {
	keep := Quantized(m)
	if len(keep) == 0 {
		return Ranges{}, nil
	}
	ranges := make([]Range, len(keep))
	for i := range ranges {
		ranges[i] = Range{Min: float32(math.Inf(1)), Max: float32(math.Inf(-1))}
	}
	err := runGraph(m, keep, batches, fill, func(_ int, vals []tensor.Tensor) error {
		for i, v := range vals {
			if v.DType() != tensor.Float32 {
				return fmt.Errorf("onnx: calibrate: %s is %s; int8 export needs float32", keep[i].Owner(), v.DType())
			}
			r := &ranges[i]
			for _, f := range v.Float32s() {
				if f < r.Min {
					r.Min = f
				}
				if f > r.Max {
					r.Max = f
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := Ranges{}
	for i, n := range keep {
		if ranges[i].Min <= ranges[i].Max { // not if every batch was NaN
			out[n] = ranges[i]
		}
	}
	return out, nil
}

// activationParams returns the scale and zero point of r (see Int8Options).
func activationParams(r Range, signed bool) (scale float32, zp int) {
	lo, hi := min(float64(r.Min), 0), max(float64(r.Max), 0)
	scale = float32((hi - lo) / 255)
	if !(scale > 0) || math.IsInf(float64(scale), 0) {
		scale = 1
	}
	zp = int(math.RoundToEven(-lo / float64(scale)))
	zp = min(max(zp, 0), 255)
	if signed {
		zp -= 128
	}
	return scale, zp
}

// activationQDQ quantizes and dequantizes value v (of node x) with x's
// calibrated range, once per value.
func (c *converter) activationQDQ(x *graph.Node, v string) (string, error) {
	if q, ok := c.qdq[v]; ok {
		return q, nil
	}
	if x.DType() != tensor.Float32 {
		return "", fmt.Errorf("int8 export needs float32 operands, %s is %s", x.Owner(), x.DType())
	}
	r, ok := c.int8.Ranges[x]
	if !ok {
		return "", fmt.Errorf("no calibrated range for %s (run Calibrate on the model)", x.Owner())
	}
	if math.IsNaN(float64(r.Min)) || math.IsNaN(float64(r.Max)) || r.Min > r.Max {
		return "", fmt.Errorf("bad calibrated range [%v, %v] for %s", r.Min, r.Max, x.Owner())
	}
	scale, zp := activationParams(r, c.int8.SignedActivations)
	s := c.addInit(v+"/scale", scalarF32(scale))
	z := tensorVal{typ: dtUint8, raw: []byte{byte(zp)}}
	if c.int8.SignedActivations {
		z.typ = dtInt8
	}
	zn := c.addInit(v+"/zero_point", z)
	q := c.nodeAt("QuantizeLinear", v+"/quantized", []string{v, s, zn})
	dq := c.nodeAt("DequantizeLinear", v+"/dequantized", []string{q, s, zn})
	c.qdq[v] = dq
	c.scales[dq] = []float32{scale}
	return dq, nil
}

// quantizedWeight stores float32 weight t (named name) as int8, one scale
// per index of axis chanAxis (per tensor if it is negative), and returns
// the value of its DequantizeLinear.
func (c *converter) quantizedWeight(name string, t tensor.Tensor, chanAxis int) (string, error) {
	if t.DType() != tensor.Float32 {
		return "", fmt.Errorf("int8 export needs float32 weights, %s is %s", name, t)
	}
	s := t.Shape()
	channels, inner := 1, t.Len()
	if chanAxis >= 0 {
		channels, inner = s[chanAxis], 1
		for _, d := range s[chanAxis+1:] {
			inner *= d
		}
	}
	qmax := 127.0
	if c.int8.ReduceRange {
		qmax = 63
	}
	w := t.Float32s()
	absMax := make([]float64, channels)
	for i, v := range w {
		ch := (i / max(inner, 1)) % channels
		absMax[ch] = max(absMax[ch], math.Abs(float64(v)))
	}
	scales := make([]float32, channels)
	for ch, m := range absMax {
		scales[ch] = float32(m / qmax)
		if !(scales[ch] > 0) || math.IsInf(float64(scales[ch]), 0) {
			scales[ch] = 1
		}
	}
	q := make([]byte, len(w))
	for i, v := range w {
		ch := (i / max(inner, 1)) % channels
		r := math.RoundToEven(float64(v) / float64(scales[ch]))
		q[i] = byte(int8(min(max(r, -qmax), qmax)))
	}
	dims := int64s(s)
	qn := c.addInit(name+"/int8", tensorVal{dims: dims, typ: dtInt8, raw: q})
	sv := tensorVal{typ: dtFloat, raw: rawLE(tensor.AsBytes(scales), 4)}
	zv := tensorVal{typ: dtInt8, raw: make([]byte, channels)}
	var attrs []*attribute
	if chanAxis >= 0 {
		sv.dims, zv.dims = []int64{int64(channels)}, []int64{int64(channels)}
		attrs = append(attrs, attrI("axis", int64(chanAxis)))
	}
	sn := c.addInit(name+"/scale", sv)
	zn := c.addInit(name+"/zero_point", zv)
	dq := c.nodeAt("DequantizeLinear", name+"/dequantized", []string{qn, sn, zn}, attrs...)
	c.scales[dq] = scales
	return dq, nil
}

// quantizedBias stores float32 bias b [F] of a product whose dequantized
// operands have scales xs (per tensor) and ws (per output channel) as int32
// with scale xs·ws[f] (zero point 0), the form onnxruntime's integer
// convolution adds to its int32 sums, and returns its DequantizeLinear. It
// returns "" when an operand was not quantized.
func (c *converter) quantizedBias(name string, b tensor.Tensor, xv, wv string) string {
	xs, ws := c.scales[xv], c.scales[wv]
	f := b.Len()
	if len(xs) != 1 || (len(ws) != f && len(ws) != 1) || b.DType() != tensor.Float32 {
		return ""
	}
	scale := make([]float32, f)
	q := make([]int32, f)
	for i, v := range b.Float32s() {
		scale[i] = xs[0] * ws[min(i, len(ws)-1)]
		r := math.RoundToEven(float64(v) / float64(scale[i]))
		q[i] = int32(min(max(r, math.MinInt32), math.MaxInt32))
	}
	qn := c.addInit(name+"/int32", tensorVal{dims: []int64{int64(f)}, typ: dtInt32, raw: rawLE(tensor.AsBytes(q), 4)})
	sn := c.addInit(name+"/scale", tensorVal{dims: []int64{int64(f)}, typ: dtFloat, raw: rawLE(tensor.AsBytes(scale), 4)})
	return c.nodeAt("DequantizeLinear", name+"/dequantized", []string{qn, sn}, attrI("axis", 0))
}

func scalarF32(v float32) tensorVal {
	return tensorVal{typ: dtFloat, raw: rawLE(tensor.AsBytes([]float32{v}), 4)}
}

// nodeAt appends an ONNX node whose output is named base (made unique).
func (c *converter) nodeAt(opType, base string, inputs []string, attrs ...*attribute) string {
	out := c.unique(base)
	c.gp.Node = append(c.gp.Node, &nodeProto{OpType: opType, Name: out, Input: inputs, Output: []string{out}, Attribute: attrs})
	return out
}
