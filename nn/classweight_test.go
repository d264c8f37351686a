package nn_test

import (
	"slices"
	"testing"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// ClassWeighted scales each example's loss and its gradient by its class's
// weight.
func TestClassWeighted(t *testing.T) {
	weights := []float64{0.5, 2, 3}
	plain, _, pgrad := runLoss(t, nn.SparseCategoricalCrossentropy{}, tensor.Shape{4, 3}, ceLogits, ceLabels, identity)
	per, shape, grad := runLoss(t, nn.ClassWeighted{Loss: nn.SparseCategoricalCrossentropy{}, Weights: weights}, tensor.Shape{4, 3}, ceLogits, ceLabels, identity)
	if !shape.Equal(tensor.Shape{4}) {
		t.Fatalf("shape %v, want [4]", shape)
	}
	for i := range 4 {
		w := weights[int(ceLabels[i])]
		if !relClose(per[i], w*plain[i], 1e-13, 1e-15) {
			t.Errorf("example %d: loss %v, want %v x %v", i, per[i], w, plain[i])
		}
		for k := range 3 {
			if !relClose(grad[i*3+k], w*pgrad[i*3+k], 1e-12, 1e-15) {
				t.Errorf("example %d: gradient %v, want %v x %v", i, grad[i*3+k], w, pgrad[i*3+k])
			}
		}
	}
}

func TestBalancedClassWeights(t *testing.T) {
	// 6 examples, 3 classes: counts 3, 2, 1 (and a fourth class without any)
	got := nn.BalancedClassWeights([]int32{0, 0, 0, 1, 1, 2}, 4)
	want := []float64{6.0 / 12, 6.0 / 8, 6.0 / 4, 1}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
