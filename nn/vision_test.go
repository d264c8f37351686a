package nn_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// TestVisionLayerShapes builds each layer over one input shape and checks
// the output shape and the parameter counts (total, trainable) against
// what Keras reports for the same layer (model.summary(); the formulas in
// each comment).
func TestVisionLayerShapes(t *testing.T) {
	six := 6.0
	tests := []struct {
		name             string
		layer            nn.Layer
		in, out          tensor.Shape
		total, trainable int
	}{
		// 3·3·32 + 32
		{"depthwise", &nn.DepthwiseConv2D{LayerName: "l", Kernel: [2]int{3, 3}, Same: true}, tensor.Shape{8, 8, 32}, tensor.Shape{8, 8, 32}, 320, 320},
		// 3·3·4·2, no bias
		{"depthwise/multiplier2_stride2", &nn.DepthwiseConv2D{LayerName: "l", Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, DepthMultiplier: 2, NoBias: true},
			tensor.Shape{9, 9, 4}, tensor.Shape{4, 4, 8}, 72, 72},
		// 3·3·32 + 32·64 + 64
		{"separable", &nn.SeparableConv2D{LayerName: "l", Filters: 64, Kernel: [2]int{3, 3}, Same: true}, tensor.Shape{8, 8, 32}, tensor.Shape{8, 8, 64}, 2400, 2400},
		// 3·3·3·2 + 6·16
		{"separable/multiplier2", &nn.SeparableConv2D{LayerName: "l", Filters: 16, Kernel: [2]int{3, 3}, DepthMultiplier: 2, NoBias: true},
			tensor.Shape{10, 10, 3}, tensor.Shape{8, 8, 16}, 150, 150},
		// 3·3·16·32 + 16; same: 8·2
		{"transpose/same", &nn.Conv2DTranspose{LayerName: "l", Filters: 16, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true},
			tensor.Shape{8, 8, 32}, tensor.Shape{16, 16, 16}, 4624, 4624},
		// valid: 7·2 + max(3-2, 0)
		{"transpose/valid", &nn.Conv2DTranspose{LayerName: "l", Filters: 16, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}},
			tensor.Shape{7, 7, 8}, tensor.Shape{15, 15, 16}, 1168, 1168},
		// output_padding 1: (7-1)·2 + 3 - 2·1 + 1
		{"transpose/output_padding", &nn.Conv2DTranspose{LayerName: "l", Filters: 8, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true, OutputPadding: []int{1, 1}},
			tensor.Shape{7, 7, 4}, tensor.Shape{14, 14, 8}, 296, 296},
		// 3·3·(32/4)·64 + 64
		{"conv/groups4", &nn.Conv2D{LayerName: "l", Filters: 64, Kernel: [2]int{3, 3}, Same: true, Groups: 4}, tensor.Shape{8, 8, 32}, tensor.Shape{8, 8, 64}, 4672, 4672},
		// valid, extent 5: 10 - 4
		{"conv/dilation2", &nn.Conv2D{LayerName: "l", Filters: 5, Kernel: [2]int{3, 3}, DilationRate: [2]int{2, 2}}, tensor.Shape{10, 10, 3}, tensor.Shape{6, 6, 5}, 140, 140},
		{"upsampling/nearest", &nn.UpSampling2D{LayerName: "l", Size: [2]int{2, 3}}, tensor.Shape{4, 5, 2}, tensor.Shape{8, 15, 2}, 0, 0},
		{"upsampling/bilinear_default_size", &nn.UpSampling2D{LayerName: "l", Interpolation: "bilinear"}, tensor.Shape{4, 5, 2}, tensor.Shape{8, 10, 2}, 0, 0},
		{"zero_padding", &nn.ZeroPadding2D{LayerName: "l", Padding: [2][2]int{{1, 2}, {3, 4}}}, tensor.Shape{10, 10, 3}, tensor.Shape{13, 17, 3}, 0, 0},
		{"cropping", &nn.Cropping2D{LayerName: "l", Cropping: [2][2]int{{1, 1}, {2, 3}}}, tensor.Shape{10, 10, 3}, tensor.Shape{8, 5, 3}, 0, 0},
		{"global_max_pooling", &nn.GlobalMaxPooling2D{LayerName: "l"}, tensor.Shape{7, 7, 64}, tensor.Shape{64}, 0, 0},
		{"global_max_pooling/keepdims", &nn.GlobalMaxPooling2D{LayerName: "l", KeepDims: true}, tensor.Shape{7, 7, 64}, tensor.Shape{1, 1, 64}, 0, 0},
		{"reshape", &nn.Reshape{LayerName: "l", TargetShape: []int{2, -1}}, tensor.Shape{6, 4}, tensor.Shape{2, 12}, 0, 0},
		{"permute", &nn.Permute{LayerName: "l", Dims: []int{2, 1}}, tensor.Shape{3, 5}, tensor.Shape{5, 3}, 0, 0},
		{"repeat_vector", &nn.RepeatVector{LayerName: "l", Times: 3}, tensor.Shape{7}, tensor.Shape{3, 7}, 0, 0},
		{"rescaling", &nn.Rescaling{LayerName: "l", Scale: 1.0 / 255}, tensor.Shape{4, 4, 3}, tensor.Shape{4, 4, 3}, 0, 0},
		// mean, variance [3] and count: 2·3 + 1, none trainable
		{"normalization", &nn.Normalization{LayerName: "l"}, tensor.Shape{5, 3}, tensor.Shape{5, 3}, 7, 0},
		{"normalization/given", &nn.Normalization{LayerName: "l", Mean: []float64{1}, Variance: []float64{4}}, tensor.Shape{5, 3}, tensor.Shape{5, 3}, 0, 0},
		{"relu/max6", &nn.ReLU{LayerName: "l", MaxValue: &six}, tensor.Shape{5}, tensor.Shape{5}, 0, 0},
		{"leaky_relu", &nn.LeakyReLU{LayerName: "l"}, tensor.Shape{5}, tensor.Shape{5}, 0, 0},
		{"elu", &nn.ELU{LayerName: "l"}, tensor.Shape{5}, tensor.Shape{5}, 0, 0},
		// alpha [1, 1, 16]
		{"prelu/shared", &nn.PReLU{LayerName: "l", SharedAxes: []int{1, 2}}, tensor.Shape{28, 28, 16}, tensor.Shape{28, 28, 16}, 16, 16},
		{"prelu", &nn.PReLU{LayerName: "l"}, tensor.Shape{4, 5}, tensor.Shape{4, 5}, 20, 20},
		{"softmax/axis1", &nn.Softmax{LayerName: "l", Axis: 1}, tensor.Shape{3, 4}, tensor.Shape{3, 4}, 0, 0},
		{"spatial_dropout", &nn.SpatialDropout2D{LayerName: "l", Rate: 0.5}, tensor.Shape{4, 4, 3}, tensor.Shape{4, 4, 3}, 0, 0},
		// moving mean and variance only
		{"batch_norm/no_scale_no_center", &nn.BatchNormalization{LayerName: "l", NoScale: true, NoCenter: true}, tensor.Shape{5, 5, 64}, tensor.Shape{5, 5, 64}, 128, 0},
		{"batch_norm/no_center", &nn.BatchNormalization{LayerName: "l", NoCenter: true}, tensor.Shape{5, 5, 64}, tensor.Shape{5, 5, 64}, 192, 64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &nn.Sequential{Name: "m", InputShape: tc.in, Layers: []nn.Layer{tc.layer}}
			infos, _, err := m.Summary()
			if err != nil {
				t.Fatal(err)
			}
			if got := infos[0].Output; !got.Equal(tc.out) {
				t.Errorf("output shape: got %v, want %v", got, tc.out)
			}
			total, trainable, err := nn.Params(m)
			if err != nil {
				t.Fatal(err)
			}
			if total != tc.total || trainable != tc.trainable {
				t.Errorf("params: got %d (%d trainable), want %d (%d trainable)", total, trainable, tc.total, tc.trainable)
			}
		})
	}
}

