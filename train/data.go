package train

import (
	"errors"
	"fmt"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
)

// Data is what a run trains on, and what it evaluates at each epoch's end.
// Make it with one of:
//
//   - InMemory: examples held in memory (data.Examples), and a held-out set;
//   - Pipeline: a dataset of batches (package data: maps, shuffling, ...);
//   - OnText: byte-level text windows for a language model;
//   - FromSet: a data set that can be loaded or streamed (the user's files,
//     the built-in data sets): the trainer decides which under the run's
//     budget, before reading it.
//
// Augment adds an augmentation pipeline to any of them held in memory.
// New, PlanFor and FitToBudget take it; Fit feeds any of them through one
// loop. Every byte the data holds (examples in memory, an input pipeline's
// budget) is in the plan, and the budget is checked before a data set is
// loaded, generated or read.
type Data struct {
	trainSet, heldOut *data.Examples
	aug               *data.Augmentation
	pipe              *data.Dataset[data.Batch]
	text              *Text
	set               data.Set
	mode              StreamMode

	// info describes the training examples (set once resolved); held is
	// the bytes the examples held in memory take, estimated until loaded;
	// loaded reports whether they are.
	info     data.SetInfo
	resolved bool
	streamed *data.Streamed
	held     int64
	loaded   bool
	// describedOnly: Described data, which only plans
	describedOnly bool
}

// StreamMode says whether FromSet's data set is loaded or streamed.
type StreamMode uint8

// The modes.
const (
	// StreamAuto streams the set when loading it would take more than half
	// of the run's budget and the set can be streamed (tf.data's answer to
	// a data set that does not fit beside the plan), and loads it
	// otherwise.
	StreamAuto StreamMode = iota
	// StreamAlways streams it; StreamNever loads it.
	StreamAlways
	StreamNever
)

// InMemory is trainSet and heldOut (nil: none), held in memory.
func InMemory(trainSet, heldOut *data.Examples) *Data {
	return &Data{trainSet: trainSet, heldOut: heldOut, loaded: true}
}

// Augment feeds the training examples, once in memory, through an input
// pipeline that passes every example through aug (Keras' preprocessing
// layers as tf.data maps: a fresh order and fresh draws each epoch); the
// held-out examples are evaluated as they are. The examples must be
// images [height, width, channels]; a streamed data set is not augmented.
// It returns d.
func (d *Data) Augment(aug *data.Augmentation) *Data {
	d.aug = aug
	return d
}

// Pipeline is a dataset of batches: each Iter is one epoch, which must
// yield batches of the run's batch size and at most one smaller last
// batch. info describes the examples (Train.N examples per epoch, 0 when
// unknown: a last batch of a size not planned for then loads one more
// program beyond the plan), heldOut (nil: none) is evaluated at each
// epoch's end. The pipeline's buffers are charged to a reservation of
// Config.InputBudget bytes (default data.PipelineBudget) in the plan.
func Pipeline(ds data.Dataset[data.Batch], info data.SetInfo, heldOut *data.Examples) *Data {
	info.HeldOut = 0
	if heldOut != nil {
		info.HeldOut = heldOut.N
	}
	return &Data{pipe: &ds, info: info, heldOut: heldOut, held: examplesBytes(heldOut), resolved: true, loaded: true}
}

// OnText is byte-level text for a language model (see Text).
func OnText(t *Text) *Data { return &Data{text: t} }

// FromSet is a data set that can be loaded or streamed, read as mode says.
func FromSet(s data.Set, mode StreamMode) *Data { return &Data{set: s, mode: mode} }

// Described is data known by its description alone (shape, labels,
// count; no examples): PlanFor and MaxBatch plan a run on it with no data
// bytes in the plan (a Keras model planned on its own, a plan for a data
// set held elsewhere); New refuses it. Labels of the zero kind are not
// checked against the loss.
func Described(info data.SetInfo) *Data {
	return &Data{info: info, resolved: true, loaded: true, describedOnly: true}
}

// Streamed reports whether the data is read from its storage every epoch
// (after New or Describe decided it), and from where.
func (d *Data) Streamed() (bool, string) {
	if d.streamed != nil {
		return true, d.streamed.From
	}
	return false, ""
}

// Describe returns what the training examples are (shape, classes, count,
// labels; no data) and the held-out set's size, deciding first, for a
// FromSet data set, whether it will be streamed under budget bytes (the
// plan's budget; <= 0: none): what a caller needs to build a model for the
// data. It reads a data set only when that is the only way to describe
// it, and then only one whose size is within half the budget.
func (d *Data) Describe(budget int64) (data.SetInfo, error) {
	if err := d.resolve(budget); err != nil {
		return data.SetInfo{}, err
	}
	return d.info, nil
}

