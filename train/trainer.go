package train

import (
	"errors"
	"fmt"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
)

// Trainer holds a model's compiled programs and their memory.
type Trainer struct {
	cfg     Config
	engine  *runtime.Engine
	session *runtime.Session
	progs   map[string]*program
	data    *Data
	feed    feed
	heldOut *data.Examples // evaluated at each epoch's end (text: t.text's validation windows)
	text    *Text
	charges []charge // data sets and the input pipeline's reservation on the host ledger
	// pipeline is the input pipeline's ledger (nil without a pipeline): its
	// budget is the reservation the plan holds.
	pipeline *mem.Ledger
	// Planned is the bytes the trainer reserves, known before step 1, and
	// PlannedTotals their split by category (the data sets and the input
	// pipeline count as input).
	Planned       int64
	PlannedTotals [mem.NumCategories]int64
	// Plan is the training step's plan (full batch).
	Plan *compile.Plan

	spec      *step.ModelSpec
	xName     string         // the model's input, fed from Examples
	labels    data.LabelMode // how Examples feed the label input
	scoring   scoring        // how accuracy is counted
	stop      bool           // set by StopTraining
	lrScale   float64        // set by LRScheduler
	trainN    int            // the data sizes the programs were compiled for
	evalN     int
	replan    bool // SetBudget asked for a new reservation
	lossScale float64
	goodSteps int
	skipped   int64
	step      int64    // optimizer steps done (Fit keeps it)
	optSteps  int64    // optimizer steps taken before this run (a Keras file's iterations): added to step for the bias correction
	pos       position // where in the data the run stands (Fit keeps it)
	// follow is the state of a run with a live budget or several
	// processes (nil otherwise); origBudget the budget it began under
	follow     *follower
	origBudget int64
	// valSeqs is a bucketed text's validation split, cut into sequences
	valSeqs *seqs
	// noValidation leaves a text's validation out of the epoch ends
	// (FitToBudget's timing runs)
	noValidation bool
}

// charge is bytes the trainer holds on the host ledger as input: a data
// set in memory, or the input pipeline's reservation.
type charge struct {
	owner string
	bytes int64
}

// New compiles the model for the data and reserves all the memory the run
// will use on a new engine of cfg.Backend (the host by default), data
// included. It decides first how the data is read (see Data), and checks
// the plan against cfg.Budget before it loads, generates or reads a data
// set: a plan over the budget fails with *mem.OOMError naming a batch size
// that fits, and a model whose outputs do not match the data's labels
// fails naming both shapes (or the loss).
func New(cfg Config, d *Data) (*Trainer, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if err := d.resolve(cfg.Budget); err != nil {
		return nil, err
	}
	if d.describedOnly {
		return nil, errors.New("train: data known by its description alone (train.Described) can be planned, not trained on")
	}
	t := &Trainer{cfg: cfg, data: d, text: d.text, lossScale: initLossScale}
	if err := t.describe(); err != nil {
		return nil, err
	}
	progs, rp, err := t.cfg.planRun(d)
	if err != nil {
		return nil, err
	}
	t.setPlan(progs, rp)
	if err := t.checkBudget(rp); err != nil {
		return nil, err
	}
	if !d.loaded { // the plan fits: now read what it counted
		if err := d.load(); err != nil {
			return nil, err
		}
		if rp, err = t.cfg.planRunWith(d, progs); err != nil {
			return nil, err
		}
		t.setPlan(progs, rp)
		if err := t.checkBudget(rp); err != nil {
			return nil, err
		}
	}
	if err := t.open(progs, rp); err != nil {
		return nil, err
	}
	return t, nil
}

