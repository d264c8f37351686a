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
	register(graph.OpGelu, func(c *vjp, n, gy *graph.Node) []*graph.Node { return one(graph.GeluGrad(c.in(n, 0), gy)) })
	registerNoRule(internal, graph.OpAttentionGrad, graph.OpGeluGrad, graph.OpLayerNormGrad, graph.OpUnsliceAdd)
	registerNoRule("a further output: gradients through the parts of a multi-output op are not supported", graph.OpPart)
	registerNoRule("a decoding step's cache write: inference only", graph.OpCacheWrite)
}
