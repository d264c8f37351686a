package nn

import (
	"fmt"
	"math/rand/v2"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Recurrent layers (Keras' LSTM, GRU, SimpleRNN and Bidirectional) over
// x [B, T, in], unrolled over the fixed T in the graph: each step is a few
// graph ops, so the planner sees every step's values, recomputation can
// drop them like any layer's (keeping the layer's output and recomputing
// the steps), and no new op is needed. The steps share one product for
// the inputs of every step (x·kernel, [B, T, k·units]) and each step
// slices its row; autodiff sums the slices' gradients in place
// (graph.UnsliceAdd), so the backward pass stays linear in T. A scan op
// would build fewer nodes (a few thousand here for T = 128), but the
// planner could neither see nor drop what it keeps.
//
// Layouts are Keras': kernel [in, k·units], recurrent_kernel [units,
// k·units], gates in Keras' order along the last axis (LSTM i, f, c, o;
// GRU z, r, h). Outputs: the last step's output, or every step's
// (ReturnSequences) [B, T, units]; with ReturnState the final states
// follow (LSTM h and c, GRU and SimpleRNN h). With InitialState the layer
// takes its initial states after x (LSTM [x, h0, c0]); otherwise they are
// zero. GoBackwards reads the sequence from its end, and returns the
// outputs in the order it computed them (as Keras).
//
// Dropout multiplies the inputs and RecurrentDropout the previous state by
// one mask per sequence in training (Keras 3's cells). Not supported:
// stateful layers, masking, and unroll=False (everything is unrolled).

// Recurrent holds the fields LSTM, GRU and SimpleRNN share (Keras'
// recurrent layer arguments): nn.LSTM{Recurrent: nn.Recurrent{LayerName:
// "lstm", Units: 64, ReturnSequences: true}}.
type Recurrent struct {
	LayerName           string
	Units               int
	Activation          string // "": tanh
	RecurrentActivation string // "": sigmoid (LSTM, GRU)
	NoBias              bool   // Keras' use_bias=False
	ReturnSequences     bool
	ReturnState         bool
	GoBackwards         bool
	InitialState        bool
	Dropout             float64
	RecurrentDropout    float64
	// initializers (nil: glorot_uniform, orthogonal, zeros)
	KernelInit, RecurrentInit, BiasInit Initializer
}

func (r *Recurrent) Name() string { return r.LayerName }

func (r *Recurrent) fail(format string, args ...any) {
	panic(&graph.Error{Op: graph.OpMatMul, Owner: r.LayerName, Msg: fmt.Sprintf(format, args...)})
}

// begin checks x [B, T, in] and the initial states, declares the kernels
// and returns the inputs' projection x·kernel (+ bias) [B, T, k·units], the
// recurrent kernel [units, k·units] and the initial states (nil: zero).
func (r *Recurrent) begin(c *Context, xs []*graph.Node, k, states int, bias *graph.Node) (xw, u *graph.Node, init []*graph.Node) {
	want := 1
	if r.InitialState {
		want += states
	}
	if len(xs) != want {
		r.fail("takes %d inputs (x%s), got %d", want, cond(r.InitialState, " and the initial states"), len(xs))
	}
	x := xs[0]
	if x.Shape().Rank() != 3 {
		r.fail("needs [batch, time, features] input, got %v", x.Shape())
	}
	if r.Units <= 0 {
		r.fail("units %d must be positive", r.Units)
	}
	B, in := x.Shape()[0], x.Shape()[2]
	for _, s := range xs[1:] {
		if !s.Shape().Equal(tensor.Shape{B, r.Units}) {
			r.fail("an initial state must be [%d, %d], got %v", B, r.Units, s.Shape())
		}
	}
	init = xs[1:]
	w := c.Weight(r.LayerName+"/kernel", tensor.Shape{in, k * r.Units}, orDefault(r.KernelInit, GlorotUniform{}), true)
	u = c.Weight(r.LayerName+"/recurrent_kernel", tensor.Shape{r.Units, k * r.Units}, orDefault(r.RecurrentInit, Orthogonal{}), true)
	if c.Training && r.Dropout > 0 { // one mask per sequence, shared by every step
		seed := c.Seed ^ hashName(r.LayerName+"/dropout")
		x = graph.Mul(x, graph.DropoutMask(c.StepNode(), tensor.Shape{B, 1, in}, x.DType(), r.Dropout, seed))
	}
	xw = graph.MatMul(x, w)
	if bias != nil {
		xw = graph.Add(xw, bias)
	}
	return xw, u, init
}

// recurrentMask returns the recurrent dropout mask [B, units] of a
// sequence, or nil.
func (r *Recurrent) recurrentMask(c *Context, B int, dt tensor.DType) *graph.Node {
	if !c.Training || r.RecurrentDropout <= 0 {
		return nil
	}
	seed := c.Seed ^ hashName(r.LayerName+"/recurrent_dropout")
	return graph.DropoutMask(c.StepNode(), tensor.Shape{B, r.Units}, dt, r.RecurrentDropout, seed)
}

// steps returns the time indices in the order the layer reads them.
func (r *Recurrent) steps(T int) []int {
	ts := make([]int, T)
	for s := range ts {
		ts[s] = s
		if r.GoBackwards {
			ts[s] = T - 1 - s
		}
	}
	return ts
}

// stepInput returns row t of xw [B, T, k·units]: [B, k·units].
func stepInput(xw *graph.Node, t int) *graph.Node {
	B, n := xw.Shape()[0], xw.Shape()[2]
	return graph.Reshape(graph.Slice(xw, []int{0, t, 0}, []int{B, t + 1, n}), B, n)
}

// gate returns gate i of z [B, k·units]: [B, units].
func gate(z *graph.Node, i, units int) *graph.Node {
	return graph.Slice(z, []int{0, i * units}, []int{z.Shape()[0], (i + 1) * units})
}

// finish returns the layer's outputs from each step's output hs (in the
// order computed) and the final states.
func (r *Recurrent) finish(hs []*graph.Node, states ...*graph.Node) []*graph.Node {
	out := hs[len(hs)-1]
	if r.ReturnSequences {
		B, u := out.Shape()[0], out.Shape()[1]
		rows := make([]*graph.Node, len(hs))
		for i, h := range hs {
			rows[i] = graph.Reshape(h, B, 1, u)
		}
		out = graph.Concat(1, rows...)
	}
	if !r.ReturnState {
		return []*graph.Node{out}
	}
	return append([]*graph.Node{out}, states...)
}

func (r *Recurrent) activations() (act, rec string) {
	act, rec = r.Activation, r.RecurrentActivation
	if act == "" {
		act = "tanh"
	}
	if rec == "" {
		rec = "sigmoid"
	}
	return act, rec
}

// LSTM is Keras' LSTM (Hochreiter and Schmidhuber 1997, with the forget
// gate of Gers et al. 2000), one bias per gate: for each step,
//
//	z = x_t·kernel + h·recurrent_kernel + bias    [B, 4·units], gates i, f, c, o
//	i, f, o = σ(z_i), σ(z_f), σ(z_o)              (RecurrentActivation)
//	c = f·c + i·tanh(z_c)                         (Activation)
//	h = o·tanh(c)
//
// The bias's forget part starts at 1 (Keras' unit_forget_bias) unless
// NoUnitForgetBias. Parameters: 4·units·(in + units + 1).
type LSTM struct {
	Recurrent
	NoUnitForgetBias bool
}

// NumOutputs is 3 with ReturnState (output, h, c), else 1.
func (l *LSTM) NumOutputs() int { return 1 + 2*boolInt(l.ReturnState) }

// Forward builds the layer over x without initial states.
func (l *LSTM) Forward(c *Context, x *graph.Node) *graph.Node {
	return l.ForwardN(c, []*graph.Node{x})[0]
}

func (l *LSTM) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	defer scoped(c, l.LayerName)()
	n := l.Units
	var bias *graph.Node
	if !l.NoBias {
		init := orDefault(l.BiasInit, Constant{0})
		if l.BiasInit == nil && !l.NoUnitForgetBias {
			init = forgetBias{n}
		}
		bias = c.Weight(l.LayerName+"/bias", tensor.Shape{4 * n}, init, true)
	}
	xw, u, init := l.begin(c, xs, 4, 2, bias)
	act, rec := l.activations()
	B := xw.Shape()[0]
	var h, cs *graph.Node
	if len(init) == 2 {
		h, cs = init[0], init[1]
	}
	drop := l.recurrentMask(c, B, xw.DType())
	// With Keras' default activations a step is one op (graph.LSTMCell):
	// the same values, in one pass over the step's rows
	dt := xw.DType()
	cell := act == "tanh" && rec == "sigmoid" && (dt == tensor.Float32 || dt == tensor.Float64)
	var hs []*graph.Node
	for _, t := range l.steps(xw.Shape()[1]) {
		z := stepInput(xw, t)
		if h != nil { // a zero state adds nothing
			hr := h
			if drop != nil {
				hr = graph.Mul(hr, drop)
			}
			z = graph.Add(z, graph.MatMul(hr, u))
		}
		if cell {
			h = graph.LSTMCell(z, cs)
			cs = graph.PartOf(h, 1)
			hs = append(hs, h)
			continue
		}
		i := mustApply(rec, gate(z, 0, n))
		g := mustApply(act, gate(z, 2, n))
		o := mustApply(rec, gate(z, 3, n))
		if cs == nil {
			cs = graph.Mul(i, g)
		} else {
			f := mustApply(rec, gate(z, 1, n))
			cs = graph.Add(graph.Mul(f, cs), graph.Mul(i, g))
		}
		h = graph.Mul(o, mustApply(act, cs))
		hs = append(hs, h)
	}
	return l.finish(hs, h, cs)
}

// forgetBias is the LSTM bias with unit_forget_bias: ones for the forget
// gate's units, zeros elsewhere (filled whole: values depend on the index).
type forgetBias struct{ units int }

func (f forgetBias) Fill(_ *rand.Rand, _ tensor.Shape, dst []float64) {
	for i := range dst {
		dst[i] = 0
		if i >= f.units && i < 2*f.units {
			dst[i] = 1
		}
	}
}
func (f forgetBias) String() string { return "unit_forget_bias" }
func (forgetBias) Whole() bool      { return true }

// GRU is Keras' GRU (Cho et al. 2014) with gates z, r, h. By default
// (Keras' reset_after=True, the cuDNN form) the bias is [2,
// 3·units], an input bias and a recurrent one, and the reset gate applies
// after the recurrent product:
//
//	x_z, x_r, x_h = x_t·kernel + bias[0]
//	u_z, u_r, u_h = h·recurrent_kernel + bias[1]
//	z = σ(x_z + u_z), r = σ(x_r + u_r)
//	h' = tanh(x_h + r·u_h)
//	h = z·h + (1 - z)·h'
//
// With NoResetAfter (Keras' reset_after=False) the bias is [3·units] and
// h' = tanh(x_h + (r·h)·U_h).
type GRU struct {
	Recurrent
	NoResetAfter bool
}

// NumOutputs is 2 with ReturnState (output, h), else 1.
func (l *GRU) NumOutputs() int { return 1 + boolInt(l.ReturnState) }

// Forward builds the layer over x without an initial state.
func (l *GRU) Forward(c *Context, x *graph.Node) *graph.Node {
	return l.ForwardN(c, []*graph.Node{x})[0]
}

func (l *GRU) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	defer scoped(c, l.LayerName)()
	n := l.Units
	var inBias, recBias *graph.Node
	if !l.NoBias {
		binit := orDefault(l.BiasInit, Constant{0})
		if !l.NoResetAfter {
			b := c.Weight(l.LayerName+"/bias", tensor.Shape{2, 3 * n}, binit, true)
			inBias = graph.Reshape(graph.Slice(b, []int{0, 0}, []int{1, 3 * n}), 3*n)
			recBias = graph.Reshape(graph.Slice(b, []int{1, 0}, []int{2, 3 * n}), 3*n)
		} else {
			inBias = c.Weight(l.LayerName+"/bias", tensor.Shape{3 * n}, binit, true)
		}
	}
	xw, u, init := l.begin(c, xs, 3, 1, inBias)
	act, rec := l.activations()
	B := xw.Shape()[0]
	var h *graph.Node
	if len(init) == 1 {
		h = init[0]
	}
	var uzr, uh *graph.Node // reset_after=False: the recurrent kernel's z, r and h columns
	if l.NoResetAfter {
		uzr = graph.Slice(u, []int{0, 0}, []int{n, 2 * n})
		uh = graph.Slice(u, []int{0, 2 * n}, []int{n, 3 * n})
	}
	drop := l.recurrentMask(c, B, xw.DType())
	// With reset_after and Keras' default activations a step is one op
	// (graph.GRUCell): the same values, in one pass over the step's rows
	dt := xw.DType()
	cell := !l.NoResetAfter && act == "tanh" && rec == "sigmoid" && (dt == tensor.Float32 || dt == tensor.Float64)
	var hs []*graph.Node
	for _, t := range l.steps(xw.Shape()[1]) {
		x := stepInput(xw, t)
		hr := h
		if hr != nil && drop != nil {
			hr = graph.Mul(hr, drop)
		}
		var z, r, hh *graph.Node
		if !l.NoResetAfter {
			var uz *graph.Node // h·U + recurrent bias [B, 3·units]
			switch {
			case hr != nil:
				uz = graph.MatMul(hr, u)
				if recBias != nil {
					uz = graph.Add(uz, recBias)
				}
			case recBias != nil:
				uz = graph.BroadcastTo(recBias, B, 3*n)
			}
			if cell {
				h = graph.GRUCell(x, uz, h)
				hs = append(hs, h)
				continue
			}
			xz, xr, xh := gate(x, 0, n), gate(x, 1, n), gate(x, 2, n)
			if uz != nil {
				xz, xr = graph.Add(xz, gate(uz, 0, n)), graph.Add(xr, gate(uz, 1, n))
			}
			z, r = mustApply(rec, xz), mustApply(rec, xr)
			if uz != nil {
				xh = graph.Add(xh, graph.Mul(r, gate(uz, 2, n)))
			}
			hh = mustApply(act, xh)
		} else {
			xz, xr, xh := gate(x, 0, n), gate(x, 1, n), gate(x, 2, n)
			if hr != nil {
				uzrh := graph.MatMul(hr, uzr)
				xz, xr = graph.Add(xz, gate(uzrh, 0, n)), graph.Add(xr, gate(uzrh, 1, n))
			}
			z, r = mustApply(rec, xz), mustApply(rec, xr)
			if hr != nil {
				xh = graph.Add(xh, graph.MatMul(graph.Mul(r, hr), uh))
			}
			hh = mustApply(act, xh)
		}
		// h = z·h + (1 - z)·h' = h' + z·(h - h')
		if h == nil {
			h = graph.Sub(hh, graph.Mul(z, hh))
		} else {
			h = graph.Add(hh, graph.Mul(z, graph.Sub(h, hh)))
		}
		hs = append(hs, h)
	}
	return l.finish(hs, h)
}

