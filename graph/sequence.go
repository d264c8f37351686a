package graph

import (
	"math"
	"slices"

	"github.com/headroom-ml/headroom/tensor"
)

// Sequence ops: attention (the memory-efficient kernels of package
// kernels: forward keeps each row's log-sum-exp, backward recomputes the
// probabilities block by block), further outputs of multi-output ops
// (Part), the in-place accumulation of slice gradients that unrolled
// recurrence needs (UnsliceAdd), and the key/value cache of a decoding
// step (CacheWrite).
//
// A multi-output op is one node (its first output) and one Part node per
// further output, built by its builder right after it. One instruction
// computes them all: the planner gives each part a buffer of its own that
// the op's instruction writes (compile.Instr.Parts), and a part nobody
// reads is not computed into the arena (the kernel uses workspace).

// Causal says which keys a query of an attention sees, besides its mask.
type Causal uint8

// The causal modes. With Tq queries over Tk keys:
const (
	NotCausal Causal = iota
	// CausalBottomRight: query i sees keys j <= i + Tk - Tq, as
	// FlashAttention 2.1 and PyTorch's causal_lower_right align it; the
	// last query sees every key, as a block of queries appended to a cache
	// of Tk - Tq keys does.
	CausalBottomRight
	// CausalTopLeft: query i sees keys j <= i, as Keras' use_causal_mask
	// and PyTorch's is_causal. The two agree when Tq == Tk.
	CausalTopLeft
)

// AttentionOptions are the options of Attention.
type AttentionOptions struct {
	// Scale multiplies the scores q·k (0: 1/√D).
	Scale  float64
	Causal Causal
	// Mask, when set, is Bool or Uint8 [B, Tq, Tk]: query i of example b
	// sees key j only where Mask[b, i, j] is nonzero (Keras'
	// attention_mask). A query that sees no key gets a zero output.
	Mask *Node
	// DropoutRate in [0, 1) drops each probability with that probability
	// and scales the rest by 1/(1-rate), with a mask that is a function of
	// DropoutSeed and Step (an int64 scalar, required when the rate is
	// positive), so the backward pass regenerates it.
	DropoutRate float64
	DropoutSeed uint64
	Step        *Node
}

// Attention returns softmax(Scale·q·kᵀ + mask)·v per example and head
// (Vaswani et al. 2017, §3.2): q [B, Tq, H, D], k and v [B, Tk, H, D] ->
// [B, Tq, H, D], without materializing the Tq×Tk probabilities. Its part 1
// (AttentionLSE) is each row's log-sum-exp [B, H, Tq], what the backward
// pass keeps instead of the probabilities (Rabe and Staats 2021; Dao et
// al. 2022).
func Attention(q, k, v *Node, opt AttentionOptions) *Node {
	g := q.g
	const op = OpAttention
	if q.dtype != tensor.Float32 && q.dtype != tensor.Float64 {
		g.throw(op, "needs float32 or float64, got %s", q.dtype)
	}
	if k.dtype != q.dtype || v.dtype != q.dtype {
		g.throw(op, "dtype mismatch: q %s, k %s, v %s", q.dtype, k.dtype, v.dtype)
	}
	if q.shape.Rank() != 4 || k.shape.Rank() != 4 || !k.shape.Equal(v.shape) ||
		q.shape[0] != k.shape[0] || q.shape[2] != k.shape[2] || q.shape[3] != k.shape[3] {
		g.throw(op, "q %v, k %v and v %v must be [B, Tq, H, D], [B, Tk, H, D], [B, Tk, H, D]", q.shape, k.shape, v.shape)
	}
	B, Tq, Tk, D := q.shape[0], q.shape[1], k.shape[1], q.shape[3]
	at := Attr{Scale: opt.Scale, Causal: opt.Causal, Rate: opt.DropoutRate, Seed: opt.DropoutSeed}
	if at.Scale == 0 {
		at.Scale = 1 / math.Sqrt(float64(max(D, 1)))
	}
	if opt.Causal > CausalTopLeft {
		g.throw(op, "unknown causal mode %d", opt.Causal)
	}
	ins := []*Node{q, k, v}
	if m := opt.Mask; m != nil {
		if (m.dtype != tensor.Bool && m.dtype != tensor.Uint8) || !m.shape.Equal(tensor.Shape{B, Tq, Tk}) {
			g.throw(op, "mask must be bool or uint8 [%d, %d, %d], got %s%v", B, Tq, Tk, m.dtype, m.shape)
		}
		ins = append(ins, m)
	}
	if !(opt.DropoutRate >= 0 && opt.DropoutRate < 1) {
		g.throw(op, "dropout rate %v must be in [0, 1)", opt.DropoutRate)
	}
	if opt.DropoutRate > 0 {
		if s := opt.Step; s == nil || s.dtype != tensor.Int64 || s.shape.Rank() != 0 {
			g.throw(op, "dropout needs the step, an int64 scalar")
		}
		ins = append(ins, opt.Step)
	}
	o := g.add(op, q.dtype, q.shape, at, ins...)
	PartOf(o, 1)
	return o
}

