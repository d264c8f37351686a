package autodiff

import "github.com/headroom-ml/headroom/graph"

// The VJP rule of the matrix product (graph/linalg.go).
func init() { register(graph.OpMatMul, ruleMatMul) }

// ruleMatMul: for C = op(A)·op(B), d op(A) = G·op(B)ᵀ and d op(B) = op(A)ᵀ·G;
// when an operand is stored transposed its gradient is transposed back by
// swapping the product's operands, never by copying.
func ruleMatMul(c *vjp, n, gy *graph.Node) []*graph.Node {
	a, b := c.in(n, 0), c.in(n, 1)
	ta, tb := n.Attr().TransA, n.Attr().TransB
	var ga, gb *graph.Node
	if !ta {
		ga = graph.MatMulT(gy, b, false, !tb) // G·op(B)ᵀ
	} else {
		ga = graph.MatMulT(b, gy, tb, true) // op(B)·Gᵀ
	}
	if b.Shape().Rank() == 2 && a.Shape().Rank() > 2 {
		// b is shared by every batch element: fold the batch into rows.
		if ta {
			panic(&graph.Error{Op: graph.OpMatMul, Owner: n.Owner(), Msg: "gradient of a batched matmul with a transposed first operand and a shared second operand is not supported"})
		}
		k, m := a.Shape()[a.Shape().Rank()-1], gy.Shape()[gy.Shape().Rank()-1]
		a2, g2 := graph.Reshape(a, -1, k), graph.Reshape(gy, -1, m)
		if !tb {
			gb = graph.MatMulT(a2, g2, true, false)
		} else {
			gb = graph.MatMulT(g2, a2, true, false)
		}
		return two(ga, gb)
	}
	if !tb {
		gb = graph.MatMulT(a, gy, !ta, false) // op(A)ᵀ·G
	} else {
		gb = graph.MatMulT(gy, a, true, ta) // Gᵀ·op(A)
	}
	return two(ga, gb)
}
