package onnx

import (
	"math"
	"slices"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The sequence ops (graph/sequence.go): the gpt's attention, layer
// normalization and gelu, which are single ops in headroom, become ONNX
// compositions or opset 17's LayerNormalization:
//
//   - LayerNorm -> LayerNormalization (opset 17, axis -1, float32 or
//     float64 statistics as x); its parts, each row's mean and 1/σ, are
//     the node's optional outputs Mean and InvStdDev without their last
//     axis of 1 (Squeeze), listed only when a part is read.
//   - Gelu -> x·0.5·(1 + erf(x/√2)), Div, Erf, Add, Mul, Mul: the erf
//     formula works at every opset we write (Gelu is opset 20's) and is the
//     pattern onnxruntime's GeluFusion matches (the one PyTorch exports),
//     so onnxruntime runs it as one kernel anyway. (Its CPU provider has
//     no float64 Erf: a float64 gelu runs in runtimes that have one.)
//   - Attention -> MatMul/Softmax over [B, H, Tq, Tk] (opset 17 has no
//     Attention; opset 23's is not among the opsets written here): the
//     scores Scale·q·kᵀ, the keys a query does not see set to -Inf (an
//     added constant for the causal rule, Where for a mask), Softmax over
//     the keys, and, where a row can see no key, Where setting its
//     probabilities to 0 (headroom's zero output there), then ·v. Dropout
//     is a training step's: an attention with a dropout rate is refused.
//     Its part, each row's log-sum-exp, is what the backward pass keeps
//     and is not exported.
//   - LSTMCell -> Split of z [B, 4n] along axis 1 into the gates i, f, g,
//     o, Sigmoid on i, f, o and Tanh on g, then c = f·cPrev + i·g and
//     h = o·tanh(c) by Mul and Add, in the order of kernels.LSTMCellRows
//     (every opset we write has Split's sizes as an input). Its part 1,
//     c, is the Add's (the Mul's without cPrev) value, which the next
//     step reads; its part 2, the activations i, f, g, o, tanh(c) [B, 5n]
//     only the backward pass reads, is their Concat, emitted only when a
//     live node reads it.
//   - GRUCell -> Split of x [B, 3n] (and u [B, 3n]) along axis 1 into the
//     gates z, r, h, then z = σ(x_z + u_z), r = σ(x_r + u_r),
//     h' = tanh(x_h + r·u_h) and h = h' + z·(hPrev - h') by Add, Mul,
//     Sub, Sigmoid and Tanh, in the order of kernels.GRUCellRows (without
//     u: σ(x_z), σ(x_r), tanh(x_h); without hPrev: h = h' - z·h'). Its
//     part 1, the activations z, r, h' and u_h [B, 4n] only the backward
//     pass reads, is their Concat (u_h expanded to x's gate, zeros
//     without u), emitted only when a live node reads it.
//     A u that is one row broadcast over the batch (nn.GRU's first step:
//     the recurrent bias, BroadcastTo [B, 3n]) is exported as that row,
//     which the Adds and the Mul broadcast, so that it scales with the
//     batch.
func init() {
	register(graph.OpLayerNorm, rule{batch: batchLayerNorm, emit: emitLayerNorm})
	register(graph.OpGelu, rule{batch: batchSame, emit: emitGelu})
	register(graph.OpAttention, rule{batch: batchAttention, emit: emitAttention})
	register(graph.OpLSTMCell, rule{batch: batchStep, emit: emitLSTMCell})
	register(graph.OpGRUCell, rule{batch: batchGRUCell, emit: emitGRUCell})
	register(graph.OpPart, rule{batch: batchPart, emit: emitPart})
	registerNotExportable("a decoding step's cache write: not exported", graph.OpCacheWrite)
	registerNotExportable(trainingOnly, graph.OpAttentionGrad, graph.OpUnsliceAdd, graph.OpGeluGrad, graph.OpLayerNormGrad,
		graph.OpLSTMCellGrad, graph.OpGRUCellGrad)
}

// batchLayerNorm: x's batch axis, which must not be the normalized (last)
// axis; gamma and beta are [C] and do not scale.
func batchLayerNorm(c *converter, n *graph.Node) (int, error) {
	x := n.Inputs()[0]
	a := c.axis[x.ID()]
	if a >= 0 && a == x.Shape().Rank()-1 {
		return 0, unsupported(n, "normalizes over the batch axis %d of %v", a, x.Shape())
	}
	for _, p := range n.Inputs()[1:] {
		if c.axis[p.ID()] >= 0 {
			return 0, unsupported(n, "gamma or beta %s%v scales with the batch", p.Owner(), p.Shape())
		}
	}
	return a, nil
}

// emitLayerNorm: LayerNormalization over the last axis. The parts a live
// node reads (mean, 1/σ: [...]) are its outputs Mean and InvStdDev
// ([..., 1]) squeezed, set as the parts' values.
func emitLayerNorm(c *converter, n *graph.Node) (string, error) {
	in, err := c.ins(n)
	if err != nil {
		return "", err
	}
	var parts [3]*graph.Node // by part number
	nout := 1
	for _, u := range c.uses[n.ID()] {
		if u.Op() == graph.OpPart {
			parts[u.Attr().Part] = u
			nout = max(nout, u.Attr().Part+1)
		}
	}
	outs := c.nodeN("LayerNormalization", "", nout, in, attrI("axis", -1),
		attrF("epsilon", float32(n.Attr().Eps)), attrI("stash_type", 1))
	for i := 1; i < nout; i++ {
		if p := parts[i]; p != nil {
			name := []string{"", "mean", "rstd"}[i]
			v := c.node("Squeeze", name, []string{outs[i], c.constI64(-1)})
			if n.DType() != tensor.Float32 { // ONNX keeps the statistics in float32 (stash_type 1)
				v = c.node("Cast", name, []string{v}, attrI("to", int64(elemType(n.DType()))))
			}
			c.fused[p.ID()] = v
		}
	}
	return outs[0], nil
}

// emitGelu: x·0.5·(1 + erf(x/√2)), in the order of onnxruntime's
// GeluFusion pattern.
func emitGelu(c *converter, n *graph.Node) (string, error) {
	x, err := c.in(n, 0)
	if err != nil {
		return "", err
	}
	dt := n.DType()
	e := c.node("Erf", "erf", []string{c.node("Div", "scaled", []string{x, c.constScalar(dt, math.Sqrt2)})})
	xe := c.node("Mul", "mul", []string{x, c.node("Add", "add", []string{e, c.constScalar(dt, 1)})})
	return c.node("Mul", "", []string{xe, c.constScalar(dt, 0.5)}), nil
}

// batchAttention: q [B, Tq, H, D], k, v [B, Tk, H, D] and the mask
// [B, Tq, Tk] all have the batch on axis 0, or none has.
func batchAttention(c *converter, n *graph.Node) (int, error) {
	q := n.Inputs()[0]
	a := c.axis[q.ID()]
	if a > 0 {
		return 0, unsupported(n, "the batch is on axis %d of q %v, not 0", a, q.Shape())
	}
	for _, x := range n.Inputs()[1:attentionInputs(n)] {
		if c.axis[x.ID()] != a {
			return 0, unsupported(n, "q %s%v (batch axis %d) and %s%v (batch axis %d) do not scale alike",
				q.Owner(), q.Shape(), a, x.Owner(), x.Shape(), c.axis[x.ID()])
		}
	}
	return a, nil
}

// attentionInputs returns how many of n's inputs are q, k, v and the mask
// (the step of dropout follows).
func attentionInputs(n *graph.Node) int {
	if len(n.Inputs()) > 3 && n.Inputs()[3].DType() != tensor.Int64 {
		return 4
	}
	return 3
}

// emitAttention: o = softmax(Scale·q·kᵀ, hidden keys at -Inf)·v per
// example and head, as kernels.AttentionForward defines it:
//
//	q [B, Tq, H, D] -> [B, H, Tq, D]; k -> [B, H, D, Tk]; v -> [B, H, Tk, D]
//	s = Scale·(q·k) [B, H, Tq, Tk]; visible(i, j) = mask[b, i, j] and,
//	when causal, j <= i + off; p = softmax over j of the visible s
//	o = p·v [B, H, Tq, D] -> [B, Tq, H, D]
func emitAttention(c *converter, n *graph.Node) (string, error) {
	at := n.Attr()
	if at.Rate > 0 {
		return "", unsupported(n, "attention with dropout (rate %g) is a training step's: export the inference graph", at.Rate)
	}
	q, k := n.Inputs()[0], n.Inputs()[1]
	Tq, Tk, dt := q.Shape()[1], k.Shape()[1], n.DType()
	in, err := c.ins(n)
	if err != nil {
		return "", err
	}
	qh := c.node("Transpose", "q", []string{in[0]}, attrIs("perm", 0, 2, 1, 3))
	kt := c.node("Transpose", "k", []string{in[1]}, attrIs("perm", 0, 2, 3, 1))
	vh := c.node("Transpose", "v", []string{in[2]}, attrIs("perm", 0, 2, 1, 3))
	s := c.node("Mul", "scores", []string{c.node("MatMul", "qk", []string{qh, kt}), c.constScalar(dt, at.Scale)})

	// the keys each query sees: the causal rule (query i sees j <= i + off)
	// and the mask
	causal, off := at.Causal != graph.NotCausal, 0
	if at.Causal == graph.CausalBottomRight {
		off = Tk - Tq
	}
	var visible string // bool [B, 1, Tq, Tk] or [Tq, Tk]; "" when every key is seen
	if attentionInputs(n) == 4 {
		m := in[3]
		if n.Inputs()[3].DType() != tensor.Bool {
			m = c.node("Cast", "mask", []string{m}, attrI("to", dtBool))
		}
		visible = c.node("Unsqueeze", "mask", []string{m, c.constI64(1)})
		if causal {
			visible = c.node("And", "visible", []string{visible, c.causalMask(n, Tq, Tk, off)})
		}
	} else if causal && off < 0 { // queries i < -off see no key
		visible = c.causalMask(n, Tq, Tk, off)
	}
	switch {
	case visible != "":
		s = c.node("Where", "hidden", []string{visible, s, c.constScalar(dt, math.Inf(-1))})
	case causal:
		s = c.node("Add", "causal", []string{s, c.causalBias(n, Tq, Tk, off)})
	}
	p := c.node("Softmax", "probs", []string{s}, attrI("axis", -1))
	if visible != "" { // a row that sees no key is NaN after Softmax; headroom's is 0
		p = c.node("Where", "seen", []string{visible, p, c.constScalar(dt, 0)})
	}
	o := c.node("MatMul", "pv", []string{p, vh})
	return c.node("Transpose", "", []string{o}, attrIs("perm", 0, 2, 1, 3)), nil
}

// causalMask returns a bool [Tq, Tk] initializer: true where j <= i + off.
func (c *converter) causalMask(n *graph.Node, Tq, Tk, off int) string {
	t := tensor.New(tensor.Bool, tensor.Shape{Tq, Tk})
	b := t.Bytes()
	for i := 0; i < Tq; i++ {
		for j := 0; j < Tk && j <= i+off; j++ {
			b[i*Tk+j] = 1
		}
	}
	return c.addInit(n.Owner()+"/causal_mask", hostTensor(t))
}

// causalBias returns an initializer [Tq, Tk] of n's dtype: 0 where j <= i +
// off, -Inf elsewhere.
func (c *converter) causalBias(n *graph.Node, Tq, Tk, off int) string {
	t := tensor.New(n.DType(), tensor.Shape{Tq, Tk})
	for i := 0; i < Tq; i++ {
		for j := i + off + 1; j < Tk; j++ {
			t.SetFloat64At(i*Tk+j, math.Inf(-1))
		}
	}
	return c.addInit(n.Owner()+"/causal_bias", hostTensor(t))
}

// batchStep: a recurrent step's inputs, rows of the batch (an LSTM step's
// z [B, 4n] and cPrev [B, n]; a GRU step's x [B, 3n], u [B, 3n] and hPrev
// [B, n]), all have the batch on axis 0, or none has (the gates' axis 1
// is split, so it cannot be the batch).
func batchStep(c *converter, n *graph.Node) (int, error) {
	return batchRows(c, n, n.Inputs())
}

// batchRows: xs, inputs of the step n, have the batch on axis 0, or none
// has.
func batchRows(c *converter, n *graph.Node, xs []*graph.Node) (int, error) {
	a := -1
	for _, x := range xs {
		switch ax := c.axis[x.ID()]; {
		case ax > 0:
			return 0, unsupported(n, "the batch is on axis %d of %s%v, not 0", ax, x.Owner(), x.Shape())
		case ax == 0:
			a = 0
		}
	}
	if a == 0 {
		for _, x := range xs {
			if c.axis[x.ID()] < 0 {
				return 0, unsupported(n, "the step's inputs do not scale alike: %s%v has no batch axis", x.Owner(), x.Shape())
			}
		}
	}
	return a, nil
}

// emitLSTMCell: one LSTM step as kernels.LSTMCellRows computes it, the
// same operations in the same order:
//
//	i, f, g, o = Split(z, [n, n, n, n], axis 1)
//	i, f, g, o = σ(i), σ(f), tanh(g), σ(o)
//	c = f·cPrev + i·g   (i·g without cPrev)
//	h = o·tanh(c)
//
// The value of part 1 (c) is set for its part node; part 2 (the
// activations) is Concat(i, f, g, o, tanh(c)) when a live node reads it.
func emitLSTMCell(c *converter, n *graph.Node) (string, error) {
	in, err := c.ins(n)
	if err != nil {
		return "", err
	}
	u := int64(n.Shape()[1])
	z := c.nodeN("Split", "gates", 4, []string{in[0], c.constI64(u, u, u, u)}, attrI("axis", 1))
	i := c.node("Sigmoid", "i", []string{z[0]})
	f := c.node("Sigmoid", "f", []string{z[1]})
	g := c.node("Tanh", "g", []string{z[2]})
	o := c.node("Sigmoid", "o", []string{z[3]})
	cell := c.node("Mul", "ig", []string{i, g})
	if len(in) > 1 {
		cell = c.node("Add", "c", []string{c.node("Mul", "fc", []string{f, in[1]}), cell})
	}
	tc := c.node("Tanh", "tanh_c", []string{cell})
	h := c.node("Mul", "", []string{o, tc})
	acts := ""
	for _, p := range c.uses[n.ID()] {
		switch {
		case p.Op() != graph.OpPart:
		case p.Attr().Part == 1:
			c.fused[p.ID()] = cell
		case p.Attr().Part == 2:
			if acts == "" {
				acts = c.node("Concat", "acts", []string{i, f, g, o, tc}, attrI("axis", 1))
			}
			c.fused[p.ID()] = acts
		}
	}
	return h, nil
}

// batchGRUCell: as batchStep, except that u may be one row broadcast
// over the batch (gruRowU) when x has the batch on axis 0.
func batchGRUCell(c *converter, n *graph.Node) (int, error) {
	xs := n.Inputs()
	if gruRowU(c, n) {
		xs = slices.Delete(slices.Clone(xs), 1, 2)
	}
	return batchRows(c, n, xs)
}

// gruRowU reports whether the GRU step n has x with the batch on axis 0
// and a u that does not scale with it but is one row [3n] or [1, 3n]
// broadcast to [B, 3n] (nn.GRU's first step without an initial state
// reads its recurrent bias so): emitGRUCell reads that row, which its
// Adds and Mul broadcast over x's rows, whatever the batch.
func gruRowU(c *converter, n *graph.Node) bool {
	if len(n.Inputs()) < 2 {
		return false
	}
	x, u := n.Inputs()[0], n.Inputs()[1]
	if c.axis[x.ID()] != 0 || c.axis[u.ID()] >= 0 || u.Op() != graph.OpBroadcastTo {
		return false
	}
	s := u.Inputs()[0].Shape()
	return (s.Rank() == 1 || (s.Rank() == 2 && s[0] == 1)) && s[s.Rank()-1] == u.Shape()[1]
}

// emitGRUCell: one GRU step as kernels.GRUCellRows computes it, the same
// operations in the same order:
//
//	x_z, x_r, x_h = Split(x, [n, n, n], axis 1)   (u_z, u_r, u_h likewise)
//	z, r = σ(x_z + u_z), σ(x_r + u_r)              (σ(x_z), σ(x_r) without u)
//	h' = tanh(x_h + r·u_h)                         (tanh(x_h) without u)
//	h = h' + z·(hPrev - h')                        (h' - z·h' without hPrev)
//
// Part 1 (the activations) is Concat(z, r, h', u_h) when a live node reads it.
// A u broadcast from one row (gruRowU) is read as that row, split along
// its last axis.
func emitGRUCell(c *converter, n *graph.Node) (string, error) {
	in, err := c.ins(n)
	if err != nil {
		return "", err
	}
	if gruRowU(c, n) {
		if in[1], err = c.valueOf(n.Inputs()[1].Inputs()[0]); err != nil {
			return "", err
		}
	}
	w := int64(n.Shape()[1])
	sizes := c.constI64(w, w, w)
	x := c.nodeN("Split", "x_gates", 3, []string{in[0], sizes}, attrI("axis", 1))
	var z, r, hh string
	var u []string
	if len(in) > 1 {
		u = c.nodeN("Split", "u_gates", 3, []string{in[1], sizes}, attrI("axis", -1))
		z = c.node("Sigmoid", "z", []string{c.node("Add", "xu_z", []string{x[0], u[0]})})
		r = c.node("Sigmoid", "r", []string{c.node("Add", "xu_r", []string{x[1], u[1]})})
		ru := c.node("Mul", "ru_h", []string{r, u[2]})
		hh = c.node("Tanh", "h_cand", []string{c.node("Add", "xu_h", []string{x[2], ru})})
	} else {
		z = c.node("Sigmoid", "z", []string{x[0]})
		r = c.node("Sigmoid", "r", []string{x[1]})
		hh = c.node("Tanh", "h_cand", []string{x[2]})
	}
	var h string
	if len(in) > 2 {
		d := c.node("Mul", "zd", []string{z, c.node("Sub", "d", []string{in[2], hh})})
		h = c.node("Add", "", []string{hh, d})
	} else {
		h = c.node("Sub", "", []string{hh, c.node("Mul", "zh", []string{z, hh})})
	}
	acts := ""
	for _, p := range c.uses[n.ID()] {
		if p.Op() == graph.OpPart && p.Attr().Part == 1 {
			if acts == "" {
				// u_h as the step keeps it: u's gate (a broadcast row
				// expanded to x's shape), or zeros without u
				var uh string
				switch {
				case u == nil:
					uh = c.node("Expand", "u_h", []string{c.constScalar(n.DType(), 0), c.node("Shape", "x_h_shape", []string{x[2]})})
				case gruRowU(c, n):
					uh = c.node("Expand", "u_h", []string{u[2], c.node("Shape", "x_h_shape", []string{x[2]})})
				default:
					uh = u[2]
				}
				acts = c.node("Concat", "acts", []string{z, r, hh, uh}, attrI("axis", 1))
			}
			c.fused[p.ID()] = acts
		}
	}
	return h, nil
}

// batchPart: a layer normalization's parts [...] keep x's batch axis (never
// the last); attention's log-sum-exp [B, H, Tq] has it on axis 0 as q, an
// LSTM step's c [B, n] and activations [B, 5n] as z, and a GRU step's
// activations [B, 4n] as x.
func batchPart(c *converter, n *graph.Node) (int, error) {
	return c.axis[n.Inputs()[0].ID()], nil
}

// emitPart is reached for a part its op's emitter did not provide (a layer
// normalization's are set by emitLayerNorm, an LSTM step's by
// emitLSTMCell, a GRU step's by emitGRUCell).
func emitPart(c *converter, n *graph.Node) (string, error) {
	switch src := n.Inputs()[0]; src.Op() {
	case graph.OpAttention:
		return "", unsupported(n, "attention's log-sum-exp of each row is what its backward pass keeps: not exported")
	default:
		return "", unsupported(n, "part %d of %s is not exported", n.Attr().Part, src.Op())
	}
}
