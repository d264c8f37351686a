package nn_test

import (
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// TestVisionModels checks the reference models against the peers' counts:
// PyTorch's sum of parameters() for the ResNet-20 of peers/train.py
// (272,186), plus BatchNormalization's moving statistics for the total;
// and their layer makeup.
func TestVisionModels(t *testing.T) {
	tests := []struct {
		name             string
		in               tensor.Shape
		classes          int
		total, trainable int
		layers           map[string]int // layer type -> count
	}{
		// 21 convolutions (stem, 18 in blocks, 2 shortcuts), 21 BN of
		// 784 channels in all: 2·784 moving statistics beside the trainable;
		// the two 3x3 convolutions of stride 2 padded as PyTorch pads them
		{"resnet", tensor.Shape{28, 28, 1}, 10, 273754, 272186,
			map[string]int{"conv2d": 21, "batch_normalization": 21, "add": 9, "relu": 19, "global_average_pooling2d": 1, "dense": 1, "zero_padding2d": 2}},
		{"resnet", tensor.Shape{784}, 10, 273754, 272186, nil}, // a flat square input is read as 28x28x1
		{"unet", tensor.Shape{32, 32, 1}, 4, 116804, 116804,
			map[string]int{"conv2d": 11, "conv2d_transpose": 2, "concatenate": 2, "max_pooling2d": 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := nn.NewModel(tc.name, tc.in, tc.classes)
			if err != nil {
				t.Fatal(err)
			}
			total, trainable, err := nn.Params(m)
			if err != nil {
				t.Fatal(err)
			}
			if total != tc.total || trainable != tc.trainable {
				t.Errorf("params: got %d (%d trainable), want %d (%d trainable)", total, trainable, tc.total, tc.trainable)
			}
			if tc.layers == nil {
				return
			}
			got := map[string]int{}
			for _, l := range m.(*nn.Functional).Layers() {
				got[typeOf(l)]++
			}
			for k, want := range tc.layers {
				if got[k] != want {
					t.Errorf("%s layers: got %d, want %d (all: %v)", k, got[k], want, got)
				}
			}
		})
	}
	if _, err := nn.NewModel("unet", tensor.Shape{30, 30, 1}, 4); err == nil {
		t.Errorf("unet on 30x30 images: got no error, want one (sizes must be multiples of 4)")
	}
}

// typeOf returns the kind of layer l from its name, "conv2d_3" -> "conv2d".
func typeOf(l nn.MultiLayer) string {
	name := l.Name()
	if i := strings.LastIndexByte(name, '_'); i > 0 {
		return name[:i]
	}
	return name
}
