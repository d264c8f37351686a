package train

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/step"
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
	// RSS and PeakRSS are the process's resident memory at the epoch's
	// end and its high-water mark so far (bytes; 0 where unknown): a
	// long run's memory, epoch by epoch.
	RSS, PeakRSS int64
}

// History is what Fit returns, as keras.callbacks.History, plus the run's
// throughput and memory figures.
type History struct {
	Epochs        []EpochLog
	Steps         int64
	FirstLoss     float64
	LastLoss      float64
	SamplesPerSec float64 // excluding the first Warmup steps (of a shorter run, over all its steps)
	// TokensPerSec is a bucketed text's tokens trained on (padding left
	// out) a second, timed as SamplesPerSec; 0 for other runs.
	TokensPerSec float64
	TrainSeconds float64
	StartEpoch   int // epochs already done when Fit began (resume)
	StoppedEarly bool
	// ResumedFrom is the checkpoint a resumed run started from ("" for a
	// fresh start); Done is set when it was already at the end of the run
	// (nothing was trained).
	ResumedFrom string
	Done        bool
	// Leaks is what the watchdog found growing after the first epoch.
	Leaks []Leak
	// Events are what the trainer did on its own (re-planning after a
	// reservation failed).
	Events []Event
	// SkippedSteps counts mixed_float16 steps skipped because a gradient
	// overflowed; LossScale is the dynamic loss scale at the end.
	SkippedSteps int64
	LossScale    float64
	// AllReduceSeconds is how long the gradient buckets' all-reduces of a
	// data-parallel run took, from start to completion, over the whole run;
	// AllReduceWaitSeconds is how long the steps waited for them. The rest
	// ran behind backward's computation.
	AllReduceSeconds     float64
	AllReduceWaitSeconds float64
	// MeasuredPeak is the ledger's peak; it equals PlannedPeak, the
	// largest plan the run held: Trainer.Planned, or the plan before a
	// re-plan (Events) that made it smaller.
	MeasuredPeak int64
	PlannedPeak  int64
	// ValLoss is the last validation loss of FitText (nats per byte).
	ValLoss float64
	// LedgerGrowth is live bytes at the end of the last epoch minus at the
	// end of the first one this run trained; Growth names who grew.
	LedgerGrowth int64
	Growth       []mem.Entry
}

// Fit trains on the trainer's data for cfg.Epochs epochs (continuing from
// the newest checkpoint with cfg.Resume) and returns the History. Each
// epoch visits the examples in a fresh order drawn from (seed, epoch),
// reads a pipeline's next pass, or draws text windows from (seed, step);
// at its end the held-out data is evaluated. ctx ends the run's input
// pipeline (cfg.Interrupt is how to stop a run with a checkpoint).
func (t *Trainer) Fit(ctx context.Context) (*History, error) {
	r, err := t.begin()
	if err != nil {
		return nil, err
	}
	if r.h.Done { // resumed at the end of the run: nothing to do
		return r.finish(), nil
	}
	for ep := r.h.StartEpoch; ep < t.cfg.Epochs && !t.stop; ep++ {
		e := r.epochBegin(ep)
		complete, err := r.trainEpoch(ctx, e)
		if err != nil {
			return r.h, err
		}
		if err := r.epochEnd(e, complete); err != nil {
			return r.h, err
		}
	}
	h := r.finish()
	if t.text != nil {
		if n := len(h.Epochs); n > 0 && !math.IsNaN(h.Epochs[n-1].ValLoss) {
			h.ValLoss = h.Epochs[n-1].ValLoss
		} else if h.ValLoss, err = t.evaluateText(); err != nil {
			return h, err
		}
	}
	return h, nil
}

