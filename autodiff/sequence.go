package autodiff

import "github.com/headroom-ml/headroom/graph"

// The VJP rules of the sequence ops (graph/sequence.go).
var _ = registerRules(func() {
	// attention: the backward pass reads q, k, v, the output and each
	// row's log-sum-exp (kept, or recomputed with the attention they come
	// from) and recomputes the probabilities block by block (Dao et al.
	// 2022, Algorithm 2); the mask and the step get no gradient.
	rules[graph.OpAttention] = func(c *vjp, n, gy *graph.Node) []*graph.Node {
		ins := n.Inputs()
		extra := make([]*graph.Node, len(ins)-3)
		for i := range extra {
			extra[i] = c.in(n, 3+i)
		}
		o := c.val(n)
		lse := c.val(graph.AttentionLSE(n)) // the recomputed attention's own when o is recomputed (see vjp.val)
		dq, dk, dv := graph.AttentionGrad(n, c.in(n, 0), c.in(n, 1), c.in(n, 2), o, lse, gy, extra...)
		return []*graph.Node{dq, dk, dv}
	}
	// layer norm: the backward pass reads x, gamma and each row's mean and
	// 1/σ (the forward's parts, kept or recomputed with it)
	rules[graph.OpLayerNorm] = func(c *vjp, n, gy *graph.Node) []*graph.Node {
		// the row statistics: the recomputed op's, or the forward op's
		// own when it is kept or read as its 16-bit copy (see vjp.val)
		dx, dg, db := graph.LayerNormGrad(c.in(n, 0), c.in(n, 1), c.val(graph.PartOf(n, 1)), c.val(graph.PartOf(n, 2)), gy)
		return []*graph.Node{dx, dg, db}
	}
	rules[graph.OpGelu] = func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.GeluGrad(c.in(n, 0), gy)) }
})
