package autodiff_test

import (
	"math"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

func init() { registerGradCases(visionGradCases) }

// visionGradCases are the gradient checks of the vision ops
// (graph/vision.go) and of the compositions nn builds from them.
func visionGradCases() []gradCase {
	conv := func(o graph.ConvOptions) func(g *graph.Graph, x []*graph.Node) *graph.Node {
		return func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.Conv2DWith(x[0], x[1], o) }
	}
	transpose := func(out [2]int, o graph.ConvOptions) func(g *graph.Graph, x []*graph.Node) *graph.Node {
		return func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.Conv2DTranspose(x[0], x[1], out, o) }
	}
	act := func(name string, f func(*graph.Node) *graph.Node) gradCase {
		return gradCase{name: name, shapes: []tensor.Shape{{3, 5}}, init: spaced,
			build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return f(x[0]) }}
	}
	return []gradCase{
		{name: "conv2d/dilated_same", shapes: []tensor.Shape{{2, 7, 8, 3}, {3, 2, 3, 4}},
			build: conv(graph.ConvOptions{Dilation: [2]int{2, 1}, Same: true})},
		{name: "conv2d/dilated_valid", shapes: []tensor.Shape{{1, 7, 7, 2}, {2, 3, 2, 3}},
			build: conv(graph.ConvOptions{Dilation: [2]int{3, 2}})},
		{name: "conv2d/groups_stride2", shapes: []tensor.Shape{{2, 5, 6, 4}, {3, 3, 2, 6}},
			build: conv(graph.ConvOptions{Strides: [2]int{2, 2}, Groups: 2, Same: true})},
		{name: "conv2d/depthwise_multiplier2", shapes: []tensor.Shape{{2, 5, 5, 3}, {3, 3, 1, 6}},
			build: conv(graph.ConvOptions{Groups: 3, Same: true})},
		{name: "conv2d/depthwise_stride2", shapes: []tensor.Shape{{2, 6, 5, 4}, {3, 3, 1, 4}},
			build: conv(graph.ConvOptions{Strides: [2]int{2, 2}, Groups: 4, Same: true})},
		{name: "conv2d/depthwise_dilated", shapes: []tensor.Shape{{1, 6, 6, 2}, {3, 3, 1, 2}},
			build: conv(graph.ConvOptions{Dilation: [2]int{2, 2}, Groups: 2, Same: true})},
		{name: "conv2d_transpose/same_stride2", shapes: []tensor.Shape{{2, 3, 4, 3}, {3, 3, 2, 3}},
			build: transpose([2]int{6, 8}, graph.ConvOptions{Strides: [2]int{2, 2}, Same: true})},
		{name: "conv2d_transpose/valid_stride2", shapes: []tensor.Shape{{1, 3, 3, 2}, {2, 2, 3, 2}},
			build: transpose([2]int{6, 6}, graph.ConvOptions{Strides: [2]int{2, 2}})},
		{name: "conv2d_transpose/output_padding", shapes: []tensor.Shape{{1, 3, 2, 2}, {3, 3, 2, 2}},
			build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
				h := graph.ConvTransposeOutSize(3, 3, 2, 1, true, 1)
				w := graph.ConvTransposeOutSize(2, 3, 2, 1, true, 0)
				return graph.Conv2DTranspose(x[0], x[1], [2]int{h, w}, graph.ConvOptions{Strides: [2]int{2, 2}, Same: true})
			}},
		{name: "conv2d_transpose/dilated", shapes: []tensor.Shape{{1, 4, 4, 2}, {2, 2, 3, 2}},
			build: transpose([2]int{6, 6}, graph.ConvOptions{Dilation: [2]int{2, 2}})},
		{name: "resize_bilinear/up", shapes: []tensor.Shape{{2, 3, 4, 2}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.ResizeBilinear(x[0], 6, 8)
		}},
		{name: "resize_bilinear/down_odd", shapes: []tensor.Shape{{1, 5, 5, 1}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.ResizeBilinear(x[0], 3, 2)
		}},
		{name: "upsample_nearest", shapes: []tensor.Shape{{2, 2, 3, 2}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.UpSampleNearest(x[0], [2]int{2, 3})
		}},
		{name: "pad", shapes: []tensor.Shape{{2, 3, 4, 1}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.Pad(x[0], []int{0, 1, 2, 0}, []int{0, 2, 0, 0})
		}},
		{name: "moments", shapes: []tensor.Shape{{3, 4, 5}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.Moments(x[0])
		}},
		{name: "moments/batch_norm", shapes: []tensor.Shape{{4, 3, 2}, {2}, {2}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			// BatchNormalization's training form: x·scale + (beta - mean·scale)
			m := graph.Moments(x[0])
			mean := graph.Reshape(graph.Slice(m, []int{0, 0}, []int{1, 2}), 2)
			v := graph.Reshape(graph.Slice(m, []int{1, 0}, []int{2, 2}), 2)
			scale := graph.Div(x[1], graph.Sqrt(graph.AddScalar(v, 1e-3)))
			return graph.Add(graph.Mul(x[0], scale), graph.Sub(x[2], graph.Mul(mean, scale)))
		}},
		act("relu_clip/relu_max1", func(x *graph.Node) *graph.Node { return graph.ReluClip(x, 1, 0, 0) }),
		act("relu_clip/leaky", func(x *graph.Node) *graph.Node { return graph.ReluClip(x, graph.NoMax, 0.3, 0) }),
		act("relu_clip/threshold_max", func(x *graph.Node) *graph.Node { return graph.ReluClip(x, 2, 0.2, 0.5) }),
		act("relu_clip/negative_threshold", func(x *graph.Node) *graph.Node { return graph.ReluClip(x, graph.NoMax, 0.1, -0.5) }),
		act("elu", func(x *graph.Node) *graph.Node { return graph.Elu(x, 1, 1) }),
		act("elu/selu", func(x *graph.Node) *graph.Node { return graph.Elu(x, 1.6732632423543772, 1.0507009873554805) }),
		act("silu", graph.Silu),
		act("hard_swish", func(x *graph.Node) *graph.Node { return graph.HardSwish(graph.MulScalar(x, 2)) }),
		act("softplus", func(x *graph.Node) *graph.Node { return graph.Softplus(graph.MulScalar(x, 4)) }),
		act("softsign", graph.Softsign),
		act("relu_clip/nan_max_is_none", func(x *graph.Node) *graph.Node { return graph.ReluClip(x, math.NaN(), 0, 0) }),
	}
}