// trainEpoch trains the batches of epoch e (from where a resumed epoch
// stands) until they end or MaxSteps are done, and reports whether the
// epoch is complete.
func (r *fitRun) trainEpoch(ctx context.Context, e *epochRun) (bool, error) {
	t := r.t
	ef, err := t.feed.epoch(ctx, e.ep, e.batch)
	if err != nil {
		return false, fmt.Errorf("train: epoch %d: %w", e.ep+1, err)
	}
	defer ef.close()
	batches := t.feed.batches()
	for !r.done() {
		src, n, err := ef.next(r.step + 1)
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("train: epoch %d: %w", e.ep+1, err)
		}
		if err := r.update(e, n, batches, src); err != nil {
			return false, err
		}
		if err := r.afterStep(e, e.batch == batches); err != nil {
			return false, err
		}
	}
	return e.batch == batches, nil
}

// fitRun is the state of one Fit call.
type fitRun struct {
	t         *Trainer
	h         *History
	callbacks []Callback
	step      int64 // optimizer steps so far (resumed runs start past 0)
	startStep int64 // warm-up steps count from here
	start     time.Time
	timedFrom time.Time
	timed     int64 // examples trained after warm-up
	// a bucketed text's tokens (labels kept), after warm-up and in all
	timedTokens, allTokens int64
	paused                 time.Duration // epoch-end work after warm-up
	// a run shorter than the warm-up is timed over all its steps
	allFrom   time.Time
	all       int64
	allPaused time.Duration
	first     mem.Snapshot
	dog       *watchdog
	resumed   position // where a resumed run starts (its first epoch resumes mid-way)
	sums      []byte   // a data-parallel step's loss and counts, summed over the processes (an allocation of its own, without pointers, for MPI)
}

// epochRun is the state of one epoch.
type epochRun struct {
	ep            int // counted from 0
	batch         int // batches done (a resumed epoch starts past 0)
	start         time.Time
	lossSum, lr   float64
	correct, seen int
	updates       int
}

