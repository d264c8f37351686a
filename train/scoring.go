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
}

type scoreKind uint8

const (
	scoreNone   scoreKind = iota
	scoreArgmax           // argmax of an output [C] against a class label
	scoreBinary           // one output against a 0/1 label, at a threshold
)

// scoringFor returns how accuracy is counted for output o on data d.
func scoringFor(o step.OutputSpec, d *data.Examples) scoring {
	if d.Labels == nil {
		return scoring{}
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

// count returns how many rows of out (batch first) the labels in y got
// right; ok is false when accuracy is not counted. y holds class labels
// (int32) or their one-hot or 0/1 float form.
func (s scoring) count(out, y tensor.Tensor, training bool) (correct int, ok bool) {
	if s.kind == scoreNone || out.Shape().Rank() < 1 || y.Len() == 0 {
		return 0, false
	}
	rows := out.Shape()[0]
	c := out.Len() / max(rows, 1)
	label := func(r int) int {
		if y.DType() == tensor.Int32 {
			return int(y.Int32s()[r])
		}
		w := y.Len() / rows
		if w == 1 {
			if y.Float64At(r) >= 0.5 {
				return 1
			}
			return 0
		}
		best := 0
		for k := 1; k < w; k++ {
			if y.Float64At(r*w+k) > y.Float64At(r*w+best) {
				best = k
			}
		}
		return best
	}
	switch s.kind {
	case scoreArgmax:
		if out.DType() == tensor.Float32 && y.DType() == tensor.Int32 {
			o, ys := out.Float32s(), y.Int32s()
			for r := 0; r < rows; r++ {
				if argmax(o[r*c:(r+1)*c]) == int(ys[r]) {
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
			if best == label(r) {
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
			if pred == label(r) {
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
