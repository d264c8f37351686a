package nn

import (
	"fmt"
	"math"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// MultiHeadAttention is Keras' MultiHeadAttention (Vaswani et al. 2017,
// §3.2.2) over rank-3 inputs: query [B, Tq, dq], value [B, Tk, dv] and key
// [B, Tk, dk] (the value when not given) -> [B, Tq, OutputDim].
//
// Its weights have Keras' names and layouts: query/kernel [dq, H, KeyDim]
// and query/bias [H, KeyDim], key/kernel [dk, H, KeyDim] and key/bias,
// value/kernel [dv, H, ValueDim] and value/bias [H, ValueDim],
// attention_output/kernel [H, ValueDim, OutputDim] and attention_output/bias
// [OutputDim]. The scores are scaled by 1/√KeyDim.
//
// By default the attention runs as graph.Attention, the memory-efficient
// op: the backward pass keeps each row's log-sum-exp, never the Tq×Tk
// probabilities. With Naive (or a ValueDim other than KeyDim, or
// ReturnScores) it is built from products and a softmax, as Keras
// computes it, keeping the probabilities.
//
// ForwardN takes query, then value (absent: self-attention on the query),
// then key if KeyInput, then attention_mask if MaskInput: [B, Tq, Tk] (or
// broadcastable to it, e.g. [B, 1, Tk]), true (nonzero) where query i may
// see key j. UseCausalMask also hides keys j > i (Keras' use_causal_mask,
// aligned top left). Dropout drops attention probabilities in training.
//
// Where Keras differs: a query row that sees no key at all gets a zero
// output here (the memory-efficient kernel's convention); Keras' masked
// softmax adds -1e9 to hidden scores and so averages every value instead.
// The naive path follows Keras.
type MultiHeadAttention struct {
	LayerName string
	NumHeads  int
	KeyDim    int
	ValueDim  int // 0: KeyDim
	OutputDim int // Keras' output_shape; 0: the query's last dimension
	Dropout   float64
	NoBias    bool // Keras' use_bias=False

	UseCausalMask        bool
	KeyInput, MaskInput  bool
	ReturnScores         bool // a second output: the probabilities [B, H, Tq, Tk] (naive path)
	Naive                bool
	KernelInit, BiasInit Initializer // nil: glorot_uniform, zeros

	// Cache, when set, makes the layer a step of decoding: the new keys and
	// values are written into the cache at Cache.Pos and the queries attend
	// over the whole cache (Cache.Mask says which positions hold keys).
	Cache *KVCache
}

// KVCache is the key and value cache of a decoding MultiHeadAttention: each
// step computes the keys and values of its new positions only and attends
// over the cache, so a new token costs O(L) instead of O(L²).
type KVCache struct {
	// Keys [B, L, H, KeyDim] and Values [B, L, H, ValueDim]: variables
	// holding the keys and values of the positions decoded so far.
	Keys, Values *graph.Node
	// Pos is an int32 scalar, the position of the step's first query.
	Pos *graph.Node
	// Mask [B, Tq, L] says which cached positions each query sees (those
	// written so far, up to its own).
	Mask *graph.Node
}

func (l *MultiHeadAttention) Name() string { return l.LayerName }

// NumOutputs is 2 with ReturnScores, else 1.
func (l *MultiHeadAttention) NumOutputs() int {
	if l.ReturnScores {
		return 2
	}
	return 1
}

func (l *MultiHeadAttention) fail(format string, args ...any) {
	panic(&graph.Error{Op: graph.OpAttention, Owner: l.LayerName, Msg: fmt.Sprintf(format, args...)})
}

// Forward is self-attention of x (a Layer in a Sequential model).
func (l *MultiHeadAttention) Forward(c *Context, x *graph.Node) *graph.Node {
	return l.ForwardN(c, []*graph.Node{x})[0]
}

// ForwardN builds the layer over query, value, key and mask (see the type).
func (l *MultiHeadAttention) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	defer scoped(c, l.LayerName)()
	want := 1 + boolInt(l.KeyInput) + boolInt(l.MaskInput)
	if len(xs) != want && len(xs) != want+1 {
		l.fail("takes query, value%s%s: %d or %d inputs, got %d", cond(l.KeyInput, ", key"), cond(l.MaskInput, ", attention_mask"), want, want+1, len(xs))
	}
	query := xs[0]
	rest := xs[1:]
	value := query
	if len(xs) == want+1 {
		value, rest = rest[0], rest[1:]
	}
	key := value
	if l.KeyInput {
		key, rest = rest[0], rest[1:]
	}
	var mask *graph.Node
	if l.MaskInput {
		mask = rest[0]
	}
	for _, x := range []*graph.Node{query, value, key} {
		if x.Shape().Rank() != 3 {
			l.fail("needs [batch, time, features] inputs, got %v", x.Shape())
		}
	}
	if l.NumHeads <= 0 || l.KeyDim <= 0 {
		l.fail("num_heads %d and key_dim %d must be positive", l.NumHeads, l.KeyDim)
	}
	H, dk, dv := l.NumHeads, l.KeyDim, l.ValueDim
	if dv == 0 {
		dv = dk
	}
	dout := l.OutputDim
	if dout == 0 {
		dout = query.Shape()[2]
	}
	B, Tq, Tk := query.Shape()[0], query.Shape()[1], value.Shape()[1]
	if key.Shape()[1] != Tk || key.Shape()[0] != B || value.Shape()[0] != B {
		l.fail("key %v and value %v must have the same batch and length (query %v)", key.Shape(), value.Shape(), query.Shape())
	}
	q := l.project(c, "query", query, H, dk)
	k := l.project(c, "key", key, H, dk)
	v := l.project(c, "value", value, H, dv)
	if ch := l.Cache; ch != nil { // a decoding step: attend over the cache
		kc := graph.CacheWrite(ch.Keys, k, ch.Pos)
		vc := graph.CacheWrite(ch.Values, v, ch.Pos)
		graph.Assign(ch.Keys, kc)
		graph.Assign(ch.Values, vc)
		k, v, Tk = kc, vc, kc.Shape()[1]
		mask = ch.Mask
	}
	if mask != nil {
		mask = attentionMask(mask, B, Tq, Tk)
	}
	rate := 0.0
	if c.Training {
		rate = l.Dropout
	}
	var o, scores *graph.Node
	if l.Naive || l.ReturnScores || dv != dk {
		o, scores = l.naive(c, q, k, v, mask, rate)
	} else {
		opt := graph.AttentionOptions{Scale: 1 / math.Sqrt(float64(dk)), Mask: mask}
		if l.UseCausalMask && l.Cache == nil { // (a cache's mask says what each query sees)
			opt.Causal = graph.CausalTopLeft
		}
		if rate > 0 {
			opt.DropoutRate, opt.DropoutSeed, opt.Step = rate, c.Seed^hashName(l.LayerName), c.StepNode()
		}
		o = graph.Attention(q, k, v, opt)
	}
	// o [B, Tq, H, dv] · attention_output/kernel [H, dv, dout] -> [B, Tq, dout]
	c.G.PushScope("attention_output")
	w := c.Weight(l.LayerName+"/attention_output/kernel", tensor.Shape{H, dv, dout}, orDefault(l.KernelInit, GlorotUniform{}), true)
	y := graph.MatMul(graph.Reshape(o, B, Tq, H*dv), graph.Reshape(w, H*dv, dout))
	if !l.NoBias {
		y = graph.Add(y, c.Weight(l.LayerName+"/attention_output/bias", tensor.Shape{dout}, orDefault(l.BiasInit, Constant{0}), true))
	}
	c.G.PopScope()
	if l.ReturnScores {
		return []*graph.Node{y, scores}
	}
	return []*graph.Node{y}
}