// begin restores a checkpoint (with Resume) and sets up callbacks, the
// watchdog and timing.
func (t *Trainer) begin() (*fitRun, error) {
	cfg := &t.cfg
	r := &fitRun{t: t, h: &History{FirstLoss: math.NaN(), LastLoss: math.NaN()}, start: time.Now()}
	t.pos, t.step = position{}, 0
	if cfg.Resume && cfg.CheckpointDir != "" {
		path, err := t.restore(cfg.CheckpointDir, &r.h.Events)
		if err != nil {
			return nil, err
		}
		r.step, r.h.StartEpoch, r.h.ResumedFrom = t.step, t.pos.epoch, path
		r.resumed = t.pos
		r.h.Done = t.pos.epoch >= cfg.Epochs || (cfg.MaxSteps > 0 && t.step >= cfg.MaxSteps)
	}
	r.startStep = r.step
	r.callbacks = cfg.Callbacks
	if cfg.CheckpointDir != "" {
		r.callbacks = append([]Callback{&Checkpoint{Dir: cfg.CheckpointDir, Keep: cfg.KeepCheckpoints}}, r.callbacks...)
	}
	if !cfg.NoWatchdog {
		r.dog = newWatchdog()
	}
	t.lrScale = 1
	t.follow, t.origBudget = nil, cfg.Budget
	if cfg.Live != nil || cfg.ranks() > 1 {
		t.follow = newFollower(cfg, t.Planned)
	}
	if cfg.Live != nil && !r.h.Done {
		// a neighbour may have grown while the data loaded and the
		// programs compiled: answer it before step 1 touches the arena
		if _, err := r.boundary(false); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// done reports whether MaxSteps are done; Fit then ends after the epoch's
// end-of-epoch work.
func (r *fitRun) done() bool {
	if r.t.cfg.MaxSteps > 0 && r.step >= r.t.cfg.MaxSteps {
		r.t.stop = true
		return true
	}
	return false
}

func (r *fitRun) epochBegin(ep int) *epochRun {
	for _, c := range r.callbacks {
		if b, ok := c.(EpochBeginner); ok {
			b.OnEpochBegin(r.t, ep+1)
		}
	}
	e := &epochRun{ep: ep, start: time.Now()}
	if p := r.resumed; p.epoch == ep && p.batch > 0 { // continue the epoch a checkpoint was taken in
		e.batch, e.lossSum, e.correct, e.seen, e.updates = p.batch, p.lossSum, p.correct, p.seen, p.updates
		r.resumed = position{}
	}
	r.t.pos = position{epoch: ep, batch: e.batch, lossSum: e.lossSum, correct: e.correct, seen: e.seen, updates: e.updates}
	return e
}

// afterStep records the run's position after a step, writes the
// checkpoints of CheckpointEvery, and stops on an interrupt: it finishes
// the step, writes a checkpoint of exactly where the run is and returns an
// *Interrupted.
func (r *fitRun) afterStep(e *epochRun, epochDone bool) error {
	t, cfg := r.t, &r.t.cfg
	t.step = r.step
	t.pos = position{epoch: e.ep, batch: e.batch, lossSum: e.lossSum, correct: e.correct, seen: e.seen, updates: e.updates}
	if epochDone { // the epoch-end checkpoint is written by epochEnd, after evaluation
		t.pos = position{epoch: e.ep + 1}
	}
	stop := false
	if cfg.Interrupt != nil {
		select {
		case <-cfg.Interrupt:
			stop = true
		default:
		}
	}
	here := stop
	if t.follow != nil { // every process stops, and re-plans, at the same step
		var err error
		if stop, err = r.boundary(stop); err != nil {
			return err
		}
	}
	if stop {
		in := &Interrupted{Step: r.step, Epoch: e.ep + 1, Batch: e.batch, ByPeer: !here}
		if cfg.CheckpointDir != "" {
			path, err := t.SaveCheckpoint(cfg.CheckpointDir, cfg.KeepCheckpoints)
			if err != nil {
				return fmt.Errorf("train: interrupted after step %d, and its checkpoint failed: %w", r.step, err)
			}
			in.Checkpoint = path
		}
		r.finish()
		return in
	}
	if cfg.CheckpointEvery > 0 && cfg.CheckpointDir != "" && r.step%cfg.CheckpointEvery == 0 && !epochDone {
		if _, err := t.SaveCheckpoint(cfg.CheckpointDir, cfg.KeepCheckpoints); err != nil {
			return err
		}
	}
	return nil
}

// Interrupted is the error Fit returns when Config.Interrupt fired: the
// step in progress finished, and Checkpoint ("" without a CheckpointDir)
// holds exactly where the run stopped, from which Resume continues bit for
// bit.
type Interrupted struct {
	Step       int64 // optimizer steps done
	Epoch      int   // the epoch it stopped in, counted from 1
	Batch      int   // batches of that epoch done
	Checkpoint string
	// ByPeer: another process of a data-parallel run was interrupted, and
	// this one stopped at the same step with it.
	ByPeer bool
}

func (e *Interrupted) Error() string {
	s := fmt.Sprintf("train: interrupted after step %d (epoch %d, batch %d)", e.Step, e.Epoch, e.Batch)
	if e.Checkpoint == "" {
		return s + "; no checkpoint directory was given, so nothing was saved"
	}
	return s + "; checkpoint written to " + e.Checkpoint
}

// position is where a run stands: the epoch in progress (counted from 0),
// the batches of it done, and its running sums (so that a resumed epoch
// reports what an uninterrupted one would).
type position struct {
	epoch, batch  int
	lossSum       float64
	correct, seen int
	updates       int
}

// update makes one optimizer step on a batch of n examples from src: as
// micro-batches when accumulating (all but the last add their weighted
// gradients to the accumulators; the last applies the update), else as
// one run. A pending re-plan (SetBudget) happens first.
func (r *fitRun) update(e *epochRun, n, batches int, src batchSource) error {
	t, cfg := r.t, &r.t.cfg
	if t.replan {
		events, err := t.Replan(r.step + 1)
		r.h.Events = append(r.h.Events, events...)
		if err != nil {
			return err
		}
	}
	bucket := 0 // the length a bucketed text's batch runs at
	bk, isBucketed := src.(bucketed)
	if isBucketed {
		bucket = bk.bucket()
	}
	k, mb := cfg.accumulate(), t.progs[cfg.progKey("train", bucket)].batch
	if r.allFrom.IsZero() {
		r.allFrom = time.Now()
	}
	r.step++
	e.lr = cfg.Schedule.LR(r.step) * t.lrScale
	// this process's share of the batch: an even split over the processes
	ranks, rank := cfg.ranks(), 0
	if ranks > 1 {
		rank = cfg.Comm.Rank()
	}
	lo, hi := rank*n/ranks, (rank+1)*n/ranks
	if err := sameRuns(cfg, n, mb); err != nil {
		return fmt.Errorf("train: epoch %d, step %d: %w", e.ep+1, r.step, err)
	}
	// micro-batches and processes weigh by their examples, or by the
	// labels they keep (a bucketed text's padding)
	share := func(a, b int) float64 { return float64(b - a) }
	if isBucketed {
		share = func(a, b int) float64 { return float64(bk.valid(a, b)) }
	}
	var loss float64
	correct, seen := e.correct, e.seen
	for at, m := lo, 0; at < hi; m++ {
		size := min(mb, hi-at)
		pr, err := t.stepProgram(at+size < hi, size, bucket)
		if err != nil {
			return err
		}
		microW, rankW := ratio0(share(at, at+size), share(lo, hi)), ratio0(share(lo, hi), share(0, n))
		if w, ok := pr.hyper["opt/micro_weight"]; ok {
			w.SetFloat64At(0, microW)
		}
		if w, ok := pr.hyper["opt/rank_weight"]; ok {
			w.SetFloat64At(0, rankW)
		}
		src.fill(pr, at, at+size)
		micro := (r.step-1)*int64(k) + int64(m) + 1 // drives dropout masks
		if err := t.runStep(pr, micro, r.step, e.lr); err != nil {
			return fmt.Errorf("train: epoch %d, step %d: %w", e.ep+1, r.step, err)
		}
		loss += pr.loss.Float64At(0) * microW
		if c, ok := t.scoring.count(pr.out, src, true); ok {
			e.correct, e.seen = e.correct+c, e.seen+size*t.scoring.units()
		}
		at += size
	}
	if ranks > 1 { // the batch's loss and counts, not this process's share's
		var err error
		if loss, err = r.sumOver(loss*ratio0(share(lo, hi), share(0, n)), &correct, &seen, e); err != nil {
			return fmt.Errorf("train: epoch %d, step %d: %w", e.ep+1, r.step, err)
		}
	}
	if math.IsNaN(r.h.FirstLoss) {
		r.h.FirstLoss = loss
	}
	r.h.LastLoss = loss
	e.lossSum += loss
	e.updates++
	e.batch++
	tokens := int64(0) // a bucketed text's labels kept
	if isBucketed {
		tokens = int64(bk.valid(0, n))
	}
	switch s := r.step - r.startStep; {
	case s == int64(cfg.Warmup):
		r.timedFrom = time.Now()
	case s > int64(cfg.Warmup):
		r.timed += int64(n)
		r.timedTokens += tokens
	}
	r.all += int64(n)
	r.allTokens += tokens
	for _, c := range r.callbacks {
		if b, ok := c.(BatchEnder); ok {
			b.OnBatchEnd(e.ep+1, e.updates, batches, loss)
		}
	}
	return nil
}

// sumOver sums a data-parallel step's weighted loss and the examples
// counted (correct, seen: e's counts before the step, which become the
// batch's after it) over the processes, and returns the batch's loss. It
// allocates nothing.
func (r *fitRun) sumOver(loss float64, correct, seen *int, e *epochRun) (float64, error) {
	if r.sums == nil {
		r.sums = make([]byte, 24)
	}
	b := r.sums
	binary.LittleEndian.PutUint64(b[0:], math.Float64bits(loss))
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(float64(e.correct-*correct)))
	binary.LittleEndian.PutUint64(b[16:], math.Float64bits(float64(e.seen-*seen)))
	if err := r.t.cfg.Comm.AllReduceSum(b, tensor.Float64); err != nil {
		return 0, fmt.Errorf("summing the step's loss over the processes: %w", err)
	}
	at := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])) }
	e.correct, e.seen = *correct+int(at(1)), *seen+int(at(2))
	return at(0), nil
}

