package train

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/headroom-ml/headroom/tensor"

	"github.com/headroom-ml/headroom/train/checkpoint"
)

// Checkpoint writes every variable (weights, statistics, optimizer state)
// and the run's position to Dir at each epoch end (or where MaxSteps cut
// the epoch short), keeping the newest Keep files.
type Checkpoint struct {
	Dir  string
	Keep int
}

func (c *Checkpoint) OnEpochEnd(t *Trainer, log *EpochLog) error {
	_, err := t.SaveCheckpoint(c.Dir, c.Keep)
	return err
}

// Checkpoint metadata keys beyond package checkpoint's: where in the epoch
// the run stands and the epoch's running sums, so that a resumed epoch
// continues exactly and reports what an uninterrupted one would.
const (
	keyStepInEpoch   = "step_in_epoch"     // batches of the epoch in progress done
	keyEpochLossSum  = "epoch_loss_sum"    // their losses' sum (exact decimal)
	keyEpochCorrect  = "epoch_correct"     // examples counted correct
	keyEpochSeen     = "epoch_seen"        // examples counted
	keyEpochUpdates  = "epoch_updates"     // updates made
	dataPositionForm = "epoch %d batch %d" // KeyDataPosition: where the next batch starts
	// keyOptimizerStepsBefore: the optimizer steps taken before the run
	// began (ContinueOptimizer), which its bias correction counts on from
	keyOptimizerStepsBefore = "optimizer_steps_before"
)

// entries returns every variable as a checkpoint entry. A variable that
// holds this process's block of a tensor (ZeRO) is gathered from every
// process into the tensor an unsharded run would hold (so any number of
// processes can resume from it): every process of the run must call it.
func (t *Trainer) entries() ([]checkpoint.Entry, error) {
	var entries []checkpoint.Entry
	for _, v := range t.engine.Variables() {
		x, err := t.wholeValue(v)
		if err != nil {
			return nil, err
		}
		entries = append(entries, checkpoint.Entry{Name: v.Name, Tensor: x})
	}
	return entries, nil
}

// SaveCheckpoint writes the model's state and the run's position (epochs
// done, batches of the epoch in progress done, the shuffle's seed, the
// loss scale) after the last step to dir, atomically, keeping the newest
// keep files (0: all), and returns the file's path. In a data-parallel run
// every process calls it: without ZeRO rank 0 writes one file; under ZeRO
// each process writes its part of a sharded checkpoint and rank 0 its
// index, whose path it returns (saveSharded).
func (t *Trainer) SaveCheckpoint(dir string, keep int) (string, error) {
	if t.cfg.ranks() > 1 && t.cfg.zeroStage() > 0 {
		return t.saveSharded(dir, keep, t.checkpointMeta())
	}
	entries, err := t.entries()
	if err != nil {
		return "", err
	}
	if t.cfg.ranks() > 1 && t.cfg.Comm.Rank() != 0 {
		return "", nil
	}
	path, err := checkpoint.SaveStep(dir, t.step, entries, t.checkpointMeta(), keep)
	if err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	return path, nil
}

// checkpointMeta is a checkpoint's metadata: where the run stands.
func (t *Trainer) checkpointMeta() map[string]string {
	p := t.pos
	meta := map[string]string{
		checkpoint.KeyEpoch:        strconv.Itoa(p.epoch),
		checkpoint.KeyRNGState:     strconv.FormatUint(t.cfg.Seed, 10),
		checkpoint.KeyDataPosition: fmt.Sprintf(dataPositionForm, p.epoch+1, p.batch),
		keyStepInEpoch:             strconv.Itoa(p.batch),
		keyEpochLossSum:            strconv.FormatFloat(p.lossSum, 'g', -1, 64),
		keyEpochCorrect:            strconv.Itoa(p.correct),
		keyEpochSeen:               strconv.Itoa(p.seen),
		keyEpochUpdates:            strconv.Itoa(p.updates),
		"optimizer":                t.cfg.Optimizer.Name(),
		"loss_scale":               strconv.FormatFloat(t.lossScale, 'g', -1, 64),
		"loss_scale_good_steps":    strconv.Itoa(t.goodSteps),
		"skipped_steps":            strconv.FormatInt(t.skipped, 10),
		"batch":                    strconv.Itoa(t.cfg.Batch),
		keyOptimizerStepsBefore:    strconv.FormatInt(t.optSteps, 10),
	}
	return meta
}