// TestVisionLayerErrors: a layer that does not fit its input is an error
// naming the layer, never a crash.
func TestVisionLayerErrors(t *testing.T) {
	tests := []struct {
		name  string
		layer nn.Layer
		in    tensor.Shape
	}{
		{"groups_do_not_divide", &nn.Conv2D{LayerName: "g", Filters: 6, Kernel: [2]int{3, 3}, Groups: 4}, tensor.Shape{8, 8, 6}},
		{"strides_and_dilation", &nn.Conv2D{LayerName: "g", Filters: 6, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, DilationRate: [2]int{2, 2}}, tensor.Shape{8, 8, 6}},
		{"output_padding_not_below_stride", &nn.Conv2DTranspose{LayerName: "g", Filters: 2, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, OutputPadding: []int{2, 0}}, tensor.Shape{4, 4, 2}},
		{"transpose_output_does_not_invert", &nn.Conv2DTranspose{LayerName: "g", Filters: 2, Kernel: [2]int{4, 4}, Strides: [2]int{2, 2}, Same: true, OutputPadding: []int{0, 0}}, tensor.Shape{5, 5, 2}},
		{"cropping_everything", &nn.Cropping2D{LayerName: "g", Cropping: [2][2]int{{3, 2}, {0, 0}}}, tensor.Shape{5, 5, 1}},
		{"depthwise_not_nhwc", &nn.DepthwiseConv2D{LayerName: "g", Kernel: [2]int{3, 3}}, tensor.Shape{8, 8}},
		{"bad_interpolation", &nn.UpSampling2D{LayerName: "g", Interpolation: "bicubic"}, tensor.Shape{4, 4, 1}},
		{"prelu_axis", &nn.PReLU{LayerName: "g", SharedAxes: []int{3}}, tensor.Shape{4, 4}},
		{"softmax_axis", &nn.Softmax{LayerName: "g", Axis: 3}, tensor.Shape{4, 4}},
		{"repeat_vector_rank", &nn.RepeatVector{LayerName: "g", Times: 2}, tensor.Shape{4, 4}},
		{"normalization_values", &nn.Normalization{LayerName: "g", Mean: []float64{1, 2}, Variance: []float64{1}}, tensor.Shape{3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &nn.Sequential{Name: "m", InputShape: tc.in, Layers: []nn.Layer{tc.layer}}
			_, _, err := nn.Params(m)
			if err == nil {
				t.Fatalf("got no error, want one")
			}
		})
	}
}

