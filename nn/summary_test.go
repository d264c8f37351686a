package nn_test

import (
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// Output shapes and parameter counts as keras.Model.summary() prints them
// (batch dimension left out). The counts are worked out in the comments from
// Keras' formulas: Dense in·units + units; Conv2D kh·kw·cin·filters +
// filters; BatchNormalization 4·C (gamma, beta, moving mean and variance);
// LayerNormalization 2·C; Embedding V·D. Output sizes: valid
// ⌊(n − k)/s⌋ + 1, same ⌈n/s⌉.
func TestLayerShapesAndParams(t *testing.T) {
	type layer struct {
		l      nn.Layer
		shape  tensor.Shape
		params int
	}
	tests := []struct {
		name   string
		input  tensor.Shape
		dtype  tensor.DType
		layers []layer
	}{
		{"dense", tensor.Shape{784}, 0, []layer{
			{&nn.Dense{LayerName: "d", Units: 10}, tensor.Shape{10}, 784*10 + 10}, // 7850
		}},
		{"dense/no_bias", tensor.Shape{64}, 0, []layer{
			{&nn.Dense{LayerName: "d", Units: 32, NoBias: true}, tensor.Shape{32}, 64 * 32},
		}},
		{"dense/on_sequence", tensor.Shape{5, 16}, 0, []layer{ // applied to the last axis
			{&nn.Dense{LayerName: "d", Units: 8}, tensor.Shape{5, 8}, 16*8 + 8},
		}},
		{"conv2d/valid", tensor.Shape{28, 28, 1}, 0, []layer{
			{&nn.Conv2D{LayerName: "c", Filters: 32, Kernel: [2]int{3, 3}}, tensor.Shape{26, 26, 32}, 3*3*1*32 + 32}, // 320
			{&nn.Conv2D{LayerName: "c1", Filters: 64, Kernel: [2]int{3, 3}}, tensor.Shape{24, 24, 64}, 3*3*32*64 + 64},
		}},
		{"conv2d/same_stride2", tensor.Shape{28, 28, 3}, 0, []layer{
			{&nn.Conv2D{LayerName: "c", Filters: 16, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true}, tensor.Shape{14, 14, 16}, 3*3*3*16 + 16},
			{&nn.Conv2D{LayerName: "c1", Filters: 8, Kernel: [2]int{5, 5}, Strides: [2]int{2, 2}, Same: true}, tensor.Shape{7, 7, 8}, 5*5*16*8 + 8},
			{&nn.Conv2D{LayerName: "c2", Filters: 4, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true}, tensor.Shape{4, 4, 4}, 3*3*8*4 + 4}, // ⌈7/2⌉
			{&nn.Conv2D{LayerName: "c3", Filters: 2, Kernel: [2]int{1, 1}, NoBias: true}, tensor.Shape{4, 4, 2}, 4 * 2},
		}},
		{"conv2d/valid_stride2_rect", tensor.Shape{7, 10, 2}, 0, []layer{
			{&nn.Conv2D{LayerName: "c", Filters: 5, Kernel: [2]int{3, 2}, Strides: [2]int{2, 3}}, tensor.Shape{3, 3, 5}, 3*2*2*5 + 5}, // ⌊4/2⌋+1, ⌊8/3⌋+1
		}},
		{"pooling", tensor.Shape{26, 26, 32}, 0, []layer{
			{&nn.Pool2D{LayerName: "mp", Max: true, Pool: [2]int{2, 2}}, tensor.Shape{13, 13, 32}, 0},
			{&nn.Pool2D{LayerName: "ap", Pool: [2]int{2, 2}}, tensor.Shape{6, 6, 32}, 0},                         // ⌊(13−2)/2⌋+1
			{&nn.Pool2D{LayerName: "mp1", Max: true, Pool: [2]int{2, 2}, Same: true}, tensor.Shape{3, 3, 32}, 0}, // ⌈6/2⌉
			{&nn.Pool2D{LayerName: "mp2", Max: true, Pool: [2]int{2, 2}, Same: true}, tensor.Shape{2, 2, 32}, 0}, // ⌈3/2⌉
			{&nn.Pool2D{LayerName: "ap1", Pool: [2]int{2, 2}, Strides: [2]int{1, 1}}, tensor.Shape{1, 1, 32}, 0}, // ⌊(2−2)/1⌋+1
		}},
		{"pooling/strides", tensor.Shape{9, 9, 4}, 0, []layer{
			{&nn.Pool2D{LayerName: "ap", Pool: [2]int{3, 3}, Strides: [2]int{1, 1}}, tensor.Shape{7, 7, 4}, 0},
			{&nn.Pool2D{LayerName: "mp", Max: true, Pool: [2]int{3, 3}, Strides: [2]int{2, 2}}, tensor.Shape{3, 3, 4}, 0},
		}},
		{"batchnorm", tensor.Shape{26, 26, 32}, 0, []layer{
			{&nn.BatchNormalization{LayerName: "bn"}, tensor.Shape{26, 26, 32}, 4 * 32},
		}},
		{"batchnorm/dense", tensor.Shape{100}, 0, []layer{
			{&nn.BatchNormalization{LayerName: "bn"}, tensor.Shape{100}, 4 * 100},
		}},
		{"layernorm", tensor.Shape{10, 16}, 0, []layer{
			{&nn.LayerNormalization{LayerName: "ln"}, tensor.Shape{10, 16}, 2 * 16},
		}},
		{"embedding", tensor.Shape{20}, tensor.Int32, []layer{
			{&nn.Embedding{LayerName: "emb", InputDim: 1000, OutputDim: 64}, tensor.Shape{20, 64}, 1000 * 64},
			{&nn.Flatten{LayerName: "f"}, tensor.Shape{20 * 64}, 0},
		}},
		{"global_average_pooling", tensor.Shape{7, 7, 64}, 0, []layer{
			{&nn.GlobalAveragePooling2D{LayerName: "gap"}, tensor.Shape{64}, 0},
			{&nn.Dense{LayerName: "d", Units: 10}, tensor.Shape{10}, 64*10 + 10},
		}},
		{"flatten_dropout_activation", tensor.Shape{26, 26, 32}, 0, []layer{
			{&nn.Flatten{LayerName: "f"}, tensor.Shape{26 * 26 * 32}, 0}, // 21632
			{&nn.Dropout{LayerName: "drop", Rate: 0.5}, tensor.Shape{21632}, 0},
			{&nn.Activation{LayerName: "act", Fn: "relu"}, tensor.Shape{21632}, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &nn.Sequential{InputShape: tc.input, InputDType: tc.dtype}
			for _, l := range tc.layers {
				m.Layers = append(m.Layers, l.l)
			}
			infos, total, err := m.Summary()
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) != len(tc.layers) {
				t.Fatalf("got %d summary lines, want %d", len(infos), len(tc.layers))
			}
			want := 0
			for i, l := range tc.layers {
				got := infos[i]
				if got.Name != l.l.Name() {
					t.Errorf("line %d: name %q, want %q", i, got.Name, l.l.Name())
				}
				if !got.Output.Equal(l.shape) {
					t.Errorf("%s (%s): output %v, want %v", got.Name, got.Type, got.Output, l.shape)
				}
				if got.Params != l.params {
					t.Errorf("%s (%s): %d params, want %d", got.Name, got.Type, got.Params, l.params)
				}
				want += l.params
			}
			if total != want {
				t.Errorf("total %d params, want %d", total, want)
			}
		})
	}
}

func TestSummaryTypeNames(t *testing.T) {
	m := &nn.Sequential{InputShape: tensor.Shape{8, 8, 3}, Layers: []nn.Layer{
		&nn.Conv2D{LayerName: "a", Filters: 2, Kernel: [2]int{3, 3}},
		&nn.BatchNormalization{LayerName: "b"},
		&nn.Activation{LayerName: "c", Fn: "relu"},
		&nn.Pool2D{LayerName: "d", Max: true, Pool: [2]int{2, 2}},
		&nn.Pool2D{LayerName: "e", Pool: [2]int{1, 1}},
		&nn.GlobalAveragePooling2D{LayerName: "f"},
		&nn.LayerNormalization{LayerName: "g"},
		&nn.Dropout{LayerName: "h", Rate: 0.1},
		&nn.Flatten{LayerName: "i"},
		&nn.Dense{LayerName: "j", Units: 3},
	}}
	want := []string{"Conv2D", "BatchNormalization", "Activation", "MaxPooling2D", "AveragePooling2D",
		"GlobalAveragePooling2D", "LayerNormalization", "Dropout", "Flatten", "Dense"}
	infos, _, err := m.Summary()
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if infos[i].Type != w {
			t.Errorf("layer %s: type %q, want %q", infos[i].Name, infos[i].Type, w)
		}
	}
}