// SimpleRNN is Keras' SimpleRNN: h = tanh(x_t·kernel + h·recurrent_kernel +
// bias) (Activation), bias [units].
type SimpleRNN struct{ Recurrent }

// NumOutputs is 2 with ReturnState (output, h), else 1.
func (l *SimpleRNN) NumOutputs() int { return 1 + boolInt(l.ReturnState) }

// Forward builds the layer over x without an initial state.
func (l *SimpleRNN) Forward(c *Context, x *graph.Node) *graph.Node {
	return l.ForwardN(c, []*graph.Node{x})[0]
}

func (l *SimpleRNN) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	defer scoped(c, l.LayerName)()
	var bias *graph.Node
	if !l.NoBias {
		bias = c.Weight(l.LayerName+"/bias", tensor.Shape{l.Units}, orDefault(l.BiasInit, Constant{0}), true)
	}
	xw, u, init := l.begin(c, xs, 1, 1, bias)
	act, _ := l.activations()
	var h *graph.Node
	if len(init) == 1 {
		h = init[0]
	}
	drop := l.recurrentMask(c, xw.Shape()[0], xw.DType())
	var hs []*graph.Node
	for _, t := range l.steps(xw.Shape()[1]) {
		z := stepInput(xw, t)
		if h != nil {
			hr := h
			if drop != nil {
				hr = graph.Mul(hr, drop)
			}
			z = graph.Add(z, graph.MatMul(hr, u))
		}
		h = mustApply(act, z)
		hs = append(hs, h)
	}
	return l.finish(hs, h)
}