// sameRuns checks that every process splits its share of a batch of n
// examples into as many micro-batches of at most mb as the others: under
// ZeRO stages 2 and 3 every micro-batch exchanges blocks with the other
// processes, so they must run alike. (Full batches split evenly; a last,
// partial batch may not.)
func sameRuns(cfg *Config, n, mb int) error {
	ranks := cfg.ranks()
	if cfg.accumulate() == 1 || cfg.zeroStage() < 2 {
		return nil
	}
	first := -1
	for r := range ranks {
		local := (r+1)*n/ranks - r*n/ranks
		runs := (local + mb - 1) / mb
		if first < 0 {
			first = runs
		} else if runs != first {
			return fmt.Errorf("a batch of %d examples splits into %d micro-batches of at most %d on rank 0 and %d on rank %d: under ZeRO stage %d the ranks must run alike (drop the last partial batch, or change --batch or --accumulate)",
				n, first, mb, runs, r, cfg.zeroStage())
		}
	}
	return nil
}

// stepProgram returns the program for a run of size examples of a batch:
// accumulating (not the batch's last run), or the one that updates; at a
// bucketed text's bucket length (0: the model's own).
func (t *Trainer) stepProgram(accumulate bool, size, bucket int) (*program, error) {
	if accumulate {
		return t.progs[t.cfg.progKey("train_accumulate", bucket)], nil
	}
	if pr := t.progs[t.cfg.progKey("train", bucket)]; pr.batch == size { // a full batch, or a whole data set smaller than one
		return pr, nil
	}
	if pr := t.progs["train_tail"]; pr != nil && pr.batch == size {
		return pr, nil
	}
	// a last batch of a size New did not plan for (a stream's)
	key := fmt.Sprintf("train_tail_%d", size)
	if pr := t.progs[key]; pr != nil {
		return pr, nil
	}
	mode := step.Train
	if t.cfg.accumulate() > 1 {
		mode = step.Apply
	}
	pr, err := t.load(key, size, mode)
	if err != nil {
		return nil, err
	}
	t.progs[key] = pr
	return pr, nil
}

