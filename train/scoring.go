package train

import (
	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// scoring says how accuracy is counted for a model's output and data (as
// Keras' "accuracy" metric picks categorical or binary accuracy from the
// output's shape), or that it is not counted (regression targets, outputs
// with more than one value per class): then History reports NaN.
type scoring struct {
	kind scoreKind
	// thresholds of a binary output: what the training step reports (the
	// logits a loss read, threshold 0) and what evaluation reports (the
	// output itself: probabilities after a sigmoid, threshold 0.5)
	trainAt, evalAt float64
	// pixels is the labels per example of a per-pixel score (0: one)
	pixels int
}

// units returns the scored units of one example: its pixels for a
// per-pixel score, else 1.
func (s scoring) units() int { return max(1, s.pixels) }

type scoreKind uint8

const (
	scoreNone   scoreKind = iota
	scoreArgmax           // argmax of an output [C] against a class label
	scoreBinary           // one output against a 0/1 label, at a threshold
	scorePixels           // argmax of each pixel's [C] of an output [H, W, C] against its label (pixels.go)
)

// scoringFor returns how accuracy is counted for output o on labels of
// kind d.
func scoringFor(o step.OutputSpec, d data.LabelKind) scoring {
	if !d.Class {
		return scoring{}
	}
	if d.Shape != nil {
		return pixelScoring(o, d)
	}
	switch {
	case o.Shape.Rank() == 1 && o.Shape[0] > 1 && d.Classes <= o.Shape[0]:
		return scoring{kind: scoreArgmax}
	case o.Shape.Size() == 1 && d.Classes <= 2:
		s := scoring{kind: scoreBinary, trainAt: 0.5, evalAt: 0.5}
		if o.Sigmoid {
			s.trainAt = 0 // the training step reports the logits
		} else if _, ok := o.Loss.(nn.BinaryCrossentropy); ok {
			s.trainAt, s.evalAt = 0, 0 // a linear output read as logits
		}
		return s
	}
	return scoring{}
}

// labeler gives the class label of row r of the batch just run: the data's
// own label, not the label input (which may be one-hot or 0/1 floats).
type labeler interface {
	label(r int) int
}

// count returns how many rows of out (batch first) match their class
// label; ok is false when accuracy is not counted.
func (s scoring) count(out tensor.Tensor, lab labeler, training bool) (correct int, ok bool) {
	if s.kind == scoreNone || out.Shape().Rank() < 1 {
		return 0, false
	}
	rows := out.Shape()[0]
	c := out.Len() / max(rows, 1)
	switch s.kind {
	case scorePixels:
		return countPixels(out, lab, s.pixels), true
	case scoreArgmax:
		if out.DType() == tensor.Float32 {
			o := out.Float32s()
			for r := 0; r < rows; r++ {
				if argmax(o[r*c:(r+1)*c]) == lab.label(r) {
					correct++
				}
			}
			return correct, true
		}
		for r := 0; r < rows; r++ {
			best := 0
			for k := 1; k < c; k++ {
				if out.Float64At(r*c+k) > out.Float64At(r*c+best) {
					best = k
				}
			}
			if best == lab.label(r) {
				correct++
			}
		}
	case scoreBinary:
		at := s.evalAt
		if training {
			at = s.trainAt
		}
		for r := 0; r < rows; r++ {
			pred := 0
			if out.Float64At(r) > at {
				pred = 1
			}
			if pred == lab.label(r) {
				correct++
			}
		}
	}
	return correct, true
}

func argmax(row []float32) int {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return best
}