// AttentionLSE returns part 1 of an Attention node: the log-sum-exp of each
// row's visible scores, [B, H, Tq] (-Inf for a row that sees no key).
func AttentionLSE(o *Node) *Node { return PartOf(o, 1) }

// AttentionGrad returns the gradients dq, dk and dv of a loss through fwd,
// an Attention node, given do, the gradient with respect to its output,
// and q, k, v, o, lse and the extra inputs (mask, step) as the backward
// pass reads them (kept or recomputed). dq is the node; dk and dv are its
// parts 1 and 2.
func AttentionGrad(fwd, q, k, v, o, lse, do *Node, extra ...*Node) (dq, dk, dv *Node) {
	g := fwd.g
	if fwd.op != OpAttention {
		g.throw(OpAttentionGrad, "needs an attention node, got %s", fwd)
	}
	sameShape(OpAttentionGrad, o, do)
	sameShape(OpAttentionGrad, q, o)
	if len(extra) != len(fwd.inputs)-3 {
		g.throw(OpAttentionGrad, "%d extra inputs for an attention with %d", len(extra), len(fwd.inputs)-3)
	}
	at := fwd.attr
	at.Name = ""
	ins := append([]*Node{q, k, v, o, lse, do}, extra...)
	dq = g.add(OpAttentionGrad, q.dtype, q.shape, at, ins...)
	return dq, PartOf(dq, 1), PartOf(dq, 2)
}

// NumParts returns how many further outputs (parts) an op has.
func (o Op) NumParts() int {
	switch o {
	case OpAttention:
		return 1
	case OpAttentionGrad, OpLayerNorm, OpLayerNormGrad, OpLSTMCell:
		return 2
	case OpLSTMCellGrad, OpGRUCell:
		return 1
	case OpGRUCellGrad:
		return 2
	}
	return 0
}

// partType returns the dtype and shape of part i of n.
func partType(n *Node, i int) (tensor.DType, tensor.Shape) {
	switch n.op {
	case OpAttention: // lse [B, H, Tq]
		return n.dtype, tensor.Shape{n.shape[0], n.shape[2], n.shape[1]}
	case OpAttentionGrad: // dk, dv: k's and v's shapes
		return n.dtype, n.inputs[i].shape
	case OpLayerNorm: // mean, 1/σ: one per row
		return n.dtype, n.shape[:n.shape.Rank()-1]
	case OpLayerNormGrad: // dgamma, dbeta: gamma's shape
		return n.dtype, n.inputs[1].shape
	case OpLSTMCell: // c [B, n]; the activations [B, 5n]
		if i == 1 {
			return n.dtype, n.shape
		}
		return n.dtype, tensor.Shape{n.shape[0], 5 * n.shape[1]}
	case OpLSTMCellGrad: // dc of the previous step [B, n]
		return n.dtype, tensor.Shape{n.shape[0], n.shape[1] / 4}
	case OpGRUCell: // the activations z, r, h' and u_h [B, 4n]
		return n.dtype, tensor.Shape{n.shape[0], 4 * n.shape[1]}
	case OpGRUCellGrad: // du [B, 3n]; dh of the previous step [B, n]
		if i == 1 {
			return n.dtype, n.shape
		}
		return n.dtype, tensor.Shape{n.shape[0], n.shape[1] / 3}
	}
	return n.dtype, n.shape
}

// PartOf returns part i (1 <= i <= NumParts) of n, a node of a
// multi-output op: the part node built already, or a new one. Two part
// nodes of one output are the same value; compile gives them one buffer.
func PartOf(n *Node, i int) *Node {
	g := n.g
	if i < 1 || i > n.op.NumParts() {
		g.throw(OpPart, "%s has no part %d", n, i)
	}
	for _, c := range g.nodes[n.id+1:] {
		if c.op == OpPart && c.inputs[0] == n && c.attr.Part == i {
			return c
		}
	}
	dt, s := partType(n, i)
	return g.add(OpPart, dt, s, Attr{Part: i}, n)
}