// Bidirectional is Keras' Bidirectional: Layer (an *LSTM, *GRU or
// *SimpleRNN) reads the sequence forwards and a copy of it backwards (its
// own weights, named forward_<name> and backward_<name> under this layer's
// name, as Keras names them), and their outputs are merged: MergeMode
// "concat" (the default, along the last axis), "sum", "mul", "ave", or
// "none" (two outputs). The backward layer's sequence is reversed back
// into input order first. With ReturnState the forward layer's final
// states, then the backward one's, follow the output(s); with
// InitialState it takes x, the forward layer's initial states, then the
// backward one's.
type Bidirectional struct {
	LayerName string
	Layer     MultiLayer
	MergeMode string
}

// halves returns the forward and backward copies of the wrapped layer and
// how many states each has.
func (b *Bidirectional) halves() (fwd, bwd MultiLayer, states int, base *Recurrent) {
	name := func(r *Recurrent, dir string, back bool) {
		r.LayerName = b.LayerName + "/" + dir + "_" + r.LayerName
		r.GoBackwards = back != r.GoBackwards
	}
	switch l := b.Layer.(type) {
	case *LSTM:
		f, w := *l, *l
		name(&f.Recurrent, "forward", false)
		name(&w.Recurrent, "backward", true)
		return &f, &w, 2, &l.Recurrent
	case *GRU:
		f, w := *l, *l
		name(&f.Recurrent, "forward", false)
		name(&w.Recurrent, "backward", true)
		return &f, &w, 1, &l.Recurrent
	case *SimpleRNN:
		f, w := *l, *l
		name(&f.Recurrent, "forward", false)
		name(&w.Recurrent, "backward", true)
		return &f, &w, 1, &l.Recurrent
	}
	panic(&graph.Error{Op: graph.OpConcat, Owner: b.LayerName, Msg: fmt.Sprintf("Bidirectional wraps an LSTM, GRU or SimpleRNN, not %T", b.Layer)})
}

