package nn

import (
	"fmt"

	"github.com/headroom-ml/headroom/tensor"
)

// Models lists the models NewModel builds: the Sequential ones of
// ModelByName, then those registered (RegisterModel), in order.
var Models = []string{"small", "mlp", "cnn"}

// registered maps a model name to its builder (RegisterModel).
var registered = map[string]func(input tensor.Shape, classes int) (Model, error){}

// RegisterModel makes NewModel build name with f (for examples of shape
// input and classes outputs); reference models kept in files of their own
// register themselves: var _ = RegisterModel("resnet", resnet). It panics
// on a name taken (a programming error).
func RegisterModel(name string, f func(input tensor.Shape, classes int) (Model, error)) bool {
	if _, ok := registered[name]; ok || name == "small" || name == "mlp" || name == "cnn" {
		panic("nn: model " + name + " registered twice")
	}
	registered[name] = f
	Models = append(Models, name)
	return true
}

// NewModel returns the project's model name for examples of shape input
// and classes outputs: a Sequential of ModelByName, or a registered one.
func NewModel(name string, input tensor.Shape, classes int) (Model, error) {
	if f, ok := registered[name]; ok {
		return f(input, classes)
	}
	return ModelByName(name, input, classes)
}

// ModelByName returns one of the project's Sequential models for examples
// of shape input and `classes` outputs (logits):
//   - small: input -> dense 128 relu -> classes; the default, sized for
//     8x8 digits.
//   - mlp: the reference MLP of BENCHMARKS.md: input -> 1024 relu ->
//     1024 relu -> classes.
//   - cnn: the reference CNN: conv 3x3x32 relu -> conv 3x3x64 relu ->
//     maxpool 2 -> flatten -> dense 128 relu -> classes (valid padding, as
//     the Keras MNIST CNN). It needs an image input [H, W, C]; a flat input
//     whose size is a square is read as [s, s, 1].
//
// Like Keras models, they take their input shape from the data.
func ModelByName(name string, input tensor.Shape, classes int) (*Sequential, error) {
	flat := &Flatten{LayerName: "flatten"}
	switch name {
	case "small":
		return &Sequential{Name: name, InputShape: input, Layers: []Layer{
			flat,
			&Dense{LayerName: "dense", Units: 128, Activation: "relu"},
			&Dense{LayerName: "dense_1", Units: classes},
		}}, nil
	case "mlp":
		return &Sequential{Name: name, InputShape: input, Layers: []Layer{
			flat,
			&Dense{LayerName: "dense", Units: 1024, Activation: "relu"},
			&Dense{LayerName: "dense_1", Units: 1024, Activation: "relu"},
			&Dense{LayerName: "dense_2", Units: classes},
		}}, nil
	case "cnn":
		img, err := imageShape(input)
		if err != nil {
			return nil, err
		}
		return &Sequential{Name: name, InputShape: img, Layers: []Layer{
			&Conv2D{LayerName: "conv2d", Filters: 32, Kernel: [2]int{3, 3}, Activation: "relu"},
			&Conv2D{LayerName: "conv2d_1", Filters: 64, Kernel: [2]int{3, 3}, Activation: "relu"},
			&Pool2D{LayerName: "max_pooling2d", Max: true, Pool: [2]int{2, 2}},
			&Flatten{LayerName: "flatten"},
			&Dense{LayerName: "dense", Units: 128, Activation: "relu"},
			&Dense{LayerName: "dense_1", Units: classes},
		}}, nil
	}
	return nil, fmt.Errorf("nn: unknown model %q (known: %v)", name, Models)
}

func imageShape(s tensor.Shape) (tensor.Shape, error) {
	switch s.Rank() {
	case 3:
		return s, nil
	case 2:
		return tensor.Shape{s[0], s[1], 1}, nil
	case 1:
		for side := 1; side*side <= s[0]; side++ {
			if side*side == s[0] {
				return tensor.Shape{side, side, 1}, nil
			}
		}
	}
	return nil, fmt.Errorf("nn: the cnn needs image input, got examples of shape %v", s)
}
