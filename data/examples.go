package data

import (
	"fmt"

	"github.com/headroom-ml/headroom/tensor"
)

// Examples is an in-memory labelled data set: N examples of Shape, stored
// as uint8 pixels (scaled by Scale when fed) or as float32 features, with
// int32 class labels (one per example, or LabelShape of them: one per
// pixel for segmentation) or float32 targets. Package train feeds a
// model's input "x" and its label "y" from it.
type Examples struct {
	Name    string
	Shape   tensor.Shape // one example
	N       int
	Pixels  []uint8   // N*Shape.Size(), or nil
	Scale   float32   // feature = pixel * Scale
	Floats  []float32 // N*Shape.Size(), or nil
	Labels  []int32   // N*LabelShape.Size() class labels, or nil
	Targets []float32 // N*TargetSize float targets, or nil
	Classes int       // number of classes (labels in [0, Classes))
	// LabelShape is one example's labels: nil for one class label per
	// example, [H, W] for a label per pixel (segmentation).
	LabelShape tensor.Shape
}

// LabelSize returns the class labels of one example: 1, or
// LabelShape.Size().
func (e *Examples) LabelSize() int {
	if e.LabelShape == nil {
		return 1
	}
	return e.LabelShape.Size()
}

// Validate checks that the slices have the sizes N and Shape imply.
func (e *Examples) Validate() error {
	d := e.Shape.Size()
	switch {
	case e.N <= 0:
		return fmt.Errorf("data: data set %q is empty", e.Name)
	case e.Pixels != nil && len(e.Pixels) != e.N*d:
		return fmt.Errorf("data: data set %q has %d pixels, want %d x %d", e.Name, len(e.Pixels), e.N, d)
	case e.Floats != nil && len(e.Floats) != e.N*d:
		return fmt.Errorf("data: data set %q has %d features, want %d x %d", e.Name, len(e.Floats), e.N, d)
	case e.Pixels == nil && e.Floats == nil:
		return fmt.Errorf("data: data set %q has no features", e.Name)
	case e.Labels != nil && len(e.Labels) != e.N*e.LabelSize():
		return fmt.Errorf("data: data set %q has %d labels for %d examples of %v labels", e.Name, len(e.Labels), e.N, e.LabelShape)
	case e.Labels == nil && e.Targets == nil:
		return fmt.Errorf("data: data set %q has no labels", e.Name)
	case e.Targets != nil && len(e.Targets)%e.N != 0:
		return fmt.Errorf("data: data set %q has %d targets for %d examples", e.Name, len(e.Targets), e.N)
	}
	for i, l := range e.Labels {
		if l < 0 || (e.Classes > 0 && int(l) >= e.Classes) {
			return fmt.Errorf("data: data set %q: label %d of example %d is outside [0, %d)", e.Name, l, i/e.LabelSize(), e.Classes)
		}
	}
	return nil
}

// Bytes returns the memory the examples hold.
func (e *Examples) Bytes() int64 {
	return int64(len(e.Pixels) + 4*len(e.Floats) + 4*len(e.Labels) + 4*len(e.Targets))
}

// TargetSize returns the floats of one example's targets (0 without).
func (e *Examples) TargetSize() int {
	if e.Targets == nil || e.N == 0 {
		return 0
	}
	return len(e.Targets) / e.N
}

// Slice returns examples [lo, hi) sharing e's memory.
func (e *Examples) Slice(name string, lo, hi int) *Examples {
	d := e.Shape.Size()
	s := &Examples{Name: name, Shape: e.Shape, N: hi - lo, Scale: e.Scale, Classes: e.Classes, LabelShape: e.LabelShape}
	if e.Pixels != nil {
		s.Pixels = e.Pixels[lo*d : hi*d]
	}
	if e.Floats != nil {
		s.Floats = e.Floats[lo*d : hi*d]
	}
	if e.Labels != nil {
		l := e.LabelSize()
		s.Labels = e.Labels[lo*l : hi*l]
	}
	if e.Targets != nil {
		t := len(e.Targets) / e.N
		s.Targets = e.Targets[lo*t : hi*t]
	}
	return s
}

// LabelMode says how Examples feed a label input.
type LabelMode uint8

// The label modes.
const (
	LabelsAsIs    LabelMode = iota // int32 class labels, or float targets copied
	LabelsOneHot                   // class labels as one-hot float rows of Classes
	LabelsAsFloat                  // class labels as float values (0 or 1 for a binary output)
)