// BatchNormalization has 4·C weights, of which gamma and beta (2·C) are
// trainable; LayerNormalization's 2·C are all trainable.
func TestTrainableWeights(t *testing.T) {
	tests := []struct {
		l                    nn.Layer
		in                   tensor.Shape
		trainable, nonTrain  []string
		trainableN, totalNum int
	}{
		{&nn.BatchNormalization{LayerName: "bn"}, tensor.Shape{4, 6, 6, 32},
			[]string{"bn/gamma", "bn/beta"}, []string{"bn/moving_mean", "bn/moving_variance"}, 2 * 32, 4 * 32},
		{&nn.LayerNormalization{LayerName: "ln"}, tensor.Shape{4, 16},
			[]string{"ln/gamma", "ln/beta"}, nil, 32, 32},
		{&nn.Dense{LayerName: "d", Units: 3}, tensor.Shape{4, 5}, []string{"d/kernel", "d/bias"}, nil, 18, 18},
		{&nn.Conv2D{LayerName: "c", Filters: 3, Kernel: [2]int{2, 2}}, tensor.Shape{1, 4, 4, 2},
			[]string{"c/kernel", "c/bias"}, nil, 2*2*2*3 + 3, 2*2*2*3 + 3},
		{&nn.Embedding{LayerName: "e", InputDim: 7, OutputDim: 3}, tensor.Shape{2, 5}, []string{"e/embeddings"}, nil, 21, 21},
	}
	for _, tc := range tests {
		t.Run(tc.l.Name(), func(t *testing.T) {
			g := graph.New()
			c := nn.NewContext(g, true, 1)
			dt := tensor.Float32
			if _, ok := tc.l.(*nn.Embedding); ok {
				dt = tensor.Int32
			}
			tc.l.Forward(c, g.Input("x", dt, tc.in))
			names := func(ns []*graph.Node) (out []string, size int) {
				for _, n := range ns {
					out = append(out, n.Attr().Name)
					size += n.Shape().Size()
				}
				return out, size
			}
			tr, trN := names(c.Trainable)
			all, allN := names(c.Weights)
			if strings.Join(tr, ",") != strings.Join(tc.trainable, ",") {
				t.Errorf("trainable %v, want %v", tr, tc.trainable)
			}
			if want := append(append([]string(nil), tc.trainable...), tc.nonTrain...); strings.Join(all, ",") != strings.Join(want, ",") {
				t.Errorf("weights %v, want %v", all, want)
			}
			if trN != tc.trainableN || allN != tc.totalNum {
				t.Errorf("trainable %d, total %d params, want %d and %d", trN, allN, tc.trainableN, tc.totalNum)
			}
			for _, w := range c.Weights {
				if c.Init[w.Attr().Name] == nil {
					t.Errorf("weight %q has no initializer", w.Attr().Name)
				}
			}
		})
	}
}

