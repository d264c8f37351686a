package train

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
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
// file, as keras.callbacks.CSVLogger (append=True). It writes only to a
// new file or to a headroom log it wrote: an existing file whose first line
// is not its header (a user's data set, say) is refused, untouched.
type CSVLogger struct {
	Path string
}

// csvHeader is the first line of a headroom CSV log.
var csvHeader = []string{"epoch", "loss", "accuracy", "val_loss", "val_accuracy", "lr", "seconds"}

// Check returns an error if Path exists and is not a headroom CSV log
// ending in a complete line, or is not a regular file. Fit's callback
// checks before each append; callers check before training, so that a
// wrong path fails before step 1.
func (c *CSVLogger) Check() error {
	st, err := os.Stat(c.Path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("train: CSV log: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("train: CSV log %s is not a regular file", c.Path)
	}
	if st.Size() == 0 {
		return nil
	}
	f, err := os.Open(c.Path)
	if err != nil {
		return fmt.Errorf("train: CSV log: %w", err)
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	want := strings.Join(csvHeader, ",") + "\n"
	if !strings.HasPrefix(string(head[:n]), want) {
		first, _, _ := strings.Cut(string(head[:n]), "\n")
		return fmt.Errorf("train: %s exists and is not a headroom CSV log (its first line is %q, not %q): it is left as it is; give a new path", c.Path, first, strings.TrimSpace(want))
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, st.Size()-1); err != nil || last[0] != '\n' {
		return fmt.Errorf("train: CSV log %s does not end in a complete line: it is left as it is; give a new path", c.Path)
	}
	return nil
}

func (c *CSVLogger) OnEpochEnd(t *Trainer, log *EpochLog) error {
	if err := c.Check(); err != nil {
		return err
	}
	_, statErr := os.Stat(c.Path)
	f, err := os.OpenFile(c.Path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("train: CSV log: %w", err)
	}
	w := csv.NewWriter(f)
	if os.IsNotExist(statErr) {
		w.Write(csvHeader)
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
