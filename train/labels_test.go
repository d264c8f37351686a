package train_test

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// A model whose output does not match the data's labels is refused before
// step 1, naming both shapes and the loss: a convolution's [8, 8, 10]
// output per example against one class label per example (before, it
// trained and reported an accuracy of 31.3), and one binary output against
// ten classes.
func TestOutputMustMatchLabels(t *testing.T) {
	trainSet, testSet, err := datasets.Digits()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		model *nn.Sequential
		loss  nn.Loss
		want  []string // in the error
	}{
		{"per-pixel classes", &nn.Sequential{InputShape: tensor.Shape{8, 8, 1}, Layers: []nn.Layer{
			&nn.Conv2D{LayerName: "conv", Filters: 10, Kernel: [2]int{3, 3}, Same: true},
		}}, nil, []string{"[8, 8, 10]", "sparse_categorical_crossentropy", "[8, 8]", "one class label per example"}},
		{"one output for ten classes", &nn.Sequential{InputShape: tensor.Shape{8, 8, 1}, Layers: []nn.Layer{
			&nn.Flatten{LayerName: "flatten"}, &nn.Dense{LayerName: "dense", Units: 1, Activation: "sigmoid"},
		}}, nn.BinaryCrossentropy{}, []string{"[1]", "binary_crossentropy", "10 classes", "[10]"}},
		{"mse with three outputs", &nn.Sequential{InputShape: tensor.Shape{8, 8, 1}, Layers: []nn.Layer{
			&nn.Flatten{LayerName: "flatten"}, &nn.Dense{LayerName: "dense", Units: 3},
		}}, nn.MeanSquaredError{}, []string{"[3]", "mse", "10 classes"}},
		{"input of another shape", &nn.Sequential{InputShape: tensor.Shape{28, 28, 1}, Layers: []nn.Layer{
			&nn.Flatten{LayerName: "flatten"}, &nn.Dense{LayerName: "dense", Units: 10},
		}}, nil, []string{"[28, 28, 1]", "[8, 8, 1]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := train.Config{Model: c.model, Loss: c.loss, Epochs: 1, Batch: 32}
			tr, err := train.New(cfg, train.InMemory(trainSet, testSet))
			if err == nil {
				tr.Close()
				t.Fatal("New: nil error, want the mismatch refused before step 1")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if _, err := train.PlanFor(cfg, train.InMemory(trainSet, testSet)); err == nil {
				t.Error("PlanFor: nil error, want the mismatch")
			}
		})
	}
}

// Mean squared error and binary cross-entropy over class labels train on
// one-hot targets (what a Keras user gives these losses): the model learns
// and the reported accuracies are fractions in [0, 1].
func TestDistributionLossesOverClassLabels(t *testing.T) {
	trainSet, testSet, err := datasets.Digits()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		act  string
		loss nn.Loss
	}{
		{"mse on softmax", "softmax", nn.MeanSquaredError{}},
		{"binary cross-entropy on sigmoids", "sigmoid", nn.BinaryCrossentropy{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &nn.Sequential{InputShape: tensor.Shape{8, 8, 1}, Layers: []nn.Layer{
				&nn.Flatten{LayerName: "flatten"},
				&nn.Dense{LayerName: "dense", Units: 64, Activation: "relu"},
				&nn.Dense{LayerName: "dense_1", Units: 10, Activation: c.act},
			}}
			cfg := train.Config{Model: m, Loss: c.loss, Epochs: 8, Batch: 32, Seed: 1}
			tr, h := fitOn(t, cfg, train.InMemory(trainSet, testSet))
			defer tr.Close()
			for _, e := range h.Epochs {
				for _, a := range []float64{e.Accuracy, e.ValAccuracy} {
					if math.IsNaN(a) || a < 0 || a > 1 {
						t.Fatalf("epoch %d: accuracy %v, want a fraction in [0, 1]", e.Epoch, a)
					}
				}
			}
			last := h.Epochs[len(h.Epochs)-1]
			if last.ValAccuracy < 0.8 || !(last.Loss < h.Epochs[0].Loss) {
				t.Errorf("after %d epochs: val accuracy %.4f (want >= 0.8), loss %.4f -> %.4f (want falling)", len(h.Epochs), last.ValAccuracy, h.Epochs[0].Loss, last.Loss)
			}
			t.Logf("%s: val accuracy %.4f, loss %.4f -> %.4f", c.name, last.ValAccuracy, h.Epochs[0].Loss, last.Loss)
		})
	}
}

// A binary output against two classes is scored as Keras' binary accuracy.
func TestBinaryAccuracy(t *testing.T) {
	ds := blobs(2, 600, 8, 2)
	test := blobs(2, 200, 8, 2)
	m := &nn.Sequential{InputShape: tensor.Shape{8}, Layers: []nn.Layer{
		&nn.Dense{LayerName: "dense", Units: 16, Activation: "relu"},
		&nn.Dense{LayerName: "dense_1", Units: 1, Activation: "sigmoid"},
	}}
	cfg := train.Config{Model: m, Loss: nn.BinaryCrossentropy{}, Epochs: 5, Batch: 32, Seed: 1}
	tr, h := fitOn(t, cfg, train.InMemory(ds, test))
	defer tr.Close()
	last := h.Epochs[len(h.Epochs)-1]
	if last.Accuracy < 0.9 || last.Accuracy > 1 || last.ValAccuracy < 0.9 || last.ValAccuracy > 1 {
		t.Errorf("binary accuracy %.4f, val %.4f: want in [0.9, 1] on separable blobs", last.Accuracy, last.ValAccuracy)
	}
}
