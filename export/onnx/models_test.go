package onnx

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// testModel builds one test graph at any batch size: the export is made
// from one size, the reference outputs at another, so the symbolic batch
// is tested too.
type testModel struct {
	name  string
	build func(b int) (*graph.Graph, []*graph.Node, []Output)
	// feed fills input in (nil: N(0, 1) floats, or a model-specific rule)
	feed func(rng *rand.Rand, in *graph.Node, t tensor.Tensor)
}

// sequential builds an nn.Sequential model over input "x" with output "out".
func sequential(s *nn.Sequential) func(b int) (*graph.Graph, []*graph.Node, []Output) {
	return func(b int) (*graph.Graph, []*graph.Node, []Output) {
		g := graph.New()
		ctx := nn.NewContext(g, false, 0)
		x := g.Input("x", s.InputType(), append(tensor.Shape{b}, s.InputShape...))
		out := s.Forward(ctx, x)
		return g, []*graph.Node{x}, []Output{{Name: "out", Node: out}}
	}
}

func mustModel(t testing.TB, name string, input tensor.Shape, classes int) *nn.Sequential {
	s, err := nn.ModelByName(name, input, classes)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// uniformImages fills t with U(0, 1), like scaled pixels.
func uniformImages(rng *rand.Rand, _ *graph.Node, t tensor.Tensor) {
	for i, f := 0, t.Float32s(); i < len(f); i++ {
		f[i] = rng.Float32()
	}
}

// testModels returns the models the runtime tests export: an MLP with
// softmax, the reference cnn, a strided "same" convolution net with
// average and max pooling, a model of most other ops, bfloat16 products
// with a transposed weight, zero padding, the vision layers' ops, and the
// sequence models (seqModels).
func testModels(t testing.TB) []testModel {
	return append([]testModel{
		{name: "mlp_softmax", build: sequential(&nn.Sequential{Name: "mlp", InputShape: tensor.Shape{4, 5}, Layers: []nn.Layer{
			&nn.Flatten{LayerName: "flatten"},
			&nn.Dense{LayerName: "dense", Units: 32, Activation: "relu"},
			&nn.Dense{LayerName: "dense_1", Units: 16, Activation: "tanh"},
			&nn.Dense{LayerName: "dense_2", Units: 5, Activation: "softmax"},
		}})},
		{name: "cnn", build: sequential(mustModel(t, "cnn", tensor.Shape{28, 28, 1}, 10)), feed: uniformImages},
		{name: "conv_same", build: sequential(&nn.Sequential{Name: "conv_same", InputShape: tensor.Shape{13, 11, 3}, Layers: []nn.Layer{
			&nn.Conv2D{LayerName: "conv", Filters: 8, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true, Activation: "relu"},
			&nn.Pool2D{LayerName: "avg", Pool: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true},
			&nn.Conv2D{LayerName: "conv_1", Filters: 4, Kernel: [2]int{2, 3}, Strides: [2]int{1, 2}, Same: true, Activation: "gelu"},
			&nn.Pool2D{LayerName: "max", Max: true, Pool: [2]int{2, 2}, Strides: [2]int{1, 1}, Same: true},
			&nn.Pool2D{LayerName: "avg_valid", Pool: [2]int{2, 1}},
			&nn.GlobalAveragePooling2D{LayerName: "gap"},
			&nn.Dense{LayerName: "dense", Units: 3},
		}}), feed: uniformImages},
		{name: "ops", build: opsModel, feed: feedOps},
		{name: "bf16_transposed", build: bf16Model},
		// ZeroPadding2D (an Unslice: ONNX Pad), unequal on each side, before
		// a valid strided convolution, as the ResNet-20 pads its stride-2
		// convolutions
		{name: "zero_padding", build: sequential(&nn.Sequential{Name: "zero_padding", InputShape: tensor.Shape{9, 8, 2}, Layers: []nn.Layer{
			&nn.ZeroPadding2D{LayerName: "pad", Padding: [2][2]int{{1, 2}, {0, 1}}},
			&nn.Conv2D{LayerName: "conv", Filters: 4, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}},
			&nn.ZeroPadding2D{LayerName: "pad_1", Padding: [2][2]int{{1, 1}, {1, 1}}},
			&nn.Flatten{LayerName: "flatten"},
			&nn.Dense{LayerName: "dense", Units: 3},
		}}), feed: uniformImages},
		// the vision layers' ops: transposed convolutions ("same" with
		// stride 2, "valid" with output padding, dilated), every form of
		// ReLU, the other activations, both UpSampling2D interpolations
		{name: "vision_ops", build: sequential(&nn.Sequential{Name: "vision_ops", InputShape: tensor.Shape{6, 5, 3}, Layers: []nn.Layer{
			&nn.Conv2DTranspose{LayerName: "up", Filters: 4, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true, Activation: "relu"},
			&nn.ReLU{LayerName: "relu6", MaxValue: ptr(6.0)},
			&nn.Conv2DTranspose{LayerName: "up_1", Filters: 3, Kernel: [2]int{2, 3}, Strides: [2]int{2, 1}, OutputPadding: []int{1, 0}},
			&nn.LeakyReLU{LayerName: "leaky", NegativeSlope: 0.2},
			&nn.ReLU{LayerName: "relu_thr", MaxValue: ptr(0.8), NegativeSlope: 0.1, Threshold: 0.05},
			&nn.Conv2DTranspose{LayerName: "dilated", Filters: 3, Kernel: [2]int{3, 2}, DilationRate: [2]int{2, 2}, Same: true},
			&nn.UpSampling2D{LayerName: "bilinear", Size: [2]int{2, 1}, Interpolation: "bilinear"},
			&nn.Activation{LayerName: "swish", Fn: "swish"},
			&nn.UpSampling2D{LayerName: "nearest", Size: [2]int{1, 2}},
			&nn.Activation{LayerName: "hard_swish", Fn: "hard_swish"},
			&nn.ELU{LayerName: "elu", Alpha: 0.7},
			&nn.Conv2D{LayerName: "conv", Filters: 4, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, Activation: "selu"},
			&nn.Activation{LayerName: "softplus", Fn: "softplus"},
			&nn.Activation{LayerName: "softsign", Fn: "softsign"},
			&nn.Flatten{LayerName: "flatten"}, // every position counts
			&nn.Dense{LayerName: "dense", Units: 3},
		}}), feed: uniformImages},
	}, seqModels()...)
}

