package nn

import (
	"fmt"
	"math"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The language models are written in Go; model files record their sizes.
var (
	_ = RegisterModelType("GPT", &GPT{})
	_ = RegisterModelType("LSTMLM", &LSTMLM{})
)

// The reference sequence models of peers/seq.py: byte-level language
// models over windows of T tokens (input "x" int32 [T], output logits
// [T, 256] for the next byte at each position).
var (
	_ = RegisterModel("gpt", func(input tensor.Shape, classes int) (Model, error) {
		T, err := seqLength("gpt", input)
		if err != nil {
			return nil, err
		}
		return NewGPT(T, classes), nil
	})
	_ = RegisterModel("lstm", func(input tensor.Shape, classes int) (Model, error) {
		T, err := seqLength("lstm", input)
		if err != nil {
			return nil, err
		}
		return NewLSTMLM(T, classes), nil
	})
)

// seqLength returns T for examples of shape [T] (token ids).
func seqLength(model string, input tensor.Shape) (int, error) {
	if input.Rank() != 1 || input[0] < 1 {
		return 0, fmt.Errorf("nn: the %s needs windows of tokens [T], got examples of shape %v", model, input)
	}
	return input[0], nil
}

// GPT is the reference decoder-only transformer (GPT-2's pre-LayerNorm
// block, Radford et al. 2019): token embedding [Vocab, Dim] plus learned
// positions [Context, Dim]; Blocks blocks of LayerNorm -> causal
// MultiHeadAttention (Heads heads of Dim/Heads, projections with biases)
// -> residual add -> LayerNorm -> dense Hidden with exact GELU -> dense
// Dim -> residual add; a final LayerNorm and an untied dense head to Vocab
// logits. LayerNorm epsilon 1e-5 (PyTorch's); every dense and embedding
// weight N(0, 0.02), biases 0. NewGPT(128, 256) has 875,520 parameters,
// as peers/seq.py's gpt.
type GPT struct {
	Vocab, Context, Dim, Heads, Blocks, Hidden int
}

// NewGPT returns the reference gpt for windows of T tokens over a
// vocabulary of vocab.
func NewGPT(T, vocab int) *GPT {
	return &GPT{Vocab: vocab, Context: T, Dim: 128, Heads: 4, Blocks: 4, Hidden: 512}
}

// Inputs is "x", int32 [Context].
func (m *GPT) Inputs() []Input {
	return []Input{{Name: "x", Shape: tensor.Shape{m.Context}, DType: tensor.Int32}}
}

// gptInit is GPT-2's initializer of every weight matrix.
var gptInit = RandomNormal{Stddev: 0.02}

// attention returns block b's attention layer.
func (m *GPT) attention(b int) *MultiHeadAttention {
	return &MultiHeadAttention{LayerName: fmt.Sprintf("block%d/attention", b), NumHeads: m.Heads, KeyDim: m.Dim / m.Heads,
		UseCausalMask: true, KernelInit: gptInit}
}

// Build builds the model over x [B, Context] -> logits [B, Context, Vocab].
func (m *GPT) Build(c *Context, inputs []*graph.Node) []*graph.Node {
	return []*graph.Node{m.build(c, inputs[0], nil, nil)}
}

// build builds the model over tokens x [B, T] at positions pos (nil: 0..T-1
// as the input's own positions), with the attention layers as caches
// says (nil: no cache).
func (m *GPT) build(c *Context, x, pos *graph.Node, caches []*KVCache) *graph.Node {
	tok := &Embedding{LayerName: "token_embedding", InputDim: m.Vocab, OutputDim: m.Dim, Init: gptInit}
	h := c.Call(tok, x)
	if pos == nil {
		h = c.Call(&PositionEmbedding{LayerName: "position_embedding", SequenceLength: m.Context, Add: true, Init: gptInit}, h)
	} else { // a decoding step: the rows of its positions
		c.G.PushScope("position_embedding")
		e := c.Weight("position_embedding/embeddings", tensor.Shape{m.Context, m.Dim}, gptInit, true)
		h = c.Boundary("position_embedding", graph.Add(h, graph.Gather(e, pos)), true)
		c.G.PopScope()
	}
	for b := 0; b < m.Blocks; b++ {
		name := fmt.Sprintf("block%d", b)
		a := m.attention(b)
		if caches != nil {
			a.Cache = caches[b]
		}
		y := c.Call(&LayerNormalization{LayerName: name + "/ln1", Epsilon: 1e-5, Fused: true}, h)
		y = c.Call(a, y)
		h = c.Boundary(name+"/add", graph.Add(h, y), true)
		y = c.Call(&LayerNormalization{LayerName: name + "/ln2", Epsilon: 1e-5, Fused: true}, h)
		y = c.Call(geluDense{&Dense{LayerName: name + "/mlp_in", Units: m.Hidden, KernelInit: gptInit}}, y)
		y = c.Call(&Dense{LayerName: name + "/mlp_out", Units: m.Dim, KernelInit: gptInit}, y)
		h = c.Boundary(name+"/add_1", graph.Add(h, y), true)
	}
	h = c.Call(&LayerNormalization{LayerName: "ln_f", Epsilon: 1e-5, Fused: true}, h)
	head := &Dense{LayerName: "head", Units: m.Vocab, KernelInit: gptInit}
	return c.Boundary(head.Name(), head.Forward(c, h), false)
}

// AtLength returns the model over windows of T <= Context tokens, with the
// same layers and weights (the first T rows of the position table): a
// bucket of a run over sequences of varying length.
func (m *GPT) AtLength(T int) (Model, error) {
	if T < 1 || T > m.Context {
		return nil, fmt.Errorf("nn: the gpt reads windows of at most %d tokens (its position table), not %d", m.Context, T)
	}
	return atLength{m, T}, nil
}

// Decoder returns the model of one decoding step of batch 1 with a key and
// value cache of Context positions in each block (see GPTDecoder).
func (m *GPT) Decoder() Model { return &GPTDecoder{GPT: m} }

// GPTDecoder is one step of decoding with m's weights: it takes token "x"
// int32 [1] at position "pos" (int32, [1]) and "mask" (bool [1, Context]:
// the positions decoded so far, this one included), writes the token's keys
// and values into the caches (variables cache/block<i>/key and
// cache/block<i>/value, [1, Context, Heads, Dim/Heads]) and returns the
// logits [1, Vocab] of the next token. A token costs O(Context).
type GPTDecoder struct{ *GPT }

// Inputs are "x", "pos" and "mask".
func (d *GPTDecoder) Inputs() []Input {
	return []Input{{Name: "x", Shape: tensor.Shape{1}, DType: tensor.Int32},
		{Name: "pos", Shape: nil, DType: tensor.Int32},
		{Name: "mask", Shape: tensor.Shape{1, d.Context}, DType: tensor.Bool}}
}

// Build builds the step over x [1, 1], pos [1] and mask [1, 1, Context].
func (d *GPTDecoder) Build(c *Context, inputs []*graph.Node) []*graph.Node {
	x, pos, mask := inputs[0], inputs[1], inputs[2]
	if x.Shape()[0] != 1 {
		panic(&graph.Error{Op: graph.OpCacheWrite, Msg: fmt.Sprintf("the gpt decodes a batch of 1, got %d", x.Shape()[0])})
	}
	at := graph.Reshape(pos) // the scalar position
	caches := make([]*KVCache, d.Blocks)
	hd := d.Dim / d.Heads
	for b := range caches {
		shape := tensor.Shape{1, d.Context, d.Heads, hd}
		caches[b] = &KVCache{
			Keys:   c.Weight(fmt.Sprintf("cache/block%d/key", b), shape, Constant{0}, false),
			Values: c.Weight(fmt.Sprintf("cache/block%d/value", b), shape, Constant{0}, false),
			Pos:    at, Mask: mask,
		}
	}
	logits := d.build(c, x, pos, caches) // [1, 1, Vocab]
	return []*graph.Node{graph.Reshape(logits, 1, d.Vocab)}
}

// LSTMLM is the reference LSTM language model: embedding [Vocab, 128] ->
// LSTM(Units) over the window -> dense Vocab logits at every step. Keras'
// LSTM has one bias per gate, so NewLSTMLM(128, 256) has 492,800
// parameters (peers/seq.py's PyTorch LSTM, with two, has 493,824). Its
// initial weights follow PyTorch's defaults, as the peer's: the embedding
// N(0, 1), the LSTM's weights and bias U(-1/√Units, 1/√Units) (PyTorch
// sums two such biases), the dense head U(-1/√Units, 1/√Units).
type LSTMLM struct {
	Vocab, Context, Embed, Units int
}

// NewLSTMLM returns the reference lstm for windows of T tokens.
func NewLSTMLM(T, vocab int) *LSTMLM {
	return &LSTMLM{Vocab: vocab, Context: T, Embed: 128, Units: 256}
}

// Inputs is "x", int32 [Context].
func (m *LSTMLM) Inputs() []Input {
	return []Input{{Name: "x", Shape: tensor.Shape{m.Context}, DType: tensor.Int32}}
}

func (m *LSTMLM) layers(T int, state bool) (*Embedding, *LSTM, *Dense) {
	k := 1 / math.Sqrt(float64(m.Units))
	u := Uniform{-k, k}
	l := &LSTM{Recurrent: Recurrent{LayerName: "lstm", Units: m.Units, ReturnSequences: true,
		ReturnState: state, InitialState: state, KernelInit: u, RecurrentInit: u, BiasInit: u}, NoUnitForgetBias: true}
	return &Embedding{LayerName: "embedding", InputDim: m.Vocab, OutputDim: m.Embed, Init: RandomNormal{Stddev: 1}},
		l, &Dense{LayerName: "head", Units: m.Vocab, KernelInit: u, BiasInit: u}
}

// Build builds the model over x [B, Context] -> logits [B, Context, Vocab].
func (m *LSTMLM) Build(c *Context, inputs []*graph.Node) []*graph.Node {
	emb, lstm, head := m.layers(m.Context, false)
	h := c.Call(emb, inputs[0])
	h = c.Call(lstm, h)
	return []*graph.Node{c.Boundary(head.Name(), head.Forward(c, h), false)}
}

// AtLength returns the model over windows of T tokens, with the same
// layers and weights (a recurrence reads any length).
func (m *LSTMLM) AtLength(T int) (Model, error) {
	if T < 1 {
		return nil, fmt.Errorf("nn: a window of %d tokens", T)
	}
	return atLength{m, T}, nil
}

// atLength is a language model over windows of t tokens: its input "x" is
// int32 [t]; it builds as the model does, over that input.
type atLength struct {
	Model
	t int
}

func (m atLength) Inputs() []Input {
	in := append([]Input(nil), m.Model.Inputs()...)
	in[0].Shape = tensor.Shape{m.t}
	return in
}

// LengthModel is a model over sequences whose length may vary: AtLength
// gives it over windows of T tokens, with the same weights.
type LengthModel interface {
	Model
	AtLength(T int) (Model, error)
}

// Decoder returns the model of one decoding step of batch 1: it takes token
// "x" int32 [1], updates the LSTM's state (variables state/h and state/c,
// [1, Units]) and returns the logits [1, Vocab] of the next token.
func (m *LSTMLM) Decoder() Model {
	return &ModelFunc{In: []Input{{Name: "x", Shape: tensor.Shape{1}, DType: tensor.Int32}},
		Fn: func(c *Context, inputs []*graph.Node) []*graph.Node {
			emb, lstm, head := m.layers(1, true)
			hv := c.Weight("state/h", tensor.Shape{1, m.Units}, Constant{0}, false)
			cv := c.Weight("state/c", tensor.Shape{1, m.Units}, Constant{0}, false)
			x := c.Call(emb, inputs[0])
			outs := lstm.ForwardN(c, []*graph.Node{x, hv, cv}) // [1, 1, Units], h, c
			graph.Assign(hv, outs[1])
			graph.Assign(cv, outs[2])
			return []*graph.Node{graph.Reshape(head.Forward(c, outs[0]), 1, m.Vocab)}
		}}
}

// geluDense is a Dense layer followed by the exact GELU as one op
// (graph.Gelu): what Dense with Activation "gelu" computes, keeping one
// value of the layer's size for the backward pass instead of three.
type geluDense struct{ *Dense }

func (l geluDense) Forward(c *Context, x *graph.Node) *graph.Node {
	y := l.Dense.Forward(c, x)
	c.G.PushScope(l.LayerName)
	defer c.G.PopScope()
	return graph.Gelu(y)
}
