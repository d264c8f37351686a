package autodiff

import "github.com/headroom-ml/headroom/graph"

// The VJP rules of the sequence ops (graph/sequence.go).
func init() {
	// attention: the backward pass reads q, k, v, the output and each
	// row's log-sum-exp (kept, or recomputed with the attention they come
	// from) and recomputes the probabilities block by block (Dao et al.
	// 2022, Algorithm 2); the mask and the step get no gradient.
	register(graph.OpAttention, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		ins := n.Inputs()
		extra := make([]*graph.Node, len(ins)-3)
		for i := range extra {
			extra[i] = c.in(n, 3+i)
		}
		o := c.val(n)
		lse := c.val(graph.AttentionLSE(n)) // the recomputed attention's own when o is recomputed (see vjp.val)
		dq, dk, dv := graph.AttentionGrad(n, c.in(n, 0), c.in(n, 1), c.in(n, 2), o, lse, gy, extra...)
		return []*graph.Node{dq, dk, dv}
	})
	// layer norm: the backward pass reads x, gamma and each row's mean and
	// 1/σ (the forward's parts, kept or recomputed with it)
	register(graph.OpLayerNorm, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		// the row statistics: the recomputed op's, or the forward op's
		// own when it is kept or read as its 16-bit copy (see vjp.val)
		dx, dg, db := graph.LayerNormGrad(c.in(n, 0), c.in(n, 1), c.val(graph.PartOf(n, 1)), c.val(graph.PartOf(n, 2)), gy)
		return []*graph.Node{dx, dg, db}
	})
	// an LSTM step: the backward pass reads the step's activations (its
	// part 2, kept or recomputed with it) and the previous state, and takes
	// the gradients of h and of c (part 1, which the next step reads); a
	// missing one is zero
	registerParts(graph.OpLSTMCell, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		g := n.Graph()
		if c.partGrad(n, 2) != nil {
			panic(&graph.Error{Op: n.Op(), Owner: n.Owner(), Site: n.Site(), Msg: "has no gradient rule through its part 2 (the activations the backward pass reads)"})
		}
		dc := c.partGrad(n, 1)
		if gy == nil {
			gy = g.Full(0, n.DType(), n.Shape())
		}
		if dc == nil {
			dc = g.Full(0, n.DType(), n.Shape())
		}
		var cPrev *graph.Node
		if len(n.Inputs()) == 2 {
			cPrev = c.in(n, 1)
		}
		dz, dcPrev := graph.LSTMCellGrad(c.val(graph.PartOf(n, 2)), gy, dc, cPrev)
		return []*graph.Node{dz, dcPrev}
	})
	// a GRU step: the backward pass reads the step's activations (its
	// part, kept or recomputed with it; they hold the slice of u it needs)
	// and its previous state
	register(graph.OpGRUCell, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		var hPrev *graph.Node
		if len(n.Inputs()) > 2 {
			hPrev = c.in(n, 2)
		}
		dx, du, dhPrev := graph.GRUCellGrad(c.val(graph.PartOf(n, 1)), gy, hPrev)
		return []*graph.Node{dx, du, dhPrev} // (du goes nowhere without u)
	})
	register(graph.OpGelu, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.GeluGrad(c.in(n, 0), gy)) })
	registerNoRule(internal, graph.OpAttentionGrad, graph.OpGeluGrad, graph.OpLayerNormGrad, graph.OpUnsliceAdd, graph.OpLSTMCellGrad,
		graph.OpGRUCellGrad)
	registerNoRule("a further output: its gradient goes to its op's rule, which must take it", graph.OpPart)
	registerNoRule("a decoding step's cache write: inference only", graph.OpCacheWrite)
}