// The reference models' sizes. mlp on [784]: 784·1024+1024 = 803,840;
// 1024·1024+1024 = 1,049,600; 1024·10+10 = 10,250; total 1,863,690.
// cnn on [28,28,1]: conv 3·3·1·32+32 = 320 -> [26,26,32]; conv
// 3·3·32·64+64 = 18,496 -> [24,24,64]; pool -> [12,12,64]; flatten 9,216;
// dense 9,216·128+128 = 1,179,776; dense 128·10+10 = 1,290; total
// 1,199,882 (Keras' MNIST CNN without its dropouts).
func TestModelByName(t *testing.T) {
	tests := []struct {
		model   string
		input   tensor.Shape
		classes int
		shapes  []tensor.Shape
		params  []int
	}{
		{"mlp", tensor.Shape{784}, 10,
			[]tensor.Shape{{784}, {1024}, {1024}, {10}},
			[]int{0, 784*1024 + 1024, 1024*1024 + 1024, 1024*10 + 10}},
		{"mlp", tensor.Shape{28, 28, 1}, 10, // flattens an image
			[]tensor.Shape{{784}, {1024}, {1024}, {10}},
			[]int{0, 784*1024 + 1024, 1024*1024 + 1024, 1024*10 + 10}},
		{"cnn", tensor.Shape{28, 28, 1}, 10,
			[]tensor.Shape{{26, 26, 32}, {24, 24, 64}, {12, 12, 64}, {9216}, {128}, {10}},
			[]int{320, 18496, 0, 0, 9216*128 + 128, 1290}},
		{"cnn", tensor.Shape{784}, 10, // a flat square input is read as [28, 28, 1]
			[]tensor.Shape{{26, 26, 32}, {24, 24, 64}, {12, 12, 64}, {9216}, {128}, {10}},
			[]int{320, 18496, 0, 0, 9216*128 + 128, 1290}},
		{"cnn", tensor.Shape{8, 8}, 10, // [H, W] gains a channel: 8→6→4→2
			[]tensor.Shape{{6, 6, 32}, {4, 4, 64}, {2, 2, 64}, {256}, {128}, {10}},
			[]int{320, 18496, 0, 0, 256*128 + 128, 1290}},
		{"small", tensor.Shape{8, 8, 1}, 10,
			[]tensor.Shape{{64}, {128}, {10}},
			[]int{0, 64*128 + 128, 128*10 + 10}},
		{"small", tensor.Shape{20}, 3,
			[]tensor.Shape{{20}, {128}, {3}},
			[]int{0, 20*128 + 128, 128*3 + 3}},
	}
	for _, tc := range tests {
		t.Run(tc.model+tc.input.String(), func(t *testing.T) {
			m, err := nn.ModelByName(tc.model, tc.input, tc.classes)
			if err != nil {
				t.Fatal(err)
			}
			infos, total, err := m.Summary()
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) != len(tc.shapes) {
				t.Fatalf("got %d layers, want %d", len(infos), len(tc.shapes))
			}
			want := 0
			for i, info := range infos {
				if !info.Output.Equal(tc.shapes[i]) || info.Params != tc.params[i] {
					t.Errorf("%s: output %v with %d params, want %v with %d", info.Name, info.Output, info.Params, tc.shapes[i], tc.params[i])
				}
				want += tc.params[i]
			}
			if total != want {
				t.Errorf("total %d params, want %d", total, want)
			}
		})
	}
	// The two totals quoted in the project's documents, from the sums above.
	for _, tc := range []struct {
		model string
		input tensor.Shape
		want  int
	}{{"mlp", tensor.Shape{784}, 1863690}, {"cnn", tensor.Shape{28, 28, 1}, 1199882}} {
		m, _ := nn.ModelByName(tc.model, tc.input, 10)
		if _, total, err := m.Summary(); err != nil || total != tc.want {
			t.Errorf("%s on %v: %d params (err %v), want %d", tc.model, tc.input, total, err, tc.want)
		}
	}
}

