package data

import (
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// pixelSet is 3 examples of [2, 2] pixels with a class label per pixel.
func pixelSet() *Examples {
	e := &Examples{Name: "seg", Shape: tensor.Shape{2, 2, 1}, N: 3, Pixels: make([]uint8, 12), Scale: 1,
		Labels: make([]int32, 12), Classes: 4, LabelShape: tensor.Shape{2, 2}}
	for i := range e.Labels {
		e.Labels[i] = int32(i % 4)
		e.Pixels[i] = uint8(i)
	}
	return e
}

func TestPerPixelLabels(t *testing.T) {
	e := pixelSet()
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := e.LabelSize(); got != 4 {
		t.Errorf("LabelSize: got %d, want 4", got)
	}
	s := e.Slice("tail", 1, 3)
	if s.N != 2 || len(s.Labels) != 8 || s.Labels[0] != e.Labels[4] || !s.LabelShape.Equal(e.LabelShape) {
		t.Errorf("Slice(1, 3): got N=%d labels %v shape %v, want 2 examples from label 4 on, shape [2 2]", s.N, s.Labels, s.LabelShape)
	}
	mode, err := e.LabelsFor(tensor.Int32, tensor.Shape{2, 2})
	if err != nil || mode != LabelsAsIs {
		t.Fatalf("LabelsFor(int32 [2 2]): got %v, %v; want LabelsAsIs", mode, err)
	}
	y := tensor.New(tensor.Int32, tensor.Shape{2, 2, 2})
	e.FillLabels(y, []int{2, 0}, mode)
	want := []int32{0, 1, 2, 3, 0, 1, 2, 3}
	for i, v := range y.Int32s() {
		if v != want[i] {
			t.Fatalf("FillLabels(2, 0): got %v, want %v", y.Int32s(), want)
		}
	}
	for _, bad := range []struct {
		dt    tensor.DType
		shape tensor.Shape
	}{{tensor.Int32, tensor.Shape{}}, {tensor.Int32, tensor.Shape{4}}, {tensor.Float32, tensor.Shape{2, 2}}} {
		if _, err := e.LabelsFor(bad.dt, bad.shape); err == nil || !strings.Contains(err.Error(), "[2, 2]") {
			t.Errorf("LabelsFor(%s %v): got %v, want an error naming the labels' shape [2, 2]", bad.dt, bad.shape, err)
		}
	}
}

func TestPerPixelLabelsValidate(t *testing.T) {
	e := pixelSet()
	e.Labels = e.Labels[:11]
	if err := e.Validate(); err == nil || !strings.Contains(err.Error(), "11 labels") {
		t.Errorf("11 labels for 3 examples of [2 2]: got %v, want an error", err)
	}
	e = pixelSet()
	e.Labels[9] = 7
	if err := e.Validate(); err == nil || !strings.Contains(err.Error(), "example 2") {
		t.Errorf("label 7 of 4 classes in example 2: got %v, want an error naming example 2", err)
	}
	// one label per example (LabelShape nil) keeps its old meaning
	e = &Examples{Name: "cls", Shape: tensor.Shape{2}, N: 2, Floats: make([]float32, 4), Labels: []int32{1, 0}, Classes: 2}
	if err := e.Validate(); err != nil || e.LabelSize() != 1 {
		t.Errorf("per-example labels: got %v, LabelSize %d; want valid, 1", err, e.LabelSize())
	}
}