// LabelsFor says how e feeds a label input of dtype and shape (one
// example's, without the batch), or why it cannot: a loss over
// distributions (mean squared error, binary cross-entropy with one output
// per class) gets class labels one-hot, as Keras users give categorical
// targets to these losses; one float per example gets a binary class label
// as 0 or 1. The error names both shapes.
func (e *Examples) LabelsFor(dtype tensor.DType, shape tensor.Shape) (LabelMode, error) {
	return e.Kind().For(e.Name, dtype, shape)
}

// For says how labels of kind k, of the data set called name, feed a label
// input of dtype and shape (see Examples.LabelsFor).
func (k LabelKind) For(name string, dtype tensor.DType, shape tensor.Shape) (LabelMode, error) {
	have := "one class label per example"
	if !k.Class {
		have = fmt.Sprintf("float targets of %d per example", k.TargetSize)
	} else if k.Shape != nil {
		have = fmt.Sprintf("class labels of shape %v per example", k.Shape)
	}
	switch {
	case k.Shape != nil && k.Class:
		if dtype == tensor.Int32 && shape.Equal(k.Shape) {
			return LabelsAsIs, nil
		}
		return 0, fmt.Errorf("needs %s labels of shape %v per example; data set %q has %s", dtype, shape, name, have)
	case dtype == tensor.Int32 && k.Class && shape.Size() == 1:
		return LabelsAsIs, nil
	case dtype == tensor.Int32:
		return 0, fmt.Errorf("needs int32 class labels of shape %v per example; data set %q has %s", shape, name, have)
	case !dtype.IsFloat():
		return 0, fmt.Errorf("needs %s labels; data set %q has %s", dtype, name, have)
	case !k.Class && k.TargetSize == shape.Size():
		return LabelsAsIs, nil
	case !k.Class:
		return 0, fmt.Errorf("needs %v targets per example (%d floats); data set %q has %s", shape, shape.Size(), name, have)
	case k.Classes > 1 && shape.Size() == k.Classes && shape[shape.Rank()-1] == k.Classes:
		return LabelsOneHot, nil
	case shape.Size() == 1 && k.Classes <= 2:
		return LabelsAsFloat, nil
	}
	return 0, fmt.Errorf("needs float targets of shape %v per example; data set %q has %s of %d classes (one-hot labels would need shape [%d])", shape, name, have, k.Classes, k.Classes)
}

// Fill copies the examples idx into x (the model's input, batch first,
// float32 features or int32 token ids). It does not allocate.
func (e *Examples) Fill(x tensor.Tensor, idx []int) {
	d := e.Shape.Size()
	switch x.DType() {
	case tensor.Float32:
		xs := x.Float32s()
		for i, j := range idx {
			row := xs[i*d : (i+1)*d]
			if e.Floats != nil {
				copy(row, e.Floats[j*d:(j+1)*d])
				continue
			}
			for k, p := range e.Pixels[j*d : (j+1)*d] {
				row[k] = float32(p) * e.Scale
			}
		}
	case tensor.Int32: // token ids (Embedding input)
		xs := x.Int32s()
		for i, j := range idx {
			for k := 0; k < d; k++ {
				if e.Floats != nil {
					xs[i*d+k] = int32(e.Floats[j*d+k])
				} else {
					xs[i*d+k] = int32(e.Pixels[j*d+k])
				}
			}
		}
	}
}

// FillLabels copies the labels or targets of the examples idx into y
// (batch first) as mode says (see LabelsFor). It does not allocate.
func (e *Examples) FillLabels(y tensor.Tensor, idx []int, mode LabelMode) {
	if len(idx) == 0 {
		return
	}
	switch y.DType() {
	case tensor.Int32:
		ys := y.Int32s()
		if l := e.LabelSize(); l > 1 {
			for i, j := range idx {
				copy(ys[i*l:(i+1)*l], e.Labels[j*l:(j+1)*l])
			}
			return
		}
		for i, j := range idx {
			ys[i] = e.Labels[j]
		}
	case tensor.Float32:
		ys := y.Float32s()
		t := y.Len() / len(idx)
		for i, j := range idx {
			row := ys[i*t : (i+1)*t]
			switch mode {
			case LabelsOneHot:
				clear(row)
				row[e.Labels[j]] = 1
			case LabelsAsFloat:
				row[0] = float32(e.Labels[j])
			default:
				copy(row, e.Targets[j*t:(j+1)*t])
			}
		}
	}
}
