package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// EpochLog is one epoch of History (NaN where a figure does not apply).
type EpochLog struct {
	Epoch       int // counted from 1
	Loss        float64
	Accuracy    float64
	ValLoss     float64
	ValAccuracy float64
	LR          float64 // at the epoch's last step
	Seconds     float64
	Steps       int64 // global step at the epoch's end
}

// History is what Fit returns, as keras.callbacks.History, plus the run's
// throughput and memory figures.
type History struct {
	Epochs        []EpochLog
	Steps         int64
	FirstLoss     float64
	LastLoss      float64
	SamplesPerSec float64 // excluding the first Warmup steps
	TrainSeconds  float64
	StartEpoch    int // epochs already done when Fit began (resume)
	StoppedEarly  bool
	// Leaks is what the watchdog found growing after the first epoch.
	Leaks []Leak
	// Events are what the trainer did on its own (re-planning after a
	// reservation failed).
	Events []Event
	// SkippedSteps counts mixed_float16 steps skipped because a gradient
	// overflowed; LossScale is the dynamic loss scale at the end.
	SkippedSteps int64
	LossScale    float64
	// MeasuredPeak is the ledger's peak; it equals Trainer.Planned.
	MeasuredPeak int64
	// LedgerGrowth is live bytes at the end of the last epoch minus at the
	// end of the first one this run trained; Growth names who grew.
	LedgerGrowth int64
	Growth       []mem.Entry
}

