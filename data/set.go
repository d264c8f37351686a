package data

import (
	"fmt"

	"github.com/headroom-ml/headroom/tensor"
)

// Set is a data set that can say what it holds before it is read, and can
// be read in two ways: whole, into memory (Load), or in batches from its
// storage every epoch (Stream). The built-in data sets (package datasets)
// and the user's files (Files) are Sets. A trainer asks first, so that it
// can plan the run, refuse it or choose to stream before anything large is
// read: the memory a run takes is checked before the data set is loaded
// or generated.
type Set interface {
	// Describe returns the training examples' description, without their
	// data, and the held-out examples' count; ok is false when that takes
	// reading the set (a folder of the user's files), whose Bytes then
	// bounds what loading it would take.
	Describe() (info SetInfo, ok bool)
	// Bytes returns about how many bytes Load would hold (training and
	// held-out examples), from sizes alone: file sizes, headers, counts.
	Bytes() (int64, error)
	// Load reads the training examples and the held-out examples (nil
	// without) into memory.
	Load() (trainSet, heldOut *Examples, err error)
	// Stream prepares to read the training examples each epoch without
	// holding them; the held-out examples (a fraction, or a test set) are
	// held in memory. It returns ErrNotStreamable for a set that cannot be
	// streamed.
	Stream() (*Streamed, error)
}

// SetInfo describes a Set before it is read.
type SetInfo struct {
	// Train describes the training examples: Name, Shape, N, Classes,
	// Scale, LabelShape, with no data; Labels its labels' kind.
	Train  *Examples
	Labels LabelKind
	// HeldOut is how many held-out examples there are (0: none), and
	// HeldOutName what they are: "test" (a built-in test split) or
	// "validation" (a fraction of the user's data).
	HeldOut     int
	HeldOutName string
	// TrainBytes and HeldOutBytes are what the two sets hold in memory
	// once loaded (Examples.Bytes), when Describe knows it exactly (0:
	// unknown; Bytes bounds their sum).
	TrainBytes, HeldOutBytes int64
}

// ErrNotStreamable is Stream's error for a set that is only read whole.
var ErrNotStreamable = fmt.Errorf("data: this data set is read whole, not streamed")

// Streamed is a Set read batch by batch: N training examples of Shape per
// epoch, and the held-out examples in memory.
type Streamed struct {
	Info SetInfo
	// HeldOut reads the held-out set (nil without) into memory: Info
	// says its size (HeldOut examples of HeldOutBytes) before it is read,
	// so a trainer can check its plan first.
	HeldOut func() (*Examples, error)
	// Batches returns the training batches (float32 features, int32 class
	// labels or float32 targets) for batches of batch examples whose
	// pipeline may hold budget bytes: each Iter is one epoch, shuffled
	// afresh from seed and the epoch through a buffer of shuffle examples,
	// which the budget bounds.
	Batches func(batch int, budget int64, seed uint64) (ds Dataset[Batch], shuffle int)
	// From names where the examples are read from, for reports.
	From string
}

// StreamShuffle is the shuffle buffer of a streamed set: 64 batches, at
// least 1024 examples, but at most a quarter of the pipeline's budget (an
// example of d features takes its float32 block and its label's, each at
// least 64 bytes).
func StreamShuffle(batch, d int, budget int64) int {
	per := max(64, int64(d*4+63)&^63) + 64
	return int(max(1, min(int64(max(1024, 64*batch)), budget/4/per)))
}

// PipelineBudget is the input pipeline's budget for batches of batch
// examples of exampleBytes each (features and label as fed): room for 6
// batches in flight (the one being assembled, two prefetched, the one
// being fed, and a streamed set's shuffle buffer of a quarter of the
// budget), and at least 8 MiB, a streamed set's read buffers and map
// workers' examples beside them. Training, evaluation and prediction all
// size their pipelines so.
func PipelineBudget(batch int, exampleBytes int64) int64 {
	return max(8<<20, 6*int64(batch)*exampleBytes)
}

// LabelKind describes a data set's labels without holding them: class
// labels (Classes of them; Shape per example, nil for one) or float
// targets (TargetSize per example), or none.
type LabelKind struct {
	Class      bool
	Classes    int
	Shape      tensor.Shape
	TargetSize int
}

// Kind returns the kind of e's labels.
func (e *Examples) Kind() LabelKind {
	if e.Labels != nil {
		return LabelKind{Class: true, Classes: e.Classes, Shape: e.LabelShape}
	}
	return LabelKind{Classes: e.Classes, TargetSize: e.TargetSize()}
}