func ptr[T any](v T) *T { return &v }

// opsModel uses most ops the exporter knows outside the layers above.
// x: [B, 4, 6] float32, ids: [B, 3] int32 in [0, 7), hot: [B, 3] int32
// (some outside [0, 7)).
func opsModel(b int) (*graph.Graph, []*graph.Node, []Output) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{b, 4, 6})
	ids := g.Input("ids", tensor.Int32, tensor.Shape{b, 3})
	hot := g.Input("hot", tensor.Int32, tensor.Shape{b, 3})
	g.PushScope("ops")
	xt := graph.Transpose(x, 0, 2, 1)                                 // [B, 6, 4]
	w := g.Param("ops/w", tensor.Float32, tensor.Shape{4, 5})         //
	m := graph.MatMul(xt, w)                                          // [B, 6, 5]: shared weight
	gram := graph.MatMulT(xt, xt, true, false)                        // [B, 4, 4]: both operands batched
	cat := graph.Concat(2, m, graph.Exp(graph.Neg(graph.Abs(m))))     // [B, 6, 10]
	sl := graph.Slice(cat, []int{0, 1, 2}, []int{b, 5, 9})            // [B, 4, 7]
	rows := graph.Reshape(cat, b*6, 10)                               // [B*6, 10]
	w2 := g.Param("ops/w2", tensor.Float32, tensor.Shape{10, 3})      //
	back := graph.Reshape(graph.MatMul(rows, w2), b, 6, 3)            // [B, 6, 3]
	emb := g.Param("ops/emb", tensor.Float32, tensor.Shape{7, 3})     //
	ge := graph.Gather(emb, ids)                                      // [B, 3, 3]
	oh := graph.OneHot(hot, 7, tensor.Float32)                        // [B, 3, 7]
	mean := graph.ReduceMeanKeep(x, 1, 2)                             // [B, 1, 1]
	spread := graph.BroadcastTo(mean, b, 4, 6)                        // [B, 4, 6]
	cmp := graph.Where(graph.Greater(x, spread), x, graph.Sigmoid(x)) // [B, 4, 6]
	ne := graph.Cast(graph.NotEqual(x, spread), tensor.Float32)
	le := graph.Cast(graph.LessEqual(x, g.Scalar(0.5, tensor.Float32)), tensor.Float32)
	mix := graph.Add(graph.Mul(cmp, ne), graph.Sub(le, graph.Tanh(x)))
	mix = graph.Maximum(graph.Minimum(mix, graph.ScalarLike(mix, 2)), graph.ScalarLike(mix, -2))
	mix = graph.Div(mix, graph.Sqrt(graph.AddScalar(graph.Abs(x), 1)))
	mix = graph.Add(mix, graph.Log(graph.AddScalar(graph.Erf(x), 2)))
	band := graph.Mul(graph.Cast(graph.Less(x, spread), tensor.Float32), graph.Cast(graph.GreaterEqual(x, g.Scalar(-0.5, tensor.Float32)), tensor.Float32))
	mix = graph.Add(mix, band)
	same := graph.Cast(graph.Equal(ids, hot), tensor.Float32) // int32 operands
	feats := graph.Concat(1,
		graph.ReduceSum(sl, 1),                         // [B, 7]
		graph.ReduceMax(back, 1),                       // [B, 3]
		graph.ReduceMean(ge, 2),                        // [B, 3]
		graph.ReduceSum(oh, 1),                         // [B, 7]
		graph.Reshape(graph.ReduceMean(gram, 1), b, 4), // [B, 4]
		graph.ReduceMax(mix, 1),                        // [B, 6]
		graph.Add(graph.Cast(graph.Cast(ids, tensor.Float32), tensor.Float32), same), // [B, 3]
	) // [B, 33]
	aux := graph.LogSoftmax(feats)
	g.PopScope()
	return g, []*graph.Node{x, ids, hot}, []Output{{Name: "feats", Node: feats}, {Name: "log_probs", Node: aux},
		{Name: "table", Node: emb}, {Name: "x_again", Node: x}} // a weight and an input as outputs
}