// UnsliceAdd returns acc with x added into the region of acc that starts
// at starts: acc + Unslice(x, acc's shape, starts). It runs in place over
// acc where acc dies, so that autodiff sums the gradients of many slices
// of one value (the steps of an unrolled recurrence) in time proportional
// to the slices, not to their number times the value.
func UnsliceAdd(acc, x *Node, starts []int) *Node {
	g := acc.g
	if acc.dtype != x.dtype || x.shape.Rank() != acc.shape.Rank() || len(starts) != acc.shape.Rank() {
		g.throw(OpUnsliceAdd, "%s%v at %v does not fit %s%v", x.dtype, x.shape, starts, acc.dtype, acc.shape)
	}
	for i := range starts {
		if starts[i] < 0 || starts[i]+x.shape[i] > acc.shape[i] {
			g.throw(OpUnsliceAdd, "%v at %v does not fit %v", x.shape, starts, acc.shape)
		}
	}
	if x.shape.Equal(acc.shape) {
		return Add(acc, x)
	}
	return g.add(OpUnsliceAdd, acc.dtype, acc.shape, Attr{Starts: slices.Clone(starts)}, acc, x)
}

// CacheWrite returns cache [B, L, ...] with x [B, n, ...] written over
// positions [pos, pos+n) of its axis 1, pos an int32 scalar read at run
// time (a position outside [0, L-n] is a run-time error naming the op).
// Assign(cache, CacheWrite(cache, x, pos)) writes the n rows straight into
// the variable: the key and value cache of a decoding step, where each new
// token costs O(L), not O(L²). It has no gradient.
func CacheWrite(cache, x, pos *Node) *Node {
	g := cache.g
	if pos.dtype != tensor.Int32 || pos.shape.Rank() != 0 {
		g.throw(OpCacheWrite, "position must be an int32 scalar, got %s%v", pos.dtype, pos.shape)
	}
	r := cache.shape.Rank()
	ok := cache.dtype == x.dtype && r >= 2 && x.shape.Rank() == r && x.shape[0] == cache.shape[0] && x.shape[1] <= cache.shape[1]
	for i := 2; ok && i < r; i++ {
		ok = x.shape[i] == cache.shape[i]
	}
	if !ok {
		g.throw(OpCacheWrite, "%s%v does not fit cache %s%v along axis 1", x.dtype, x.shape, cache.dtype, cache.shape)
	}
	return g.add(OpCacheWrite, cache.dtype, cache.shape, Attr{}, cache, x, pos)
}

// Gelu returns x·Φ(x) = x/2·(1 + erf(x/√2)) elementwise, Φ the standard
// normal distribution (Hendrycks and Gimpel 2016: the exact GELU, as
// Keras' gelu with approximate=False and PyTorch's default). As one op its
// backward pass keeps x alone; built from Erf, its products keep three
// values of x's size.
func Gelu(x *Node) *Node {
	if x.dtype != tensor.Float32 && x.dtype != tensor.Float64 {
		x.g.throw(OpGelu, "needs float32 or float64, got %s%v", x.dtype, x.shape)
	}
	return x.g.add(OpGelu, x.dtype, x.shape, Attr{}, x)
}

// GeluGrad returns g·(Φ(x) + x·φ(x)): the gradient through Gelu at x.
func GeluGrad(x, g *Node) *Node { return gradOp(OpGeluGrad, x, g) }

// LayerNorm returns (x - μ)/√(σ² + eps)·gamma + beta over the last axis of
// x [..., C], μ and σ² the mean and (biased) variance of each row, gamma
// and beta [C] (Ba, Kiros and Hinton 2016), as Keras' LayerNormalization
// and PyTorch's LayerNorm compute it. Its parts 1 and 2 are each row's μ
// and 1/√(σ² + eps) [...], what the backward pass keeps beside x: as one
// op it keeps two numbers a row where its composition keeps three values
// of x's size.
func LayerNorm(x, gamma, beta *Node, eps float64) *Node {
	g := x.g
	if x.dtype != tensor.Float32 && x.dtype != tensor.Float64 {
		g.throw(OpLayerNorm, "needs float32 or float64, got %s%v", x.dtype, x.shape)
	}
	r := x.shape.Rank()
	if r < 1 || !gamma.shape.Equal(tensor.Shape{x.shape[r-1]}) || !beta.shape.Equal(gamma.shape) || gamma.dtype != x.dtype || beta.dtype != x.dtype {
		g.throw(OpLayerNorm, "gamma %s%v and beta %s%v must be [%d] of x's %s%v", gamma.dtype, gamma.shape, beta.dtype, beta.shape, x.shape[max(r-1, 0)], x.dtype, x.shape)
	}
	if !(eps >= 0) {
		g.throw(OpLayerNorm, "epsilon %v must be >= 0", eps)
	}
	y := g.add(OpLayerNorm, x.dtype, x.shape, Attr{Eps: eps}, x, gamma, beta)
	PartOf(y, 1)
	PartOf(y, 2)
	return y
}

