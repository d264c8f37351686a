package train

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/headroom-ml/headroom/train/checkpoint"
)

// Checkpoint writes every variable (weights, statistics, optimizer state)
// to Dir at each epoch end, keeping the newest Keep files.
type Checkpoint struct {
	Dir  string
	Keep int
}

func (c *Checkpoint) OnEpochEnd(t *Trainer, log *EpochLog) error {
	if t.cfg.ranks() > 1 && t.cfg.Comm.Rank() != 0 {
		return nil // rank 0 writes; every process holds the same weights
	}
	_, err := t.SaveCheckpoint(c.Dir, log.Steps, log.Epoch, c.Keep)
	return err
}

// SaveCheckpoint writes the model's state after step (in epoch) to dir,
// atomically, and returns the file's path.
func (t *Trainer) SaveCheckpoint(dir string, step int64, epoch, keep int) (string, error) {
	var entries []checkpoint.Entry
	for _, v := range t.engine.Variables() {
		entries = append(entries, checkpoint.Entry{Name: v.Name, Tensor: v.Tensor()})
	}
	meta := map[string]string{
		checkpoint.KeyEpoch:        strconv.Itoa(epoch),
		checkpoint.KeyRNGState:     strconv.FormatUint(t.cfg.Seed, 10),
		checkpoint.KeyDataPosition: "epoch-end",
		"optimizer":                t.cfg.Optimizer.Name(),
		"loss_scale":               strconv.FormatFloat(t.lossScale, 'g', -1, 64),
		"loss_scale_good_steps":    strconv.Itoa(t.goodSteps),
		"skipped_steps":            strconv.FormatInt(t.skipped, 10),
		"batch":                    strconv.Itoa(t.cfg.Batch),
	}
	path, err := checkpoint.SaveStep(dir, step, entries, meta, keep)
	if err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	return path, nil
}

// restore loads the newest loadable checkpoint in dir into the variables
// and returns its step and epoch; with no checkpoint there it returns
// zeros (a fresh start).
func (t *Trainer) restore(dir string) (step int64, epoch int, err error) {
	path, step, err := checkpoint.Latest(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("train: resume: %w", err)
	}
	f, err := checkpoint.Load(path)
	if err != nil {
		return 0, 0, fmt.Errorf("train: resume: %w", err)
	}
	if s := f.Meta[checkpoint.KeyRNGState]; s != strconv.FormatUint(t.cfg.Seed, 10) {
		return 0, 0, fmt.Errorf("train: resume: %s was written with seed %s, this run has seed %d", path, s, t.cfg.Seed)
	}
	epoch, err = strconv.Atoi(f.Meta[checkpoint.KeyEpoch])
	if err != nil {
		return 0, 0, fmt.Errorf("train: resume: %s has no valid epoch in its metadata", path)
	}
	if v, err := strconv.ParseFloat(f.Meta["loss_scale"], 64); err == nil {
		t.lossScale = v
	}
	if v, err := strconv.Atoi(f.Meta["loss_scale_good_steps"]); err == nil {
		t.goodSteps = v
	}
	if v, err := strconv.ParseInt(f.Meta["skipped_steps"], 10, 64); err == nil {
		t.skipped = v
	}
	for _, v := range t.engine.Variables() {
		src, ok := f.Get(v.Name)
		if !ok {
			return 0, 0, fmt.Errorf("train: resume: %s has no tensor %q", path, v.Name)
		}
		if src.DType() != v.DType || !src.Shape().Equal(v.Shape) {
			return 0, 0, fmt.Errorf("train: resume: %s holds %q as %s%v, the model needs %s%v", path, v.Name, src.DType(), src.Shape(), v.DType, v.Shape)
		}
		copy(v.Tensor().Bytes(), src.Bytes())
	}
	if err := t.broadcastWeights(); err != nil { // every process resumes from rank 0's reading
		return 0, 0, err
	}
	return step, epoch, nil
}

// SaveWeights writes every variable (weights, statistics, optimizer state)
// to path as one safetensors file, atomically, as Keras' model.save does
// for a model's state.
func (t *Trainer) SaveWeights(path string) error {
	var entries []checkpoint.Entry
	for _, v := range t.engine.Variables() {
		entries = append(entries, checkpoint.Entry{Name: v.Name, Tensor: v.Tensor()})
	}
	if err := checkpoint.Save(path, entries, map[string]string{"optimizer": t.cfg.Optimizer.Name()}); err != nil {
		return fmt.Errorf("train: saving weights: %w", err)
	}
	return nil
}
