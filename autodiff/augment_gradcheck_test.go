package autodiff_test

import (
	"math"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

func init() { registerGradCases(augmentGradCases) }

// augmentGradCases are the gradient checks of the augmentation ops
// (graph/augment.go): ImageTransform with respect to the image, under a
// rotation, a zoom with a shift and a projective map, each fill mode and
// both interpolations (the transforms are constants: no gradient flows to
// them).
func augmentGradCases() []gradCase {
	// rotation by angle about the centre of an h×w image, then shifted
	rotate := func(angle, h, w, dx, dy float64) []float64 {
		c, s := math.Cos(angle), math.Sin(angle)
		cx, cy := (w-1)/2, (h-1)/2
		return []float64{c, -s, cx - c*cx + s*cy + dx, s, c, cy - s*cx - c*cy + dy, 0, 0}
	}
	transform := func(o graph.ImageTransformOptions, rows ...[]float64) func(g *graph.Graph, x []*graph.Node) *graph.Node {
		return func(g *graph.Graph, x []*graph.Node) *graph.Node {
			t := tensor.New(tensor.Float64, tensor.Shape{len(rows), 8})
			for i, r := range rows {
				for j, v := range r {
					t.SetFloat64At(i*8+j, v)
				}
			}
			return graph.ImageTransform(x[0], g.Constant(t), o)
		}
	}
	return []gradCase{
		{name: "image_transform/rotate_bilinear_reflect", shapes: []tensor.Shape{{2, 5, 6, 2}},
			build: transform(graph.ImageTransformOptions{Bilinear: true, Fill: graph.FillReflect},
				rotate(0.4, 5, 6, 0, 0), rotate(-1.1, 5, 6, 0.3, -0.2))},
		{name: "image_transform/zoom_bilinear_constant", shapes: []tensor.Shape{{1, 4, 5, 3}},
			build: transform(graph.ImageTransformOptions{Bilinear: true, Fill: graph.FillConstant, FillValue: 0.5},
				[]float64{1.3, 0, -0.45, 0, 0.8, 0.35, 0, 0})},
		{name: "image_transform/projective_bilinear_wrap", shapes: []tensor.Shape{{2, 4, 4, 1}},
			build: transform(graph.ImageTransformOptions{Bilinear: true, Fill: graph.FillWrap},
				[]float64{0.9, 0.1, 0.7, -0.2, 1.1, 0.4, 0.03, -0.02})},
		{name: "image_transform/rotate_nearest_nearest", shapes: []tensor.Shape{{2, 5, 5, 2}},
			build: transform(graph.ImageTransformOptions{Fill: graph.FillNearest},
				rotate(2.2, 5, 5, 0.1, 0.2), rotate(0.3, 5, 5, 1.6, -0.7))},
	}
}