// epochEnd evaluates, checks memory, runs the callbacks and records the
// epoch (complete, or cut short by MaxSteps: a checkpoint written then
// records the position within it); none of it counts as training time.
func (r *fitRun) epochEnd(e *epochRun, complete bool) error {
	t, cfg, h := r.t, &r.t.cfg, r.h
	if complete {
		t.pos = position{epoch: e.ep + 1}
	}
	pause := time.Now()
	log := EpochLog{Epoch: e.ep + 1, Loss: e.lossSum / float64(max(e.updates, 1)), Accuracy: ratio(e.correct, e.seen),
		ValLoss: math.NaN(), ValAccuracy: math.NaN(), LR: e.lr, Steps: r.step}
	if t.heldOut != nil {
		vl, va, err := t.Evaluate(t.heldOut)
		if err != nil {
			return err
		}
		log.ValLoss, log.ValAccuracy = vl, va
	} else if t.text != nil && !t.noValidation {
		vl, err := t.evaluateText()
		if err != nil {
			return err
		}
		log.ValLoss = vl
	}
	log.Seconds = time.Since(e.start).Seconds()
	log.RSS, log.PeakRSS = mem.Resident()
	snap := t.engine.Ledger().Snapshot()
	if len(h.Epochs) == 0 {
		r.first = snap
	} else {
		h.LedgerGrowth = snap.Live - r.first.Live
		h.Growth = snap.Growth(r.first)
	}
	if r.dog != nil {
		leaks := r.dog.epochEnd(e.ep+1, t.engine.Ledger())
		h.Leaks = append(h.Leaks, leaks...)
		if len(leaks) > 0 && cfg.StrictMemory {
			return &LeakError{Leaks: leaks}
		}
	}
	h.Epochs = append(h.Epochs, log)
	h.Steps = r.step
	for _, c := range r.callbacks {
		if err := c.OnEpochEnd(t, &log); err != nil {
			return err
		}
	}
	if !r.timedFrom.IsZero() {
		r.paused += time.Since(pause)
	}
	if !r.allFrom.IsZero() {
		r.allPaused += time.Since(pause)
	}
	return nil
}