// runLayer builds layer over a float64 input of shape in (batch first)
// in inference or training mode and returns the output for x.
func runVisionLayer(t *testing.T, layer nn.Layer, in tensor.Shape, x []float64, training bool, vars map[string][]float64) ([]float64, tensor.Shape) {
	t.Helper()
	en := newEngine(t)
	p := en.load(func() (*graph.Graph, compileOptions) {
		g := graph.New()
		c := nn.NewContext(g, training, 7)
		c.DType = tensor.Float64
		xn := g.Input("x", tensor.Float64, in)
		return g, outputs("layer", "y", layer.Forward(c, xn))
	})
	for name, v := range vars {
		en.setVariable(name, v)
	}
	p.set("x", x)
	if training {
		p.set("step", []float64{3})
	}
	p.run()
	return p.get("y")
}

func seq(n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i + 1)
	}
	return x
}

func TestVisionLayerValues(t *testing.T) {
	near := func(t *testing.T, got, want []float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("got %d values, want %d", len(got), len(want))
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12*max(1, math.Abs(want[i])) {
				t.Fatalf("element %d: got %v, want %v (all: %v)", i, got[i], want[i], got)
			}
		}
	}
	t.Run("upsampling_nearest", func(t *testing.T) {
		got, _ := runVisionLayer(t, &nn.UpSampling2D{LayerName: "u", Size: [2]int{2, 1}}, tensor.Shape{1, 2, 2, 1}, seq(4), false, nil)
		near(t, got, []float64{1, 2, 1, 2, 3, 4, 3, 4})
	})
	t.Run("zero_padding", func(t *testing.T) {
		got, _ := runVisionLayer(t, &nn.ZeroPadding2D{LayerName: "z", Padding: [2][2]int{{1, 0}, {0, 1}}}, tensor.Shape{1, 1, 2, 1}, seq(2), false, nil)
		near(t, got, []float64{0, 0, 0, 1, 2, 0})
	})
	t.Run("cropping", func(t *testing.T) {
		got, _ := runVisionLayer(t, &nn.Cropping2D{LayerName: "c", Cropping: [2][2]int{{1, 0}, {1, 1}}}, tensor.Shape{1, 2, 3, 1}, seq(6), false, nil)
		near(t, got, []float64{5})
	})
	t.Run("permute", func(t *testing.T) {
		got, _ := runVisionLayer(t, &nn.Permute{LayerName: "p", Dims: []int{2, 1}}, tensor.Shape{1, 2, 3}, seq(6), false, nil)
		near(t, got, []float64{1, 4, 2, 5, 3, 6})
	})
	t.Run("repeat_vector", func(t *testing.T) {
		got, _ := runVisionLayer(t, &nn.RepeatVector{LayerName: "r", Times: 2}, tensor.Shape{1, 2}, seq(2), false, nil)
		near(t, got, []float64{1, 2, 1, 2})
	})
	t.Run("rescaling", func(t *testing.T) {
		got, _ := runVisionLayer(t, &nn.Rescaling{LayerName: "r", Scale: 0.5, Offset: -1}, tensor.Shape{1, 3}, seq(3), false, nil)
		near(t, got, []float64{-0.5, 0, 0.5})
	})
	t.Run("normalization/weights", func(t *testing.T) {
		got, _ := runVisionLayer(t, &nn.Normalization{LayerName: "n"}, tensor.Shape{2, 2}, seq(4), false,
			map[string][]float64{"n/mean": {1, 2}, "n/variance": {4, 0}})
		// channel 1 has variance 0: divided by Keras' epsilon 1e-7
		near(t, got, []float64{0, 0, 1, 2 / 1e-7})
	})
	t.Run("normalization/invert_adapted", func(t *testing.T) {
		l := &nn.Normalization{LayerName: "n", Invert: true}
		if err := l.Adapt([]float32{1, 10, 3, 30}, tensor.Shape{2}); err != nil {
			t.Fatal(err)
		}
		// mean (2, 20), variance (1, 100)
		got, _ := runVisionLayer(t, l, tensor.Shape{1, 2}, []float64{1, -1}, false, nil)
		near(t, got, []float64{3, 10})
	})
	t.Run("prelu", func(t *testing.T) {
		got, _ := runVisionLayer(t, &nn.PReLU{LayerName: "p"}, tensor.Shape{1, 3}, []float64{-2, 0, 3}, false,
			map[string][]float64{"p/alpha": {0.5, 0.5, 0.5}})
		near(t, got, []float64{-1, 0, 3})
	})
	t.Run("relu_threshold", func(t *testing.T) {
		two := 2.0
		got, _ := runVisionLayer(t, &nn.ReLU{LayerName: "r", MaxValue: &two, NegativeSlope: 0.5, Threshold: 1}, tensor.Shape{1, 4}, []float64{-1, 0.5, 1.5, 3}, false, nil)
		// x > 1: min(x, 2); else -0.5·(1 - x)
		near(t, got, []float64{-1, -0.25, 1.5, 2})
	})
	t.Run("softmax_axis1", func(t *testing.T) {
		got, _ := runVisionLayer(t, &nn.Softmax{LayerName: "s", Axis: 1}, tensor.Shape{1, 2, 2}, []float64{0, 1, 0, 3}, false, nil)
		e := func(a, b float64) float64 { return math.Exp(a) / (math.Exp(a) + math.Exp(b)) }
		near(t, got, []float64{0.5, e(1, 3), 0.5, e(3, 1)})
	})
	t.Run("spatial_dropout", func(t *testing.T) {
		x := make([]float64, 2*3*3*8)
		for i := range x {
			x[i] = 1
		}
		got, _ := runVisionLayer(t, &nn.SpatialDropout2D{LayerName: "d", Rate: 0.5}, tensor.Shape{2, 3, 3, 8}, x, true, nil)
		dropped := 0
		for n := 0; n < 2; n++ {
			for c := 0; c < 8; c++ {
				first := got[(n*9)*8+c]
				if first != 0 && first != 2 {
					t.Fatalf("example %d channel %d: got %v, want 0 or 2", n, c, first)
				}
				if first == 0 {
					dropped++
				}
				for p := 1; p < 9; p++ { // one draw per example and channel
					if got[(n*9+p)*8+c] != first {
						t.Fatalf("example %d channel %d differs across pixels: %v vs %v", n, c, got[(n*9+p)*8+c], first)
					}
				}
			}
		}
		if dropped == 0 || dropped == 16 {
			t.Errorf("dropped %d of 16 channels at rate 0.5", dropped)
		}
	})
}