// LayerNormGrad returns the gradients dx, dgamma and dbeta of a loss
// through LayerNorm, given dy and the forward pass's x, gamma and parts
// mean and rstd. dx is the node; dgamma and dbeta are its parts.
func LayerNormGrad(x, gamma, mean, rstd, dy *Node) (dx, dgamma, dbeta *Node) {
	sameShape(OpLayerNormGrad, x, dy)
	dx = x.g.add(OpLayerNormGrad, x.dtype, x.shape, Attr{}, x, gamma, mean, rstd, dy)
	return dx, PartOf(dx, 1), PartOf(dx, 2)
}

// LSTMCell returns h [B, n], the output of one LSTM step (Hochreiter and
// Schmidhuber 1997, with the forget gate of Gers et al. 2000) with
// Keras' default activations, from the step's pre-activations z [B, 4n]
// (gates i, f, g, o side by side: x_t·kernel + h·recurrent_kernel + bias)
// and the previous cell state cPrev [B, n] (nil: a zero state):
//
//	i, f, g, o = σ(z_i), σ(z_f), tanh(z_g), σ(z_o)
//	c = f·cPrev + i·g        (i·g without cPrev)
//	h = o·tanh(c)
//
// each operation rounded to the dtype, in this order. Its part 1 is c
// [B, n]; part 2 [B, 5n] holds each row's i, f, g, o and tanh(c), what the
// backward pass reads. As one op the step is one pass over its rows where
// its composition is a dozen ops with a buffer each, and it keeps 5n
// values a row for the backward pass where the composition keeps 9n.
func LSTMCell(z, cPrev *Node) *Node {
	g := z.g
	if (z.dtype != tensor.Float32 && z.dtype != tensor.Float64) || z.shape.Rank() != 2 || z.shape[1]%4 != 0 || z.shape[1] == 0 {
		g.throw(OpLSTMCell, "z must be [B, 4·units] of float32 or float64, got %s%v", z.dtype, z.shape)
	}
	s := tensor.Shape{z.shape[0], z.shape[1] / 4}
	ins := []*Node{z}
	if cPrev != nil {
		if cPrev.dtype != z.dtype || !cPrev.shape.Equal(s) {
			g.throw(OpLSTMCell, "the previous cell state %s%v must be %s%v for z %s%v", cPrev.dtype, cPrev.shape, z.dtype, s, z.dtype, z.shape)
		}
		ins = append(ins, cPrev)
	}
	h := g.add(OpLSTMCell, z.dtype, s, Attr{}, ins...)
	PartOf(h, 1)
	PartOf(h, 2)
	return h
}

// LSTMCellGrad returns the gradients of a loss through LSTMCell: dz [B, 4n]
// and dcPrev [B, n] (nil when the step had no previous state: cPrev nil),
// given the step's activations acts (its part 2), the gradients dh and dc
// of its outputs h and c, and cPrev. With tc = tanh(c), and each operation
// rounded in this order:
//
//	dc' = dc + (dh·o)·(1 - tc·tc)
//	dz_i = ((dc'·g)·i)·(1 - i)       dz_f = ((dc'·cPrev)·f)·(1 - f)  (0 without cPrev)
//	dz_g = (dc'·i)·(1 - g·g)         dz_o = ((dh·tc)·o)·(1 - o)
//	dcPrev = dc'·f
func LSTMCellGrad(acts, dh, dc, cPrev *Node) (dz, dcPrev *Node) {
	g := acts.g
	sameShape(OpLSTMCellGrad, dh, dc)
	s := dh.shape
	if s.Rank() != 2 || !acts.shape.Equal(tensor.Shape{s[0], 5 * s[1]}) || acts.dtype != dh.dtype || dc.dtype != dh.dtype {
		g.throw(OpLSTMCellGrad, "the activations %s%v must be [B, 5·units] of dh's %s%v", acts.dtype, acts.shape, dh.dtype, dh.shape)
	}
	ins := []*Node{acts, dh, dc}
	if cPrev != nil {
		sameShape(OpLSTMCellGrad, dh, cPrev)
		ins = append(ins, cPrev)
	}
	dz = g.add(OpLSTMCellGrad, dh.dtype, tensor.Shape{s[0], 4 * s[1]}, Attr{}, ins...)
	if cPrev == nil {
		return dz, nil
	}
	return dz, PartOf(dz, 1)
}

