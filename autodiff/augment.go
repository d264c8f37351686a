package autodiff

import (
	"github.com/headroom-ml/headroom/graph"
)

// The VJP rules of the augmentation ops (graph/augment.go).
func init() {
	// the image's gradient; none flows to the transforms (as TensorFlow's
	// ImageProjectiveTransformV3: Keras' layers draw them, nothing learns
	// them)
	register(graph.OpImageTransform, func(c *vjp, n, gy *graph.Node) []*graph.Node {
		o := graph.ImageTransformOptionsOf(n.Attr())
		return []*graph.Node{graph.ImageTransformGrad(gy, c.in(n, 1), o), nil}
	})
	// uniform draws are a function of the step alone
	registerZero(graph.OpRandomUniform)
	registerNoRule(internal, graph.OpImageTransformGrad)
}
