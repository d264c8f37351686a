package train

import (
	"math"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/profile/tfevents"
)

// TensorBoard is a Callback (keras.callbacks.TensorBoard) that logs a run to an event file in Dir,
// with the tags of Keras' TensorBoard callback where there is one:
//   - "batch_loss" after every step, at the global step;
//   - "epoch_loss", "epoch_accuracy", "epoch_val_loss",
//     "epoch_val_accuracy", "epoch_learning_rate" at each epoch's end, at
//     the epoch number (figures that are NaN are left out);
//   - "memory/<category>_bytes" (param, grad, ... as the ledger counts
//     them) and "memory/live_bytes" at each epoch's end, at the global step.
//
// Events reach the file at each epoch's end. Call Close after Fit.
type TensorBoard struct {
	Dir string
	w   *tfevents.EventWriter
	err error // the first error; OnBatchEnd cannot return one
}

var (
	_ Callback   = (*TensorBoard)(nil)
	_ BatchEnder = (*TensorBoard)(nil)
)

func (tb *TensorBoard) open() error {
	if tb.w == nil && tb.err == nil {
		tb.w, tb.err = tfevents.NewEventWriter(tb.Dir)
	}
	return tb.err
}

func (tb *TensorBoard) scalar(tag string, step int64, v float64) {
	if tb.err == nil && !math.IsNaN(v) {
		tb.err = tb.w.Scalar(tag, step, v)
	}
}

// OnBatchEnd logs the step's loss. batch counts from 1 within epoch (which
// counts from 1), so the global step is (epoch-1)*batches + batch.
func (tb *TensorBoard) OnBatchEnd(epoch, batch, batches int, loss float64) {
	if tb.open() != nil {
		return
	}
	tb.scalar("batch_loss", int64(epoch-1)*int64(batches)+int64(batch), loss)
}

// OnEpochEnd logs the epoch's figures and the ledger's bytes by category,
// and flushes the file. It returns the first error met so far (writing
// stops at the first error, and Fit stops at the error it returns).
func (tb *TensorBoard) OnEpochEnd(t *Trainer, log *EpochLog) error {
	if err := tb.open(); err != nil {
		return err
	}
	ep := int64(log.Epoch)
	tb.scalar("epoch_loss", ep, log.Loss)
	tb.scalar("epoch_accuracy", ep, log.Accuracy)
	tb.scalar("epoch_val_loss", ep, log.ValLoss)
	tb.scalar("epoch_val_accuracy", ep, log.ValAccuracy)
	tb.scalar("epoch_learning_rate", ep, log.LR)
	if t != nil && t.Engine() != nil {
		totals := t.Engine().Ledger().Totals()
		var live int64
		for c := mem.Category(0); c < mem.NumCategories; c++ {
			tb.scalar(memoryTags[c], log.Steps, float64(totals[c]))
			live += totals[c]
		}
		tb.scalar("memory/live_bytes", log.Steps, float64(live))
	}
	if tb.err == nil {
		tb.err = tb.w.Flush()
	}
	return tb.err
}

// Close closes the event file.
func (tb *TensorBoard) Close() error {
	if tb.w == nil {
		return tb.err
	}
	err := tb.w.Close()
	if tb.err != nil {
		return tb.err
	}
	return err
}

// Path returns the event file's path ("" before the first event).
func (tb *TensorBoard) Path() string {
	if tb.w == nil {
		return ""
	}
	return tb.w.Path()
}

var memoryTags = func() (tags [mem.NumCategories]string) {
	for c := range tags {
		tags[c] = "memory/" + mem.Category(c).String() + "_bytes"
	}
	return tags
}()
