package onnx

import (
	"math/rand/v2"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// seqModels returns the sequence models the runtime tests export: the
// sequence ops one by one at odd sizes (float32 and float64), small
// instances of the reference gpt and lstm language models, and a GRU
// stack.
func seqModels() []testModel {
	return []testModel{
		{name: "sequence_ops", build: sequenceOps(tensor.Float32), feed: feedSequence},
		{name: "sequence_ops_f64", build: sequenceOps(tensor.Float64), feed: feedSequence},
		{name: "gpt", build: languageModel(&nn.GPT{Vocab: 13, Context: 7, Dim: 12, Heads: 3, Blocks: 2, Hidden: 20}), feed: feedTokens(13)},
		{name: "lstm", build: languageModel(&nn.LSTMLM{Vocab: 11, Context: 6, Embed: 5, Units: 7}), feed: feedTokens(11)},
		// Keras' default GRU (reset_after), its steps graph.GRUCell: one
		// returning every step's output, one read backwards
		{name: "gru", build: sequential(&nn.Sequential{Name: "gru", InputShape: tensor.Shape{6, 4}, Layers: []nn.Layer{
			&nn.GRU{Recurrent: nn.Recurrent{LayerName: "gru", Units: 5, ReturnSequences: true}},
			&nn.GRU{Recurrent: nn.Recurrent{LayerName: "gru_1", Units: 3, GoBackwards: true}},
			&nn.Dense{LayerName: "dense", Units: 2},
		}})},
	}
}

// languageModel builds m's inference graph over input "x" int32 [B, T];
// its output "logits" is [B, T, Vocab].
func languageModel(m nn.Model) func(b int) (*graph.Graph, []*graph.Node, []Output) {
	return func(b int) (*graph.Graph, []*graph.Node, []Output) {
		g := graph.New()
		ctx := nn.NewContext(g, false, 0)
		in := m.Inputs()[0]
		x := g.Input(in.Name, in.Type(), append(tensor.Shape{b}, in.Shape...))
		return g, []*graph.Node{x}, []Output{{Name: "logits", Node: m.Build(ctx, []*graph.Node{x})[0]}}
	}
}

// feedTokens fills int32 inputs with ids in [0, vocab).
func feedTokens(vocab int) func(*rand.Rand, *graph.Node, tensor.Tensor) {
	return func(rng *rand.Rand, _ *graph.Node, t tensor.Tensor) {
		for i, v := 0, t.Int32s(); i < len(v); i++ {
			v[i] = int32(rng.IntN(vocab))
		}
	}
}

// sequenceOps: layer normalization with its parts read, gelu (float32
// only: onnxruntime's CPU provider has no float64 Erf), attention in each causal mode, with a bool and a uint8 mask, over as
// many keys as queries, more and fewer (H = 3 heads of D = 5), and two
// LSTM steps of 3 units, the first without a previous cell state, the
// second reading the first's c (its part 1) and h, with each step's c and
// the second's activations (part 2) read too, and three GRU steps of 3
// units (gruSteps), with the last one's activations (part 1) read too.
//
//	x [B, 5, 6], y [B, 7, 6], z [B, 3, 6] (dt)
//	mask [B, 5, 5] bool, mask8 [B, 5, 7] uint8 (nonzero: attend); some
//	rows see no key
func sequenceOps(dt tensor.DType) func(b int) (*graph.Graph, []*graph.Node, []Output) {
	return func(b int) (*graph.Graph, []*graph.Node, []Output) {
		g := graph.New()
		x := g.Input("x", dt, tensor.Shape{b, 5, 6})
		y := g.Input("y", dt, tensor.Shape{b, 7, 6})
		z := g.Input("z", dt, tensor.Shape{b, 3, 6})
		mask := g.Input("mask", tensor.Bool, tensor.Shape{b, 5, 5})
		mask8 := g.Input("mask8", tensor.Uint8, tensor.Shape{b, 5, 7})
		g.PushScope("seq")
		gamma := g.Param("seq/gamma", dt, tensor.Shape{6})
		beta := g.Param("seq/beta", dt, tensor.Shape{6})
		ln := graph.LayerNorm(x, gamma, beta, 1e-3)
		gelu := ln
		if dt == tensor.Float32 { // onnxruntime's CPU provider has no float64 Erf
			gelu = graph.Gelu(ln)
		}
		heads := func(name string, v *graph.Node) *graph.Node { // [B, T, 6] -> [B, T, 3, 5]
			w := g.Param("seq/"+name, dt, tensor.Shape{6, 15})
			s := v.Shape()
			return graph.Reshape(graph.MatMul(v, w), s[0], s[1], 3, 5)
		}
		q, kx, vx := heads("q", gelu), heads("kx", x), heads("vx", x)
		ky, vy := heads("ky", y), heads("vy", y)
		kz, vz := heads("kz", z), heads("vz", z)
		flat := func(o *graph.Node) *graph.Node { return graph.Reshape(o, b, 5, 15) }
		masked := graph.Attention(q, kx, vx, graph.AttentionOptions{Mask: mask})
		topLeft := graph.Attention(q, ky, vy, graph.AttentionOptions{Causal: graph.CausalTopLeft, Scale: 0.3})
		bottomRight := graph.Attention(q, ky, vy, graph.AttentionOptions{Causal: graph.CausalBottomRight})
		fewer := graph.Attention(q, kz, vz, graph.AttentionOptions{Causal: graph.CausalBottomRight}) // rows 0, 1 see no key
		both := graph.Attention(q, ky, vy, graph.AttentionOptions{Causal: graph.CausalTopLeft, Mask: mask8})
		h1, h2 := lstmSteps(g, graph.Reshape(x, b, 30), graph.Reshape(y, b, 42), 3)
		g1, g2, g3 := gruSteps(g, graph.Reshape(x, b, 30), graph.Reshape(y, b, 42), graph.Reshape(z, b, 18), 3)
		g.PopScope()
		outs := []Output{
			{Name: "layer_norm", Node: ln}, {Name: "mean", Node: graph.PartOf(ln, 1)}, {Name: "rstd", Node: graph.PartOf(ln, 2)},
			{Name: "masked", Node: flat(masked)}, {Name: "causal_top_left", Node: flat(topLeft)},
			{Name: "causal_bottom_right", Node: flat(bottomRight)}, {Name: "causal_fewer_keys", Node: flat(fewer)},
			{Name: "causal_and_mask", Node: flat(both)},
			{Name: "lstm_h1", Node: h1}, {Name: "lstm_c1", Node: graph.PartOf(h1, 1)},
			{Name: "lstm_h2", Node: h2}, {Name: "lstm_c2", Node: graph.PartOf(h2, 1)}, {Name: "lstm_acts2", Node: graph.PartOf(h2, 2)},
			{Name: "gru_h1", Node: g1}, {Name: "gru_h2", Node: g2}, {Name: "gru_h3", Node: g3}, {Name: "gru_acts3", Node: graph.PartOf(g3, 1)},
			{Name: "gru_acts1", Node: graph.PartOf(g1, 1)}, // u_h zeros: a step without u
		}
		if gelu != ln {
			outs = append(outs, Output{Name: "gelu", Node: gelu})
		}
		return g, []*graph.Node{x, y, z, mask, mask8}, outs
	}
}

// lstmSteps builds two LSTM steps of n units over x1 [B, d1] and x2
// [B, d2]: h1 = LSTMCell(x1·w1 + b1) with no previous state, h2 =
// LSTMCell(x2·w2 + h1·u + b2, c1), c1 being h1's part 1.
func lstmSteps(g *graph.Graph, x1, x2 *graph.Node, n int) (h1, h2 *graph.Node) {
	dt := x1.DType()
	z := func(name string, x *graph.Node) *graph.Node {
		w := g.Param("lstm/w"+name, dt, tensor.Shape{x.Shape()[1], 4 * n})
		b := g.Param("lstm/b"+name, dt, tensor.Shape{4 * n})
		return graph.Add(graph.MatMul(x, w), b)
	}
	h1 = graph.LSTMCell(z("1", x1), nil)
	u := g.Param("lstm/u", dt, tensor.Shape{n, 4 * n})
	h2 = graph.LSTMCell(graph.Add(z("2", x2), graph.MatMul(h1, u)), graph.PartOf(h1, 1))
	return h1, h2
}

// gruSteps builds three GRU steps of n units over x1 [B, d1], x2 [B, d2]
// and x3 [B, d3], one of each form: h1 = GRUCell(x1·w1 + b1) with neither
// a recurrent projection nor a previous state, h2 = GRUCell(x2·w2 + b2,
// h1·u + bu) without a previous state, and h3 = GRUCell(x3·w3 + b3,
// h2·u + bu, h2).
func gruSteps(g *graph.Graph, x1, x2, x3 *graph.Node, n int) (h1, h2, h3 *graph.Node) {
	dt := x1.DType()
	xw := func(name string, x *graph.Node) *graph.Node {
		w := g.Param("gru/w"+name, dt, tensor.Shape{x.Shape()[1], 3 * n})
		b := g.Param("gru/b"+name, dt, tensor.Shape{3 * n})
		return graph.Add(graph.MatMul(x, w), b)
	}
	u := g.Param("gru/u", dt, tensor.Shape{n, 3 * n})
	bu := g.Param("gru/bu", dt, tensor.Shape{3 * n})
	hu := func(h *graph.Node) *graph.Node { return graph.Add(graph.MatMul(h, u), bu) }
	h1 = graph.GRUCell(xw("1", x1), nil, nil)
	h2 = graph.GRUCell(xw("2", x2), hu(h1), nil)
	h3 = graph.GRUCell(xw("3", x3), hu(h2), h2)
	return h1, h2, h3
}

// feedSequence fills sequenceOps' inputs: N(0, 2) values (layer norm's
// rows need a spread), masks that attend 70% of the time with the last
// query of each example seeing no key.
func feedSequence(rng *rand.Rand, in *graph.Node, t tensor.Tensor) {
	switch in.DType() {
	case tensor.Bool, tensor.Uint8:
		s := in.Shape()
		tk := s[2]
		b := t.Bytes()
		for i := range b {
			if rng.Float64() < 0.7 {
				b[i] = byte(1 + rng.IntN(2)) // uint8 2 attends too
				if in.DType() == tensor.Bool {
					b[i] = 1
				}
			}
			if row := i / tk; row%s[1] == s[1]-1 {
				b[i] = 0
			}
		}
	default:
		for i := 0; i < t.Len(); i++ {
			t.SetFloat64At(i, 2*rng.NormFloat64())
		}
	}
}
