package train

import (
	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// Per-pixel accuracy, for segmentation: an output [H, W, C] per example
// against class labels [H, W] (data.Examples.LabelShape), the fraction of
// pixels whose argmax over C is their label (Keras' "accuracy" on such a
// model: sparse categorical accuracy averaged over every pixel).

// pixelLabeler gives label p of row r of the batch just run.
type pixelLabeler interface {
	pixelLabel(r, p int) int
}

func (s *examplesSource) pixelLabel(r, p int) int {
	l := s.data.LabelSize()
	return int(s.data.Labels[s.idx[s.base+r]*l+p])
}

// pixelScoring scores output o per pixel when d's labels are one per cell
// of o but the last axis (the classes), else not at all.
func pixelScoring(o step.OutputSpec, d data.LabelKind) scoring {
	r := o.Shape.Rank()
	if r < 2 || o.Shape[r-1] < 2 || d.Classes > o.Shape[r-1] || !tensor.Shape(o.Shape[:r-1]).Equal(d.Shape) {
		return scoring{}
	}
	return scoring{kind: scorePixels, pixels: d.Shape.Size()}
}

// countPixels returns how many pixels of out (batch first, [..., C] per
// pixel) have their label as argmax.
func countPixels(out tensor.Tensor, lab labeler, pixels int) int {
	pl, ok := lab.(pixelLabeler)
	if !ok || pixels == 0 {
		return 0
	}
	rows := out.Shape()[0]
	c := out.Len() / max(rows*pixels, 1)
	correct := 0
	f32 := out.DType() == tensor.Float32
	var o []float32
	if f32 {
		o = out.Float32s()
	}
	for r := 0; r < rows; r++ {
		for p := 0; p < pixels; p++ {
			at := (r*pixels + p) * c
			best := 0
			if f32 {
				best = argmax(o[at : at+c])
			} else {
				for k := 1; k < c; k++ {
					if out.Float64At(at+k) > out.Float64At(at+best) {
						best = k
					}
				}
			}
			if best == pl.pixelLabel(r, p) {
				correct++
			}
		}
	}
	return correct
}