func TestModelByNameErrors(t *testing.T) {
	tests := []struct {
		model string
		input tensor.Shape
		want  []string
	}{
		{"resnet", tensor.Shape{784}, []string{"resnet", "small", "mlp", "cnn"}},
		{"cnn", tensor.Shape{10}, []string{"cnn", "image", "[10]"}},        // 10 is not a square
		{"cnn", tensor.Shape{2, 3, 4, 5}, []string{"cnn", "[2, 3, 4, 5]"}}, // rank 4
	}
	for _, tc := range tests {
		t.Run(tc.model+tc.input.String(), func(t *testing.T) {
			m, err := nn.ModelByName(tc.model, tc.input, 10)
			if err == nil {
				t.Fatalf("ModelByName(%q, %v) = %v, want an error", tc.model, tc.input, m)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// A model that does not fit its input is an error from Summary, not a panic.
func TestSummaryErrors(t *testing.T) {
	tests := []struct {
		name string
		m    *nn.Sequential
		want string
	}{
		{"conv_on_flat", &nn.Sequential{InputShape: tensor.Shape{64}, Layers: []nn.Layer{
			&nn.Conv2D{LayerName: "conv", Filters: 4, Kernel: [2]int{3, 3}}}}, "conv"},
		{"kernel_larger_than_input", &nn.Sequential{InputShape: tensor.Shape{2, 2, 1}, Layers: []nn.Layer{
			&nn.Conv2D{LayerName: "conv", Filters: 4, Kernel: [2]int{3, 3}}}}, "conv"},
		{"unknown_activation", &nn.Sequential{InputShape: tensor.Shape{4}, Layers: []nn.Layer{
			&nn.Dense{LayerName: "d", Units: 2, Activation: "swishy"}}}, "swishy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.m.Summary()
			if err == nil {
				t.Fatal("Summary succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}