func feedOps(rng *rand.Rand, in *graph.Node, t tensor.Tensor) {
	switch in.Attr().Name {
	case "ids":
		for i, v := 0, t.Int32s(); i < len(v); i++ {
			v[i] = int32(rng.IntN(7))
		}
	case "hot":
		for i, v := 0, t.Int32s(); i < len(v); i++ {
			v[i] = int32(rng.IntN(10) - 1) // -1 and 7, 8 are outside the depth
		}
	default:
		for i, f := 0, t.Float32s(); i < len(f); i++ {
			f[i] = float32(rng.NormFloat64())
		}
	}
}

// bf16Model: x [B, 12] -> bfloat16 products, one with a weight stored
// [out, in] (MatMulT with transB), as a tied embedding would be.
func bf16Model(b int) (*graph.Graph, []*graph.Node, []Output) {
	g := graph.New(graph.BF16Products())
	x := g.Input("x", tensor.Float32, tensor.Shape{b, 12})
	g.PushScope("bf16")
	w := g.Param("bf16/w", tensor.Float32, tensor.Shape{16, 12})
	h := graph.Relu(graph.MatMulT(x, w, false, true)) // [B, 16]
	w2 := g.Param("bf16/w2", tensor.Float32, tensor.Shape{16, 4})
	out := graph.MatMul(h, w2) // [B, 4]
	g.PopScope()
	return g, []*graph.Node{x}, []Output{{Name: "out", Node: out}}
}

