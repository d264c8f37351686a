package train

import (
	"fmt"

	"github.com/headroom-ml/headroom/tensor"
)

// Examples is an in-memory labelled data set: N examples of Shape, stored
// as uint8 pixels (scaled by Scale when fed) or as float32 features, with
// int32 class labels or float32 targets.
type Examples struct {
	Name    string
	Shape   tensor.Shape // one example
	N       int
	Pixels  []uint8   // N*Shape.Size(), or nil
	Scale   float32   // feature = pixel * Scale
	Floats  []float32 // N*Shape.Size(), or nil
	Labels  []int32   // N class labels, or nil
	Targets []float32 // N*TargetSize float targets, or nil
	Classes int       // number of classes (labels in [0, Classes))
}

// Validate checks that the slices have the sizes N and Shape imply.
func (e *Examples) Validate() error {
	d := e.Shape.Size()
	switch {
	case e.N <= 0:
		return fmt.Errorf("train: data set %q is empty", e.Name)
	case e.Pixels != nil && len(e.Pixels) != e.N*d:
		return fmt.Errorf("train: data set %q has %d pixels, want %d x %d", e.Name, len(e.Pixels), e.N, d)
	case e.Floats != nil && len(e.Floats) != e.N*d:
		return fmt.Errorf("train: data set %q has %d features, want %d x %d", e.Name, len(e.Floats), e.N, d)
	case e.Pixels == nil && e.Floats == nil:
		return fmt.Errorf("train: data set %q has no features", e.Name)
	case e.Labels != nil && len(e.Labels) != e.N:
		return fmt.Errorf("train: data set %q has %d labels for %d examples", e.Name, len(e.Labels), e.N)
	case e.Labels == nil && e.Targets == nil:
		return fmt.Errorf("train: data set %q has no labels", e.Name)
	}
	for i, l := range e.Labels {
		if l < 0 || (e.Classes > 0 && int(l) >= e.Classes) {
			return fmt.Errorf("train: data set %q: label %d of example %d is outside [0, %d)", e.Name, l, i, e.Classes)
		}
	}
	return nil
}

// Bytes returns the memory the examples hold.
func (e *Examples) Bytes() int64 {
	return int64(len(e.Pixels) + 4*len(e.Floats) + 4*len(e.Labels) + 4*len(e.Targets))
}

// Slice returns examples [lo, hi) sharing e's memory.
func (e *Examples) Slice(name string, lo, hi int) *Examples {
	d := e.Shape.Size()
	s := &Examples{Name: name, Shape: e.Shape, N: hi - lo, Scale: e.Scale, Classes: e.Classes}
	if e.Pixels != nil {
		s.Pixels = e.Pixels[lo*d : hi*d]
	}
	if e.Floats != nil {
		s.Floats = e.Floats[lo*d : hi*d]
	}
	if e.Labels != nil {
		s.Labels = e.Labels[lo:hi]
	}
	if e.Targets != nil {
		t := len(e.Targets) / e.N
		s.Targets = e.Targets[lo*t : hi*t]
	}
	return s
}

// fill copies the examples idx into x (float32 features, batch first) and
// their labels or targets into y. It does not allocate.
func (e *Examples) fill(x, y tensor.Tensor, idx []int) {
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
	switch y.DType() {
	case tensor.Int32:
		ys := y.Int32s()
		for i, j := range idx {
			ys[i] = e.Labels[j]
		}
	case tensor.Float32:
		ys := y.Float32s()
		t := y.Len() / len(idx)
		for i, j := range idx {
			if e.Targets != nil {
				copy(ys[i*t:(i+1)*t], e.Targets[j*t:(j+1)*t])
			} else {
				ys[i] = float32(e.Labels[j])
			}
		}
	}
}