func (r *fitRun) finish() *History {
	h, t := r.h, r.t
	h.Steps = r.step
	h.TrainSeconds = time.Since(r.start).Seconds()
	switch {
	case r.timed > 0:
		secs := (time.Since(r.timedFrom) - r.paused).Seconds()
		h.SamplesPerSec, h.TokensPerSec = float64(r.timed)/secs, float64(r.timedTokens)/secs
	case r.all > 0: // fewer steps than the warm-up: time them all
		secs := (time.Since(r.allFrom) - r.allPaused).Seconds()
		h.SamplesPerSec, h.TokensPerSec = float64(r.all)/secs, float64(r.allTokens)/secs
	}
	h.StoppedEarly = t.stop
	h.SkippedSteps, h.LossScale = t.skipped, t.lossScale
	for _, pr := range t.progs {
		took, waited := pr.x.AllReduceTimes()
		h.AllReduceSeconds += took.Seconds()
		h.AllReduceWaitSeconds += waited.Seconds()
	}
	h.MeasuredPeak = t.engine.Ledger().Peak()
	h.PlannedPeak = t.Planned
	for _, e := range h.Events {
		h.PlannedPeak = max(h.PlannedPeak, e.PeakBefore, e.PeakAfter)
	}
	return h
}

// runStep runs pr, whose x and y are filled, as micro-step micro (the
// dropout masks' step) of optimizer step step at learning rate lr.
func (t *Trainer) runStep(pr *program, micro, step int64, lr float64) error {
	if pr.in.step.DType() == tensor.Int64 {
		pr.in.step.Int64s()[0] = micro
	}
	t.cfg.Optimizer.Feed(step+t.optSteps, lr, pr.set)
	if t.cfg.lossScaling() {
		pr.set("opt/loss_scale", t.lossScale)
		pr.set("opt/inv_loss_scale", 1/t.lossScale)
	}
	if err := pr.x.Run(); err != nil {
		return err
	}
	if pr.finite.DType() == tensor.Bool {
		t.scaleAfter(pr.finite.Uint8s()[0] != 0)
	}
	return nil
}

// ratio0 is a/b, 0 when b is 0 (a share of nothing).
func ratio0(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
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

// Evaluate returns the mean loss and the accuracy (NaN without class
// labels) of the model on data, in inference mode.
func (t *Trainer) Evaluate(ds *data.Examples) (loss, acc float64, err error) {
	var sum float64
	var correct, seen int
	err = t.forEachEval(ds, func(pr *program, src *examplesSource) {
		sum += pr.loss.Float64At(0)
		if c, ok := t.scoring.count(pr.out, src, false); ok {
			correct += c
			seen += pr.batch * t.scoring.units()
		}
	})
	return sum / float64(ds.N), ratio(correct, seen), err
}

// forEachEval runs the evaluation programs over data in order.
func (t *Trainer) forEachEval(ds *data.Examples, each func(*program, *examplesSource)) error {
	ev := t.progs["eval"]
	if ev == nil {
		return fmt.Errorf("train: no evaluation program (give New held-out data)")
	}
	if err := t.checkExamples(ds); err != nil {
		return err
	}
	mode, _ := ds.LabelsFor(t.spec.Outputs[0].LabelType, t.spec.Outputs[0].LabelShape)
	idx := make([]int, ev.batch)
	src := &examplesSource{data: ds, labels: mode}
	for i := 0; i < ds.N; i += ev.batch {
		pr := ev
		if ds.N-i < ev.batch {
			var err error
			if pr, err = t.evalTail(ds.N - i); err != nil {
				return err
			}
		}
		idx = idx[:pr.batch]
		for k := range idx {
			idx[k] = i + k
		}
		src.idx = idx
		src.fill(pr, 0, len(idx))
		if err := pr.x.Run(); err != nil {
			return fmt.Errorf("train: evaluating %q: %w", ds.Name, err)
		}
		each(pr, src)
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
	pr, err := t.load(key, b, step.Eval)
	if err != nil {
		return nil, err
	}
	t.progs[key] = pr
	return pr, nil
}