// describe checks the model against the data, once: its input takes the
// examples, its loss the labels; it chooses how labels are fed and how
// accuracy is counted.
func (t *Trainer) describe() error {
	spec, err := step.Describe(t.cfg.stepConfig())
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	t.spec = spec
	in, ok := t.cfg.input()
	if !ok && !t.data.describedOnly {
		return fmt.Errorf("train: the model has %d inputs; training feeds one (data.Examples hold one input per example)", len(t.cfg.Model.Inputs()))
	}
	t.xName = in.Name
	d := t.data
	if d.describedOnly { // a model planned on its own: nothing to check it against
		return nil
	}
	if t.text != nil {
		return t.checkText(spec.Outputs[0])
	}
	if d.trainSet != nil {
		if err := d.trainSet.Validate(); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	if d.heldOut != nil {
		if err := t.checkExamples(d.heldOut); err != nil {
			return err
		}
	}
	info := d.info.Train
	if d.aug != nil && d.streamed != nil {
		return fmt.Errorf("train: the augmentation maps examples held in memory; the data set is streamed from %s", d.streamed.From)
	}
	if d.aug != nil && info.Shape.Rank() != 3 {
		return fmt.Errorf("train: image augmentation needs images [height, width, channels]; data set %q has examples of shape %v", info.Name, info.Shape)
	}
	if in.Shape.Size() != info.Shape.Size() {
		return fmt.Errorf("train: the model's input %q takes examples of shape %v; data set %q has examples of shape %v", in.Name, in.Shape, info.Name, info.Shape)
	}
	o := spec.Outputs[0]
	if k := d.info.Labels; d.describedOnly && !k.Class && k.TargetSize == 0 {
		return nil // labels unknown: a model planned on its own
	}
	mode, err := d.info.Labels.For(info.Name, o.LabelType, o.LabelShape)
	if err != nil {
		return fmt.Errorf("train: the model's output %v (per example) with loss %s %w", o.Shape, o.Loss.Name(), err)
	}
	t.labels, t.scoring = mode, scoringFor(o, d.info.Labels)
	return nil
}

// checkExamples refuses, before step 1, examples whose labels do not fit
// what the loss needs of the model's output, naming both shapes and the
// loss, and examples that do not fit the model's input.
func (t *Trainer) checkExamples(d *data.Examples) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	in, _ := t.cfg.input()
	if in.Shape.Size() != d.Shape.Size() {
		return fmt.Errorf("train: the model's input %q takes examples of shape %v; data set %q has examples of shape %v", in.Name, in.Shape, d.Name, d.Shape)
	}
	o := t.spec.Outputs[0]
	if _, err := d.LabelsFor(o.LabelType, o.LabelShape); err != nil {
		return fmt.Errorf("train: the model's output %v (per example) with loss %s %w", o.Shape, o.Loss.Name(), err)
	}
	return nil
}

// setPlan records what the run will reserve.
func (t *Trainer) setPlan(progs map[string]*program, rp *RunPlan) {
	t.progs, t.Planned, t.PlannedTotals, t.Plan = progs, rp.Peak, rp.Totals, rp.Step
	t.trainN, t.evalN = rp.trainN, rp.evalN
}

// checkBudget refuses a plan over cfg.Budget before anything is reserved.
func (t *Trainer) checkBudget(rp *RunPlan) error {
	if t.cfg.Budget <= 0 || rp.Peak <= t.cfg.Budget {
		return nil
	}
	oom := t.Plan.OOM("train", t.cfg.Budget)
	oom.Ledger, oom.Owner, oom.Request = "budget", fmt.Sprintf("training (batch %d)", t.cfg.Batch), rp.Peak
	if t.cfg.BudgetSource != "" {
		oom.Ledger = "the budget (" + t.cfg.BudgetSource + ")"
	}
	oom.Totals = rp.Totals
	oom.Notes = t.rankNotes(rp)
	oom.Remedies = []string{t.fitRemedy(t.cfg.Budget, "in the budget of")}
	if n := t.cfg.ranks(); n > 1 {
		oom.Owner = fmt.Sprintf("rank %d of %d's training (its %d of the batch of %d)", t.cfg.Comm.Rank(), n, t.cfg.Batch/n, t.cfg.Batch)
		oom.Remedies = append(oom.Remedies, fmt.Sprintf("headroom plan --ranks %d --zero 3 --budget ... shows how many processes the run needs with its parameters, gradients and optimizer state sharded", n))
	}
	if rp.Streamed {
		oom.Remedies = append(oom.Remedies, "the data set is already streamed: "+rp.From)
	} else if t.data.set != nil && t.data.mode == StreamAuto {
		oom.Remedies = append(oom.Remedies, "streaming the data set would leave it on disk (it streams on its own when it would take more than half the budget)")
	}
	return oom
}

// open reserves everything on a new engine: the data sets and the input
// pipeline's reservation on the host ledger, the programs' session, the
// initial weights. On failure everything it took is released.
func (t *Trainer) open(progs map[string]*program, rp *RunPlan) (err error) {
	cfg := &t.cfg
	t.engine = runtime.NewEngine(cfg.Backend, cfg.Budget)
	if cfg.Comm != nil {
		t.engine.SetCollective(cfg.Comm)
	}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	d := t.data // held in host memory: on the host ledger (the device's own on the host)
	for _, e := range []*data.Examples{d.trainSet, d.heldOut} {
		if e != nil {
			if err := t.hold("data:"+e.Name, examplesBytes(e)); err != nil {
				return err
			}
		}
	}
	if t.text != nil {
		if err := t.hold("data:"+t.text.Name, t.text.bytes()); err != nil {
			return err
		}
	}
	if rp.PipelineBytes > 0 {
		if err := t.hold("input pipeline", rp.PipelineBytes); err != nil {
			return err
		}
		t.pipeline = mem.NewLedger("input pipeline", rp.PipelineBytes)
	}
	if err := t.reserve(progs); err != nil {
		var oom *mem.OOMError
		if errors.As(err, &oom) { // the device refused: say what the run needs and what fits
			if oom.Totals == ([mem.NumCategories]int64{}) {
				oom.Totals = t.PlannedTotals
			}
			if len(oom.Remedies) == 0 && oom.Budget > 0 {
				oom.Remedies = append(oom.Remedies, t.fitRemedy(oom.Budget, "on "+oom.Ledger+"'s"))
			}
		}
		return err
	}
	if err := t.initWeights(); err != nil {
		return err
	}
	if err := t.broadcastWeights(); err != nil {
		return err
	}
	t.heldOut = d.heldOut
	t.feed, err = t.newFeed(rp)
	return err
}

