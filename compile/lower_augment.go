package compile

import (
	"github.com/headroom-ml/headroom/graph"
)

// The lowering of the augmentation ops (graph/augment.go).
func init() {
	// step -> uniform draws of the node's shape
	register(graph.OpRandomUniform, lowering{lower: func(n *graph.Node, it *Instr) {
		it.Random = &RandomGeom{Seed: n.Attr().Seed}
	}})
	// x (or dy) [N, H, W, C], transforms [T, 8] -> [N, H, W, C]
	for _, op := range []graph.Op{graph.OpImageTransform, graph.OpImageTransformGrad} {
		register(op, lowering{lower: func(n *graph.Node, it *Instr) {
			s, o := n.Shape(), graph.ImageTransformOptionsOf(n.Attr())
			it.Transform = &TransformGeom{N: s[0], H: s[1], W: s[2], C: s[3], Transforms: n.Inputs()[1].Shape()[0],
				Bilinear: o.Bilinear, Fill: int(o.Fill), FillValue: o.FillValue}
		}})
	}
}
