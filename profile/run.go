package profile

import "github.com/headroom-ml/headroom/mem"

// Run is what the reports show of a training run besides its plan: the
// figures of the run and each epoch's losses (package train's History
// carries them; the caller copies them here, so profile imports no train).
type Run struct {
	Epochs        []Epoch
	Steps         int64
	FirstLoss     float64
	LastLoss      float64
	SamplesPerSec float64
	TrainSeconds  float64
	MeasuredPeak  int64
	LedgerGrowth  int64
	Growth        []mem.Entry
}

// Epoch is one epoch of a Run (NaN where a figure does not apply).
type Epoch struct {
	Epoch                                int // counted from 1
	Loss, Accuracy, ValLoss, ValAccuracy float64
}
