package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The lowering of the matrix product (graph/linalg.go): a [..., M, K]
// (or its transpose) · b [..., K, N] or a shared b [K, N] -> [..., M, N].
func init() {
	register(graph.OpMatMul, lowering{
		lower: func(n *graph.Node, it *Instr) {
			in, s, at := n.Inputs(), n.Shape(), n.Attr()
			a, b := in[0].Shape(), in[1].Shape()
			ra := a.Rank()
			g := &MatMulGeom{TransA: at.TransA, TransB: at.TransB, BF16: at.BF16}
			g.M, g.N = s[s.Rank()-2], s[s.Rank()-1]
			g.K = a[ra-1]
			if at.TransA {
				g.K = a[ra-2]
			}
			g.Batch = tensor.Shape(s[:s.Rank()-2]).Size()
			g.SharedB = b.Rank() == 2 && ra > 2
			it.MatMul = g
		},
		flops: func(it *Instr, _ float64) float64 {
			g := it.MatMul
			return 2 * float64(g.M) * float64(g.N) * float64(g.K) * float64(g.Batch)
		},
	})
}