// randomWeights returns a value for every Variable of g: He-scaled normal
// kernels, small normal biases.
func randomWeights(g *graph.Graph, rng *rand.Rand) map[string]tensor.Tensor {
	w := map[string]tensor.Tensor{}
	for _, v := range g.Variables() {
		t := tensor.New(v.DType(), v.Shape())
		fanIn := 1
		for _, d := range v.Shape()[:max(v.Shape().Rank()-1, 0)] {
			fanIn *= d
		}
		std := math.Sqrt(2 / float64(fanIn))
		if v.Shape().Rank() == 1 {
			std = 0.1
		}
		for i := 0; i < t.Len(); i++ {
			t.SetFloat64At(i, rng.NormFloat64()*std)
		}
		w[v.Attr().Name] = t
	}
	return w
}

func weightsOf(w map[string]tensor.Tensor) func(string) (tensor.Tensor, bool) {
	return func(name string) (tensor.Tensor, bool) { t, ok := w[name]; return t, ok }
}

// makeFeeds returns random inputs for inputs.
func makeFeeds(tm testModel, inputs []*graph.Node, rng *rand.Rand) map[string]tensor.Tensor {
	feeds := map[string]tensor.Tensor{}
	for _, in := range inputs {
		t := tensor.New(in.DType(), in.Shape())
		if tm.feed != nil {
			tm.feed(rng, in, t)
		} else {
			for i, f := 0, t.Float32s(); i < len(f); i++ {
				f[i] = float32(rng.NormFloat64())
			}
		}
		feeds[in.Attr().Name] = t
	}
	return feeds
}

// headroomOutputs runs m in headroom's runtime on feeds.
func headroomOutputs(t testing.TB, m Model, feeds map[string]tensor.Tensor) []tensor.Tensor {
	t.Helper()
	keep := make([]*graph.Node, len(m.Outputs))
	for i, o := range m.Outputs {
		keep[i] = o.Node
	}
	var out []tensor.Tensor
	err := runGraph(m, keep, 1, func(_ int, in map[string]tensor.Tensor) error {
		for name, dst := range in {
			copy(dst.Bytes(), feeds[name].Bytes())
		}
		return nil
	}, func(_ int, vals []tensor.Tensor) error {
		for _, v := range vals {
			c := tensor.New(v.DType(), v.Shape())
			copy(c.Bytes(), v.Bytes())
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// maxAbsDiff returns the largest |a-b| (+Inf if the shapes differ or only
// one is NaN).
func maxAbsDiff(a, b tensor.Tensor) float64 {
	if !a.Shape().Equal(b.Shape()) {
		return math.Inf(1)
	}
	d := 0.0
	for i := 0; i < a.Len(); i++ {
		x, y := a.Float64At(i), b.Float64At(i)
		if math.IsNaN(x) || math.IsNaN(y) {
			if math.IsNaN(x) != math.IsNaN(y) {
				return math.Inf(1)
			}
			continue
		}
		d = max(d, math.Abs(x-y))
	}
	return d
}

// argmaxAgreement returns the fraction of rows of a and b ([..., C]) whose
// largest element is in the same column.
func argmaxAgreement(a, b tensor.Tensor) float64 {
	c := a.Shape()[a.Shape().Rank()-1]
	n := a.Len() / c
	same := 0
	for i := 0; i < n; i++ {
		if argmax(a, i*c, c) == argmax(b, i*c, c) {
			same++
		}
	}
	return float64(same) / float64(n)
}

func argmax(t tensor.Tensor, off, n int) int {
	best := 0
	for j := 1; j < n; j++ {
		if t.Float64At(off+j) > t.Float64At(off+best) {
			best = j
		}
	}
	return best
}