// Fit trains on data for cfg.Epochs epochs (continuing from the newest
// checkpoint with cfg.Resume) and returns the History.
func (t *Trainer) Fit(data *Examples) (*History, error) {
	cfg := &t.cfg
	h := &History{FirstLoss: math.NaN(), LastLoss: math.NaN()}
	tr := t.progs["train"]
	k := cfg.accumulate()
	if tr == nil || data.N%(tr.batch*k) != 0 && t.progs["train_tail"] == nil || tr.in.x.DType() == tensor.Invalid {
		return nil, fmt.Errorf("train: trainer was built for other data than %q", data.Name)
	}
	if err := data.Validate(); err != nil {
		return nil, err
	}
	var step int64
	if cfg.Resume && cfg.CheckpointDir != "" {
		s, ep, err := t.restore(cfg.CheckpointDir)
		if err != nil {
			return nil, err
		}
		step, h.StartEpoch = s, ep
	}
	startStep := step // warm-up steps count from here
	callbacks := cfg.Callbacks
	if cfg.CheckpointDir != "" {
		callbacks = append([]Callback{&Checkpoint{Dir: cfg.CheckpointDir, Keep: cfg.KeepCheckpoints}}, callbacks...)
	}
	perm := make([]int, data.N)
	set := func(pr *program) func(string, float64) {
		return func(name string, v float64) {
			if x, ok := pr.hyper[name]; ok {
				x.SetFloat64At(0, v)
			}
		}
	}
	setters := map[*program]func(string, float64){}
	refresh := func() {
		tr, k = t.progs["train"], cfg.accumulate()
		clear(setters)
		for _, pr := range t.progs {
			setters[pr] = set(pr)
		}
	}
	refresh()
	start := time.Now()
	var timedFrom time.Time
	var timed int64
	var paused time.Duration // epoch ends after timing began
	var first mem.Snapshot
	var dog *watchdog
	if !cfg.NoWatchdog {
		dog = newWatchdog()
	}
	t.lrScale = 1
	for ep := h.StartEpoch; ep < cfg.Epochs && !t.stop; ep++ {
		for _, c := range callbacks {
			if b, ok := c.(EpochBeginner); ok {
				b.OnEpochBegin(t, ep+1)
			}
		}
		epochStart := time.Now()
		shuffle(perm, cfg.Seed, ep)
		var lossSum float64
		var correct, seen, batches int
		var lr float64
		for i := 0; i < data.N; i += cfg.Batch {
			if t.replan {
				events, err := t.Replan(step + 1)
				h.Events = append(h.Events, events...)
				if err != nil {
					return h, err
				}
				refresh()
			}
			mb := tr.batch // examples per run
			full := mb * k // examples per update (cfg.Batch, or all that is left)
			step++
			lr = cfg.Schedule.LR(step) * t.lrScale
			n := min(full, data.N-i)
			var loss float64
			// micro-batches of mb and a smaller last one; all but the last
			// accumulate, the last applies the update
			for at, m := i, 0; at < i+n; m++ {
				size := min(mb, i+n-at)
				pr := t.progs["train"]
				switch {
				case at+size < i+n:
					pr = t.progs["train_accumulate"]
				case size != mb || (k == 1 && n != full):
					pr = t.progs["train_tail"]
				}
				if pr.batch != size {
					return h, fmt.Errorf("train: internal: no step program for %d examples", size)
				}
				micro := (step-1)*int64(k) + int64(m) + 1 // drives dropout masks
				set := setters[pr]
				if w, ok := pr.hyper["opt/micro_weight"]; ok {
					w.SetFloat64At(0, float64(size)/float64(n))
				}
				if err := t.runStep(pr, data, perm[at:at+size], micro, step, lr, set); err != nil {
					return h, fmt.Errorf("train: epoch %d, step %d: %w", ep+1, step, err)
				}
				loss += pr.loss.Float64At(0) * float64(size) / float64(n)
				if c, ok := accuracy(pr.out, pr.in.y); ok {
					correct, seen = correct+c, seen+size
				}
				at += size
			}
			if math.IsNaN(h.FirstLoss) {
				h.FirstLoss = loss
			}
			h.LastLoss = loss
			lossSum += loss
			batches++
			switch s := step - startStep; {
			case s == int64(cfg.Warmup):
				timedFrom = time.Now()
			case s > int64(cfg.Warmup):
				timed += int64(n)
			}
			for _, c := range callbacks {
				if b, ok := c.(BatchEnder); ok {
					b.OnBatchEnd(ep+1, batches, (data.N+cfg.Batch-1)/cfg.Batch, loss)
				}
			}
		}
		pause := time.Now() // epoch-end work is not training time
		log := EpochLog{Epoch: ep + 1, Loss: lossSum / float64(batches), Accuracy: ratio(correct, seen),
			ValLoss: math.NaN(), ValAccuracy: math.NaN(), LR: lr, Steps: step}
		if cfg.Validation != nil {
			vl, va, err := t.Evaluate(cfg.Validation)
			if err != nil {
				return h, err
			}
			log.ValLoss, log.ValAccuracy = vl, va
		}
		log.Seconds = time.Since(epochStart).Seconds()
		snap := t.engine.Ledger().Snapshot()
		if len(h.Epochs) == 0 {
			first = snap
		} else {
			h.LedgerGrowth = snap.Live - first.Live
			h.Growth = snap.Growth(first)
		}
		if dog != nil {
			leaks := dog.epochEnd(ep+1, t.engine.Ledger())
			h.Leaks = append(h.Leaks, leaks...)
			if len(leaks) > 0 && cfg.StrictMemory {
				return h, &LeakError{Leaks: leaks}
			}
		}
		h.Epochs = append(h.Epochs, log)
		h.Steps = step
		for _, c := range callbacks {
			if err := c.OnEpochEnd(t, &log); err != nil {
				return h, err
			}
		}
		if !timedFrom.IsZero() {
			paused += time.Since(pause)
		}
	}
	h.TrainSeconds = time.Since(start).Seconds()
	if timed > 0 {
		h.SamplesPerSec = float64(timed) / (time.Since(timedFrom) - paused).Seconds()
	}
	h.StoppedEarly = t.stop
	h.SkippedSteps, h.LossScale = t.skipped, t.lossScale
	h.MeasuredPeak = t.engine.Ledger().Peak()
	return h, nil
}

func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// runStep fills pr's inputs with the examples idx and runs it. micro is
// the step number the dropout masks are drawn from; step drives the
// optimizer's hyper inputs.
func (t *Trainer) runStep(pr *program, data *Examples, idx []int, micro, step int64, lr float64, set func(string, float64)) error {
	data.fill(pr.in.x, pr.in.y, idx)
	if pr.in.step.DType() == tensor.Int64 {
		pr.in.step.Int64s()[0] = micro
	}
	t.cfg.Optimizer.Feed(step, lr, set)
	if t.cfg.lossScaling() {
		set("opt/loss_scale", t.lossScale)
		set("opt/inv_loss_scale", 1/t.lossScale)
	}
	if err := pr.x.Run(); err != nil {
		return err
	}
	if pr.finite.DType() == tensor.Bool {
		t.scaleAfter(pr.finite.Uint8s()[0] != 0)
	}
	return nil
}