// resolve decides how the data is read and describes it.
func (d *Data) resolve(budget int64) error {
	if d.resolved {
		return nil
	}
	switch {
	case d.text != nil:
		return d.resolveText()
	case d.set != nil:
		return d.resolveSet(budget)
	case d.trainSet == nil:
		return errors.New("train: no training data")
	}
	d.info = data.SetInfo{Train: d.trainSet, Labels: d.trainSet.Kind()}
	if d.heldOut != nil {
		d.info.HeldOut = d.heldOut.N
	}
	d.held = examplesBytes(d.trainSet, d.heldOut)
	d.resolved = true
	return nil
}

// resolveSet streams or loads the set (see StreamMode).
func (d *Data) resolveSet(budget int64) error {
	stream := d.mode == StreamAlways
	size, err := d.set.Bytes()
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if d.mode == StreamAuto && budget > 0 && size > budget/2 {
		stream = true
	}
	if stream {
		st, err := d.set.Stream()
		switch {
		case err == nil:
			// the held-out set is read, as a loaded set is, once the plan fits
			d.streamed, d.info, d.resolved = st, st.Info, true
			d.held, d.loaded = mem.Align(st.Info.HeldOutBytes), st.HeldOut == nil
			return nil
		case !errors.Is(err, data.ErrNotStreamable) || d.mode == StreamAlways:
			return fmt.Errorf("train: %w", err)
		}
	}
	if info, ok := d.set.Describe(); ok { // loaded by New, once the plan fits
		d.info, d.held, d.resolved = info, mem.Align(size), true
		if info.TrainBytes > 0 {
			d.held = mem.Align(info.TrainBytes) + mem.Align(info.HeldOutBytes)
		}
		return nil
	}
	if err := d.load(); err != nil { // only reading describes it
		return err
	}
	d.resolved = true
	return nil
}

// load reads a FromSet data set or a text into memory.
func (d *Data) load() error {
	if d.loaded {
		return nil
	}
	if d.text != nil {
		if err := d.text.read(); err != nil {
			return err
		}
		d.held, d.loaded = d.text.bytes(), true
		return nil
	}
	if d.streamed != nil {
		ho, err := d.streamed.HeldOut()
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		d.heldOut, d.held, d.loaded = ho, examplesBytes(ho), true
		return nil
	}
	tr, ho, err := d.set.Load()
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	d.trainSet, d.heldOut, d.loaded = tr, ho, true
	name := d.info.HeldOutName
	d.info = data.SetInfo{Train: tr, Labels: tr.Kind(), HeldOutName: name}
	if ho != nil {
		d.info.HeldOut = ho.N
	}
	d.held = examplesBytes(tr, ho)
	return nil
}

// examplesBytes is what examples held in memory take on the ledger.
func examplesBytes(sets ...*data.Examples) int64 {
	var n int64
	for _, e := range sets {
		if e != nil {
			n += mem.Align(e.Bytes())
		}
	}
	return n
}

// fedThroughPipeline reports whether the training batches come from an
// input pipeline (whose budget the plan reserves).
func (d *Data) fedThroughPipeline() bool { return d.pipe != nil || d.aug != nil || d.streamed != nil }

// exampleBytes is one example as a pipeline feeds it: float32 features
// and its labels (int32 class labels or float32 targets).
func (d *Data) exampleBytes() int64 {
	e, k := d.info.Train, d.info.Labels
	label := 4
	if k.Class && k.Shape != nil {
		label = 4 * k.Shape.Size()
	} else if !k.Class && k.TargetSize > 0 {
		label = 4 * k.TargetSize
	}
	return int64(e.Shape.Size()*4 + label)
}

// trainN is the training examples per epoch (0 when unknown).
func (d *Data) trainN() int {
	if d.text != nil {
		return 0
	}
	return d.info.Train.N
}

// Examples returns the training examples in memory, reading a FromSet
// data set that New would load (for what needs every label before
// training: class weights). A streamed data set, text and a pipeline have
// none.
func (d *Data) Examples() (*data.Examples, error) {
	if d.streamed != nil || d.text != nil || d.pipe != nil || d.describedOnly {
		return nil, errors.New("train: the training examples are not held in memory (streamed, text or a pipeline)")
	}
	if err := d.load(); err != nil {
		return nil, err
	}
	return d.trainSet, nil
}

// StepsPerEpoch returns the updates of an epoch in batches of batch (0
// when unknown).
func (d *Data) StepsPerEpoch(batch int) int {
	if d.text != nil {
		return d.text.StepsPerEpoch(batch)
	}
	if d.info.Train == nil || d.info.Train.N <= 0 {
		return 0
	}
	return (d.info.Train.N + batch - 1) / batch
}