// project is one of the query, key and value projections (Keras'
// EinsumDense "abc,cde->abde"): x [B, T, d] -> [B, T, H, dim].
func (l *MultiHeadAttention) project(c *Context, name string, x *graph.Node, H, dim int) *graph.Node {
	c.G.PushScope(name)
	defer c.G.PopScope()
	B, T, d := x.Shape()[0], x.Shape()[1], x.Shape()[2]
	w := c.Weight(l.LayerName+"/"+name+"/kernel", tensor.Shape{d, H, dim}, orDefault(l.KernelInit, GlorotUniform{}), true)
	y := graph.MatMul(x, graph.Reshape(w, d, H*dim))
	if !l.NoBias {
		b := c.Weight(l.LayerName+"/"+name+"/bias", tensor.Shape{H, dim}, orDefault(l.BiasInit, Constant{0}), true)
		y = graph.Add(y, graph.Reshape(b, H*dim))
	}
	return graph.Reshape(y, B, T, H, dim)
}

// attentionMask returns m as a Bool [B, Tq, Tk] (nonzero: attend).
func attentionMask(m *graph.Node, B, Tq, Tk int) *graph.Node {
	if m.DType() != tensor.Bool {
		m = graph.NotEqual(m, m.Graph().Scalar(0, m.DType()))
	}
	if m.Shape().Rank() == 2 { // [B, Tk]: a padding mask of the keys
		m = graph.Reshape(m, B, 1, Tk)
	}
	return graph.BroadcastTo(m, B, Tq, Tk)
}

