package train

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"strconv"
)

// Callback is told when each epoch ends (keras.callbacks.Callback's
// on_epoch_end). Optional interfaces add the other moments: EpochBeginner,
// BatchEnder.
type Callback interface {
	OnEpochEnd(t *Trainer, log *EpochLog) error
}

// EpochBeginner is a Callback told when an epoch begins.
type EpochBeginner interface {
	OnEpochBegin(t *Trainer, epoch int)
}

// BatchEnder is a Callback told after every training step.
type BatchEnder interface {
	OnBatchEnd(epoch, batch, batches int, loss float64)
}

// StopTraining ends Fit after the current epoch (EarlyStopping uses it).
func (t *Trainer) StopTraining() { t.stop = true }

// EarlyStopping stops training when Monitor ("val_loss", "loss",
// "val_accuracy", "accuracy") has not improved by MinDelta for Patience
// epochs, as keras.callbacks.EarlyStopping.
type EarlyStopping struct {
	Monitor  string
	Patience int
	MinDelta float64
	best     float64
	wait     int
	started  bool
}

func (e *EarlyStopping) OnEpochEnd(t *Trainer, log *EpochLog) error {
	v, higher, err := monitor(e.Monitor, log)
	if err != nil {
		return err
	}
	if math.IsNaN(v) {
		return nil
	}
	if !higher {
		v = -v
	}
	if !e.started || v > e.best+e.MinDelta {
		e.best, e.wait, e.started = v, 0, true
		return nil
	}
	e.wait++
	if e.wait >= e.Patience {
		t.StopTraining()
	}
	return nil
}

func monitor(name string, log *EpochLog) (v float64, higherIsBetter bool, err error) {
	switch name {
	case "", "val_loss":
		return log.ValLoss, false, nil
	case "loss":
		return log.Loss, false, nil
	case "val_accuracy":
		return log.ValAccuracy, true, nil
	case "accuracy":
		return log.Accuracy, true, nil
	}
	return 0, false, fmt.Errorf("train: EarlyStopping cannot monitor %q (loss, accuracy, val_loss, val_accuracy)", name)
}

// LRScheduler scales the learning rate at each epoch's start by
// Fn(epoch, scale so far), as keras.callbacks.LearningRateScheduler does
// for the rate itself; the optimizer's Schedule is multiplied by it.
type LRScheduler struct {
	Fn func(epoch int, scale float64) float64
}

func (l *LRScheduler) OnEpochBegin(t *Trainer, epoch int)         { t.lrScale = l.Fn(epoch, t.lrScale) }
func (l *LRScheduler) OnEpochEnd(t *Trainer, log *EpochLog) error { return nil }

// CSVLogger appends one row per epoch to Path (epoch, loss, accuracy,
// val_loss, val_accuracy, lr, seconds), with a header when it creates the
// file, as keras.callbacks.CSVLogger.
type CSVLogger struct {
	Path string
}

func (c *CSVLogger) OnEpochEnd(t *Trainer, log *EpochLog) error {
	_, statErr := os.Stat(c.Path)
	f, err := os.OpenFile(c.Path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("train: CSV log: %w", err)
	}
	w := csv.NewWriter(f)
	if os.IsNotExist(statErr) {
		w.Write([]string{"epoch", "loss", "accuracy", "val_loss", "val_accuracy", "lr", "seconds"})
	}
	num := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', 8, 64)
	}
	w.Write([]string{strconv.Itoa(log.Epoch), num(log.Loss), num(log.Accuracy), num(log.ValLoss), num(log.ValAccuracy), num(log.LR), num(log.Seconds)})
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("train: CSV log %s: %w", c.Path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("train: CSV log %s: %w", c.Path, err)
	}
	return nil
}