// scaleAfter adjusts the loss scale after a step: halve it when the step
// overflowed (the step changed nothing), double it after growthInterval
// good steps in a row.
func (t *Trainer) scaleAfter(finite bool) {
	if !finite {
		t.skipped++
		t.lossScale = max(t.lossScale/2, 1)
		t.goodSteps = 0
		return
	}
	t.goodSteps++
	if t.goodSteps == growthInterval {
		t.lossScale *= 2
		t.goodSteps = 0
	}
}

// shuffle sets perm to the permutation of epoch ep under seed (Fisher-Yates
// over the identity): a pure function of (seed, ep, len(perm)).
func shuffle(perm []int, seed uint64, ep int) {
	for i := range perm {
		perm[i] = i
	}
	rng := rand.New(rand.NewPCG(seed, uint64(ep)+0x5eed))
	rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
}

// accuracy counts rows of out [b, ..., C] whose argmax equals the int32
// label in y [b, ...]; ok is false when y holds no class labels.
func accuracy(out, y tensor.Tensor) (int, bool) {
	if y.DType() != tensor.Int32 || out.Shape().Rank() < 2 {
		return 0, false
	}
	c := out.Shape()[out.Shape().Rank()-1]
	labels := y.Int32s()
	correct := 0
	switch out.DType() {
	case tensor.Float32:
		o := out.Float32s()
		for r, l := range labels {
			if argmax(o[r*c:(r+1)*c]) == int(l) {
				correct++
			}
		}
	case tensor.Float64:
		o := out.Float64s()
		for r, l := range labels {
			if argmax(o[r*c:(r+1)*c]) == int(l) {
				correct++
			}
		}
	default:
		return 0, false
	}
	return correct, true
}

func argmax[T float32 | float64](row []T) int {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return best
}

// Evaluate returns the mean loss and the accuracy (NaN without class
// labels) of the model on data, in inference mode.
func (t *Trainer) Evaluate(data *Examples) (loss, acc float64, err error) {
	var sum float64
	var correct, seen int
	err = t.forEachEval(data, func(pr *program) {
		sum += pr.loss.Float64At(0)
		if c, ok := accuracy(pr.out, pr.in.y); ok {
			correct += c
			seen += pr.batch
		}
	})
	return sum / float64(data.N), ratio(correct, seen), err
}

// Predict returns the model's outputs for data (probabilities for a
// softmax model), [N, ...] float64 values in example order.
func (t *Trainer) Predict(data *Examples) ([]float64, error) {
	var out []float64
	err := t.forEachEval(data, func(pr *program) {
		for i := 0; i < pr.out.Len(); i++ {
			out = append(out, pr.out.Float64At(i))
		}
	})
	return out, err
}

// forEachEval runs the evaluation programs over data in order.
func (t *Trainer) forEachEval(data *Examples, each func(*program)) error {
	ev := t.progs["eval"]
	if ev == nil {
		return fmt.Errorf("train: no evaluation program (give Config.Validation to New)")
	}
	if err := data.Validate(); err != nil {
		return err
	}
	idx := make([]int, ev.batch)
	for i := 0; i < data.N; i += ev.batch {
		pr := ev
		if data.N-i < ev.batch {
			var err error
			if pr, err = t.evalTail(data.N - i); err != nil {
				return err
			}
		}
		idx = idx[:pr.batch]
		for k := range idx {
			idx[k] = i + k
		}
		data.fill(pr.in.x, pr.in.y, idx)
		if err := pr.x.Run(); err != nil {
			return fmt.Errorf("train: evaluating %q: %w", data.Name, err)
		}
		each(pr)
	}
	return nil
}

// evalTail returns the evaluation program for a last batch of b examples,
// compiling it into the shared arena if New did not (data of another size).
func (t *Trainer) evalTail(b int) (*program, error) {
	if pr := t.progs["eval_tail"]; pr != nil && pr.batch == b {
		return pr, nil
	}
	key := fmt.Sprintf("eval_tail_%d", b)
	if pr := t.progs[key]; pr != nil {
		return pr, nil
	}
	pr, err := t.load(key, b, modeEval)
	if err != nil {
		return nil, err
	}
	t.progs[key] = pr
	return pr, nil
}