// GRUCell returns h [B, n], the output of one step of Keras' GRU (Cho et
// al. 2014) with reset_after (Keras' default, the cuDNN form) and Keras'
// default activations, from the step's input projection x [B, 3n] (gates
// z, r, h side by side: x_t·kernel + input bias), its recurrent
// projection u [B, 3n] (h·recurrent_kernel + recurrent bias; nil: none,
// a first step without a recurrent bias) and the previous output hPrev
// [B, n] (nil: a zero state; it needs u):
//
//	z = σ(x_z + u_z), r = σ(x_r + u_r), h' = tanh(x_h + r·u_h)   (without u: σ(x_z), σ(x_r), tanh(x_h))
//	h = h' + z·(hPrev - h')                                      (h' - z·h' without hPrev)
//
// each operation rounded to the dtype, in this order. Its part 1 [B, 4n]
// holds each row's z, r, h' and u_h (0 without u): with hPrev, what the
// backward pass reads, as the composition keeps z, r, h' and the slice
// u_h.
func GRUCell(x, u, hPrev *Node) *Node {
	g := x.g
	if (x.dtype != tensor.Float32 && x.dtype != tensor.Float64) || x.shape.Rank() != 2 || x.shape[1]%3 != 0 || x.shape[1] == 0 {
		g.throw(OpGRUCell, "x must be [B, 3·units] of float32 or float64, got %s%v", x.dtype, x.shape)
	}
	s := tensor.Shape{x.shape[0], x.shape[1] / 3}
	ins := []*Node{x}
	if u != nil {
		if u.dtype != x.dtype || !u.shape.Equal(x.shape) {
			g.throw(OpGRUCell, "the recurrent projection %s%v must be x's %s%v", u.dtype, u.shape, x.dtype, x.shape)
		}
		ins = append(ins, u)
	}
	if hPrev != nil {
		if u == nil {
			g.throw(OpGRUCell, "a previous state needs the recurrent projection")
		}
		if hPrev.dtype != x.dtype || !hPrev.shape.Equal(s) {
			g.throw(OpGRUCell, "the previous state %s%v must be %s%v for x %s%v", hPrev.dtype, hPrev.shape, x.dtype, s, x.dtype, x.shape)
		}
		ins = append(ins, hPrev)
	}
	h := g.add(OpGRUCell, x.dtype, s, Attr{}, ins...)
	PartOf(h, 1)
	return h
}

// GRUCellGrad returns the gradients of a loss through GRUCell: dx [B, 3n],
// du [B, 3n] (the gradient of u, when the step had one) and dhPrev [B, n]
// (nil without hPrev), given the step's activations acts (its part 1), the
// gradient dh of its output and its hPrev. With D = hPrev - h' (-h'
// without hPrev), and each operation rounded in this order:
//
//	dh' = dh - dh·z                   dhPrev = dh·z
//	da = dh'·(1 - h'·h')              dz = ((dh·D)·z)·(1 - z)
//	dr = ((da·u_h)·r)·(1 - r)         (±0 without u: u_h is 0)
//	dx = [dz, dr, da]                 du = [dz, dr, da·r]
func GRUCellGrad(acts, dh, hPrev *Node) (dx, du, dhPrev *Node) {
	g := acts.g
	s := dh.shape
	if s.Rank() != 2 || !acts.shape.Equal(tensor.Shape{s[0], 4 * s[1]}) || acts.dtype != dh.dtype {
		g.throw(OpGRUCellGrad, "the activations %s%v must be [B, 4·units] of dh's %s%v", acts.dtype, acts.shape, dh.dtype, dh.shape)
	}
	ins := []*Node{acts, dh}
	if hPrev != nil {
		sameShape(OpGRUCellGrad, dh, hPrev)
		ins = append(ins, hPrev)
	}
	dx = g.add(OpGRUCellGrad, dh.dtype, tensor.Shape{s[0], 3 * s[1]}, Attr{}, ins...)
	if hPrev != nil {
		dhPrev = PartOf(dx, 2)
	}
	return dx, PartOf(dx, 1), dhPrev
}