// TestBatchNormFoldsIntoConv: in inference a BatchNormalization after a
// Conv2D scales the filter instead of the output (no product over the
// output's elements), with the same values as the unfolded form.
func TestBatchNormFoldsIntoConv(t *testing.T) {
	in := tensor.Shape{2, 5, 5, 3}
	x := make([]float64, in.Size())
	for i := range x {
		x[i] = math.Sin(float64(i) * 0.7)
	}
	vars := map[string][]float64{
		"c/kernel":           seqScaled(3*3*3*4, 0.01),
		"bn/gamma":           {1.5, -0.5, 2, 0.7},
		"bn/beta":            {0.1, 0.2, -0.3, 0},
		"bn/moving_mean":     {0.5, -1, 2, 0},
		"bn/moving_variance": {2, 0.5, 1.5, 1},
	}
	build := func(fold bool) ([]float64, *graph.Graph) {
		en := newEngine(t)
		var g *graph.Graph
		p := en.load(func() (*graph.Graph, compileOptions) {
			g = graph.New()
			c := nn.NewContext(g, false, 1)
			c.DType = tensor.Float64
			xn := g.Input("x", tensor.Float64, in)
			h := (&nn.Conv2D{LayerName: "c", Filters: 4, Kernel: [2]int{3, 3}, Same: true, NoBias: true}).Forward(c, xn)
			if !fold {
				h = graph.AddScalar(h, 0) // not a convolution any more: no folding
			}
			y := (&nn.BatchNormalization{LayerName: "bn"}).Forward(c, h)
			return g, outputs("bn", "y", y)
		})
		for k, v := range vars {
			en.setVariable(k, v)
		}
		p.set("x", x)
		p.run()
		y, _ := p.get("y")
		return y, g
	}
	folded, g := build(true)
	plain, _ := build(false)
	for i := range plain {
		if math.Abs(folded[i]-plain[i]) > 1e-12*max(1, math.Abs(plain[i])) {
			t.Fatalf("element %d: folded %v, unfolded %v", i, folded[i], plain[i])
		}
	}
	for _, n := range g.Nodes() {
		if n.Op() == graph.OpMul && n.Shape().Size() == 2*5*5*4 {
			t.Errorf("the folded graph multiplies the output: %v", n)
		}
	}
}

func seqScaled(n int, s float64) []float64 {
	x := seq(n)
	for i := range x {
		x[i] = math.Cos(x[i]) * s * 10
	}
	return x
}