// naive is attention as Keras builds it: the scores, a masked softmax
// (hidden scores get -1e9 added), dropout and the product with the values;
// it returns the output [B, Tq, H, dv] and the probabilities [B, H, Tq, Tk].
func (l *MultiHeadAttention) naive(c *Context, q, k, v, mask *graph.Node, rate float64) (o, probs *graph.Node) {
	B, Tq, Tk := q.Shape()[0], q.Shape()[1], k.Shape()[1]
	qt := graph.Transpose(graph.MulScalar(q, 1/math.Sqrt(float64(q.Shape()[3]))), 0, 2, 1, 3) // [B, H, Tq, dk]
	kt := graph.Transpose(k, 0, 2, 1, 3)                                                      // [B, H, Tk, dk]
	vt := graph.Transpose(v, 0, 2, 1, 3)                                                      // [B, H, Tk, dv]
	s := graph.MatMulT(qt, kt, false, true)                                                   // [B, H, Tq, Tk]
	if l.UseCausalMask && l.Cache == nil {
		causal := tensor.New(tensor.Bool, tensor.Shape{Tq, Tk})
		for i := 0; i < Tq; i++ {
			for j := 0; j <= i && j < Tk; j++ {
				causal.Bytes()[i*Tk+j] = 1
			}
		}
		cm := c.G.Constant(causal)
		if mask == nil {
			mask = graph.BroadcastTo(cm, B, Tq, Tk)
		} else {
			mask = graph.Where(cm, mask, cm) // mask and causal
		}
	}
	if mask != nil {
		// Keras' masked softmax: (1 - mask)·(-1e9) added to the scores
		keep := graph.Cast(graph.Reshape(mask, B, 1, Tq, Tk), s.DType())
		s = graph.Add(s, graph.MulScalar(graph.Sub(graph.ScalarLike(keep, 1), keep), -1e9))
	}
	probs = graph.Softmax(s)
	p := probs
	if rate > 0 {
		p = graph.Mul(p, graph.DropoutMask(c.StepNode(), p.Shape(), p.DType(), rate, c.Seed^hashName(l.LayerName)))
	}
	return graph.Transpose(graph.MatMul(p, vt), 0, 2, 1, 3), probs
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func cond(b bool, s string) string {
	if b {
		return s
	}
	return ""
}

var _ MultiLayer = (*MultiHeadAttention)(nil)

// Serializable (serialize.go).
var (
	_ = RegisterLayer("MultiHeadAttention", &MultiHeadAttention{})
)