// restore loads the newest loadable checkpoint in dir into the variables,
// sets the run's step and position from it and returns its path; with no
// checkpoint there it is a fresh start (""). Newer files that do not load
// are passed over, each reported as an event and logged (Config.Log) before
// step 1.
func (t *Trainer) restore(dir string, events *[]Event) (path string, err error) {
	path, step, skipped, err := checkpoint.LatestSkipping(dir)
	if errors.Is(err, fs.ErrNotExist) {
		t.log(fmt.Sprintf("resume: no checkpoint in %s; starting from step 0", dir))
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("train: resume: %w", err)
	}
	for _, e := range skipped {
		ev := Event{Step: step, Message: fmt.Sprintf("resumed from %s, passing over a newer checkpoint that does not load: %v", path, e)}
		*events = append(*events, ev)
		t.log(ev.String())
	}
	meta, err := checkpoint.Meta(path)
	if err != nil {
		return "", fmt.Errorf("train: resume: %w", err)
	}
	if s := meta[checkpoint.KeyRNGState]; s != strconv.FormatUint(t.cfg.Seed, 10) {
		return "", fmt.Errorf("train: resume: %s was written with seed %s, this run has seed %d", path, s, t.cfg.Seed)
	}
	var p position
	if p.epoch, err = strconv.Atoi(meta[checkpoint.KeyEpoch]); err != nil || p.epoch < 0 {
		return "", fmt.Errorf("train: resume: %s has no valid epoch in its metadata", path)
	}
	if b, ok := meta[keyStepInEpoch]; ok { // older checkpoints were all taken at epoch ends
		bad := false
		num := func(key string) int {
			v, err := strconv.Atoi(meta[key])
			bad = bad || err != nil || v < 0
			return v
		}
		p.batch, p.correct, p.seen, p.updates = num(keyStepInEpoch), num(keyEpochCorrect), num(keyEpochSeen), num(keyEpochUpdates)
		p.lossSum, err = strconv.ParseFloat(meta[keyEpochLossSum], 64)
		if bad || err != nil {
			return "", fmt.Errorf("train: resume: %s has an invalid position in its metadata (step_in_epoch %q)", path, b)
		}
	}
	if b := meta["batch"]; b != "" && b != strconv.Itoa(t.cfg.Batch) && p.batch > 0 {
		return "", fmt.Errorf("train: resume: %s was taken %d batches into an epoch of batch %s; this run has batch %d, so the epoch cannot continue where it stopped", path, p.batch, b, t.cfg.Batch)
	}
	if v, err := strconv.ParseFloat(meta["loss_scale"], 64); err == nil {
		t.lossScale = v
	}
	if v, err := strconv.Atoi(meta["loss_scale_good_steps"]); err == nil {
		t.goodSteps = v
	}
	if v, err := strconv.ParseInt(meta["skipped_steps"], 10, 64); err == nil {
		t.skipped = v
	}
	if v, err := strconv.ParseInt(meta[keyOptimizerStepsBefore], 10, 64); err == nil && v >= 0 {
		t.optSteps = v
	}
	if err := t.readVariables(path); err != nil {
		return "", err
	}
	if err := t.broadcastWeights(); err != nil { // every process resumes from rank 0's weights
		return "", err
	}
	t.step, t.pos = step, p
	if p.batch > 0 {
		t.log(fmt.Sprintf("resume: starting from %s: step %d, %d batches into epoch %d", path, step, p.batch, p.epoch+1))
	} else {
		t.log(fmt.Sprintf("resume: starting from %s: step %d, after epoch %d", path, step, p.epoch))
	}
	return path, nil
}

// readVariables reads every variable of the engine from the checkpoint at
// path, straight into the variables' memory on the host (through one
// tensor-sized copy each on a device, and the whole tensor of a variable
// that holds a block of it): no copy of the whole checkpoint is held. A
// tensor the model does not have is skipped through a bounded buffer.
func (t *Trainer) readVariables(path string) error {
	if checkpoint.IsIndex(path) {
		return t.readSharded(path)
	}
	seen := map[string]bool{}
	var after []func() error // device copies and shard blocks, once read
	_, err := checkpoint.LoadInto(path, func(name string, dt tensor.DType, shape tensor.Shape) ([]byte, error) {
		v, ok := t.engine.Variable(name)
		if !ok {
			return nil, nil
		}
		seen[name] = true
		if whole, ok := t.wholeShape(v); ok && dt == v.DType && shape.Equal(whole) {
			// this process's block of the whole tensor (zero-padded)
			full := make([]byte, shape.Size()*dt.Size())
			after = append(after, func() error { return t.setBlock(v, full) })
			return full, nil
		}
		if dt != v.DType || !shape.Equal(v.Shape) {
			return nil, fmt.Errorf("train: resume: %s holds %q as %s%v, the model needs %s%v", path, name, dt, shape, v.DType, v.Shape)
		}
		if v.Engine().Backend().HostAddressable() {
			return v.Tensor().Bytes(), nil
		}
		host := make([]byte, v.Bytes())
		after = append(after, func() error { return v.Write(host) })
		return host, nil
	})
	if err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	for _, f := range after {
		if err := f(); err != nil {
			return err
		}
	}
	for _, v := range t.engine.Variables() {
		if !seen[v.Name] {
			return fmt.Errorf("train: resume: %s has no tensor %q", path, v.Name)
		}
	}
	return nil
}

// log passes a message to Config.Log.
func (t *Trainer) log(msg string) {
	if t.cfg.Log != nil {
		t.cfg.Log(msg)
	}
}

// SaveWeights writes every variable (weights, statistics, optimizer state)
// to path as one safetensors file, atomically, as Keras' model.save does
// for a model's state.
func (t *Trainer) SaveWeights(path string) error {
	entries, err := t.entries()
	if err != nil {
		return err
	}
	if t.cfg.ranks() > 1 && t.cfg.Comm.Rank() != 0 {
		return nil
	}
	if err := checkpoint.Save(path, entries, map[string]string{"optimizer": t.cfg.Optimizer.Name()}); err != nil {
		return fmt.Errorf("train: saving weights: %w", err)
	}
	return nil
}