// hold charges bytes of input to the host ledger for the run.
func (t *Trainer) hold(owner string, bytes int64) error {
	if err := t.engine.HostLedger().Charge(mem.Input, owner, bytes); err != nil {
		return err
	}
	t.charges = append(t.charges, charge{owner, bytes})
	return nil
}

// newFeed returns the feed of the run's data (see feed).
func (t *Trainer) newFeed(rp *RunPlan) (feed, error) {
	d, cfg := t.data, &t.cfg
	switch {
	case t.text != nil:
		return t.newTextFeed()
	case d.pipe != nil:
		return &pipelineFeed{ds: *d.pipe, dcfg: t.pipelineConfig("input pipeline"), batch: cfg.Batch, n: d.trainN()}, nil
	case d.aug != nil:
		s, err := data.NewEpochStream(d.trainSet, cfg.Seed, d.aug)
		if err != nil {
			return nil, fmt.Errorf("train: augmentation: %w", err)
		}
		return &pipelineFeed{ds: s.Dataset(cfg.Batch), dcfg: t.pipelineConfig("augment"), batch: cfg.Batch, n: d.trainN(),
			before: func(ep int) { s.SetEpoch(ep + 1) }}, nil
	case d.streamed != nil:
		ds, _ := d.streamed.Batches(cfg.Batch, rp.PipelineBytes, cfg.Seed)
		return &pipelineFeed{ds: ds, dcfg: t.pipelineConfig("stream"), batch: cfg.Batch, n: d.trainN()}, nil
	}
	return newExamplesFeed(d.trainSet, t.labels, cfg.Batch, cfg.Seed), nil
}

// pipelineConfig is a pass's configuration: charged to the pipeline's
// ledger, under the reservation.
func (t *Trainer) pipelineConfig(name string) data.Config {
	return data.Config{Name: name, Ledger: t.pipeline, Budget: t.pipeline.Budget()}
}

// Engine returns the engine holding the model's variables.
func (t *Trainer) Engine() *runtime.Engine { return t.engine }

// Pipeline returns the input pipeline's ledger (nil when the batches come
// from memory): its budget is the reservation the plan holds for the
// pipeline's buffers, its peak what they took.
func (t *Trainer) Pipeline() *mem.Ledger { return t.pipeline }

// Data returns the data the trainer trains on.
func (t *Trainer) Data() *Data { return t.data }

// HeapBytes returns the bytes of the reservation that live on the Go heap:
// the data sets in memory and the input pipeline's buffers (the rest is
// mapped outside the heap).
func (t *Trainer) HeapBytes() int64 {
	var n int64
	for _, c := range t.charges {
		n += c.bytes
	}
	return n
}

// Close releases everything the trainer reserved (and the backend New
// made for it).
func (t *Trainer) Close() {
	if t.engine != nil {
		t.release()
		for _, c := range t.charges {
			t.engine.HostLedger().Release(mem.Input, c.owner, c.bytes)
		}
		t.charges = nil
		t.engine.Close()
		t.engine = nil
	}
	t.cfg.closeBackend()
}

// fitRemedy names the largest batch whose run fits in limit bytes (where
// says where: "in the budget of", "on sim").
func (t *Trainer) fitRemedy(limit int64, where string) string {
	fit, err := t.cfg.maxBatch(t.data, limit, t.cfg.Batch)
	switch {
	case err != nil:
		return "could not search smaller batches: " + err.Error()
	case fit > 0:
		return fmt.Sprintf("batch %d needs %s; batch %d fits %s %s", t.cfg.Batch, mem.FormatBytes(t.Planned), fit, where, mem.FormatBytes(limit))
	}
	return fmt.Sprintf("batch %d needs %s; not even batch 1 fits %s %s (weights, optimizer state and data alone exceed it)",
		t.cfg.Batch, mem.FormatBytes(t.Planned), where, mem.FormatBytes(limit))
}