func (b *Bidirectional) Name() string { return b.LayerName }

// NumOutputs counts the merged output (two with MergeMode "none") and the
// states.
func (b *Bidirectional) NumOutputs() int {
	_, _, states, base := b.halves()
	n := 1
	if b.MergeMode == "none" {
		n = 2
	}
	if base.ReturnState {
		n += 2 * states
	}
	return n
}

// Forward builds the layer over x without initial states.
func (b *Bidirectional) Forward(c *Context, x *graph.Node) *graph.Node {
	return b.ForwardN(c, []*graph.Node{x})[0]
}

func (b *Bidirectional) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	fwd, bwd, states, base := b.halves()
	fin, bin := xs[:1], xs[:1]
	if base.InitialState {
		if len(xs) != 1+2*states {
			panic(&graph.Error{Op: graph.OpConcat, Owner: b.LayerName, Msg: fmt.Sprintf("takes x and %d initial states, got %d inputs", 2*states, len(xs))})
		}
		fin = append([]*graph.Node{xs[0]}, xs[1:1+states]...)
		bin = append([]*graph.Node{xs[0]}, xs[1+states:]...)
	}
	fo, bo := fwd.ForwardN(c, fin), bwd.ForwardN(c, bin)
	defer scoped(c, b.LayerName)()
	y, yb := fo[0], bo[0]
	if base.ReturnSequences { // the backward layer's outputs back in input order
		T := yb.Shape()[1]
		rows := make([]*graph.Node, T)
		for t := range rows {
			rows[t] = graph.Slice(yb, []int{0, T - 1 - t, 0}, []int{yb.Shape()[0], T - t, yb.Shape()[2]})
		}
		yb = graph.Concat(1, rows...)
	}
	var out []*graph.Node
	switch b.MergeMode {
	case "", "concat":
		out = []*graph.Node{graph.Concat(-1, y, yb)}
	case "sum":
		out = []*graph.Node{graph.Add(y, yb)}
	case "mul":
		out = []*graph.Node{graph.Mul(y, yb)}
	case "ave":
		out = []*graph.Node{graph.MulScalar(graph.Add(y, yb), 0.5)}
	case "none":
		out = []*graph.Node{y, yb}
	default:
		panic(&graph.Error{Op: graph.OpConcat, Owner: b.LayerName, Msg: fmt.Sprintf("unknown merge_mode %q (concat, sum, mul, ave, none)", b.MergeMode)})
	}
	return append(append(out, fo[1:]...), bo[1:]...)
}

var (
	_ MultiLayer = (*LSTM)(nil)
	_ MultiLayer = (*GRU)(nil)
	_ MultiLayer = (*SimpleRNN)(nil)
	_ MultiLayer = (*Bidirectional)(nil)
	_ Layer      = (*LSTM)(nil)
)

// Serializable (serialize.go).
var (
	_ = RegisterLayer("Bidirectional", &Bidirectional{})
	_ = RegisterLayer("GRU", &GRU{})
	_ = RegisterLayer("LSTM", &LSTM{})
	_ = RegisterLayer("SimpleRNN", &SimpleRNN{})
)
