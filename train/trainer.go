package train

import (
	"errors"
	"fmt"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// Trainer holds a model's compiled programs and their memory.
type Trainer struct {
	cfg    Config
	engine *runtime.Engine
	arena  *runtime.Arena
	progs  map[string]*program
	data   []*data.Examples // charged to the ledger
	// Planned is the bytes the trainer reserves, known before step 1, and
	// PlannedTotals their split by category (the data sets count as input).
	Planned       int64
	PlannedTotals [mem.NumCategories]int64
	// Plan is the training step's plan (full batch).
	Plan *compile.Plan

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
	pos       position // where in the data the run stands (Fit keeps it)
}

// New compiles the model for the training data and cfg.Validation and
// reserves all the memory the run will use on a new engine of cfg.Backend
// (the host by default). It fails before any step with *mem.OOMError when
// Budget cannot hold it, naming a batch size that fits, and with an error
// naming both shapes (or the loss) when the model's outputs do not match
// the data's labels.
func New(cfg Config, trainData *data.Examples) (*Trainer, error) {
	evalData := cfg.Validation
	cfg.defaults()
	if cfg.Model == nil || cfg.Batch <= 0 || cfg.Epochs < 0 {
		return nil, errors.New("train: a model, a positive batch size and epochs >= 0 are required")
	}
	sc := cfg.stepConfig()
	if err := sc.Check(); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	in, ok := cfg.input()
	if !ok {
		return nil, fmt.Errorf("train: the model has %d inputs; Fit feeds one (data.Examples hold one input per example)", len(cfg.Model.Inputs()))
	}
	t := &Trainer{cfg: cfg, xName: in.Name, lossScale: initLossScale}
	trainN := 0 // 0: plan one batch, for a stream (FitStream)
	if trainData != nil {
		if err := t.checkData(trainData); err != nil {
			return nil, err
		}
		trainN = trainData.N
	}
	if trainData == nil { // a stream (FitStream): class labels if the loss takes them
		specs, err := step.Outputs(sc)
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		if o := specs[0]; o.Loss != nil && o.LabelType == tensor.Int32 && o.Shape.Rank() == 1 && o.Shape[0] > 1 {
			t.scoring = scoring{kind: scoreArgmax}
		}
	}
	evalN := 0
	if evalData != nil {
		if err := t.checkData(evalData); err != nil {
			return nil, err
		}
		evalN = evalData.N
	}
	progs, err := t.cfg.compileAll(trainN, evalN)
	if err != nil {
		return nil, err
	}
	cfg = t.cfg
	totals, share := planned(progs)
	var dataBytes int64
	if trainData != nil {
		dataBytes = mem.Align(trainData.Bytes())
	}
	if evalData != nil {
		dataBytes += mem.Align(evalData.Bytes())
	}
	if trainData == nil {
		dataBytes += mem.Align(cfg.InputBudget) // the stream's pipeline
	}
	if !cfg.Backend.HostAddressable() {
		dataBytes = 0 // host memory, beside the device's plan
	}
	totals[mem.Input] += dataBytes
	t.progs, t.Planned, t.PlannedTotals, t.Plan = progs, sum(totals), totals, progs["train"].p.Plan
	if cfg.Budget > 0 && t.Planned > cfg.Budget {
		return nil, t.budgetError(trainN, evalN, dataBytes)
	}
	t.engine = runtime.NewEngine(cfg.Backend, cfg.Budget)
	if cfg.Comm != nil {
		t.engine.SetCollective(cfg.Comm)
	}
	ok = false
	defer func() {
		if !ok {
			t.Close()
		}
	}()
	for _, d := range []*data.Examples{trainData, evalData} {
		if d == nil {
			continue
		}
		if err := t.engine.HostLedger().Charge(mem.Input, "data:"+d.Name, mem.Align(d.Bytes())); err != nil {
			return nil, err
		}
		t.data = append(t.data, d)
	}
	t.trainN, t.evalN = trainN, evalN
	if err := t.reserve(progs, share); err != nil {
		var oom *mem.OOMError
		if errors.As(err, &oom) { // the device refused: say what the run needs and what fits
			if oom.Totals == ([mem.NumCategories]int64{}) {
				oom.Totals = t.PlannedTotals
			}
			if len(oom.Remedies) == 0 && oom.Budget > 0 {
				oom.Remedies = append(oom.Remedies, t.fitRemedy(trainN, evalN, dataBytes, oom.Budget, "on "+oom.Ledger+"'s"))
			}
		}
		return nil, err
	}
	if err := t.initWeights(); err != nil {
		return nil, err
	}
	if err := t.broadcastWeights(); err != nil {
		return nil, err
	}
	ok = true
	return t, nil
}

// checkData refuses, before step 1, data whose labels do not fit what the
// loss needs of the model's output, naming both shapes and the loss, and
// data that does not fit the model's input; it chooses how labels are fed
// (one-hot for a loss over distributions) and how accuracy is counted.
func (t *Trainer) checkData(d *data.Examples) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	specs, err := step.Outputs(t.cfg.stepConfig())
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	in, _ := t.cfg.input()
	if in.Shape.Size() != d.Shape.Size() {
		return fmt.Errorf("train: the model's input %q takes examples of shape %v; data set %q has examples of shape %v", in.Name, in.Shape, d.Name, d.Shape)
	}
	o := specs[0]
	mode, err := d.LabelsFor(o.LabelType, o.LabelShape)
	if err != nil {
		return fmt.Errorf("train: the model's output %v (per example) with loss %s %w", o.Shape, o.Loss.Name(), err)
	}
	t.labels, t.scoring = mode, scoringFor(o, d)
	return nil
}

func (t *Trainer) budgetError(trainN, evalN int, dataBytes int64) error {
	oom := t.Plan.OOM("train", t.cfg.Budget)
	oom.Ledger, oom.Owner, oom.Request = "budget", fmt.Sprintf("training (batch %d)", t.cfg.Batch), t.Planned
	if t.cfg.BudgetSource != "" {
		oom.Ledger = "the budget (" + t.cfg.BudgetSource + ")"
	}
	oom.Totals = t.PlannedTotals
	oom.Remedies = []string{t.fitRemedy(trainN, evalN, dataBytes, t.cfg.Budget, "in the budget of")}
	return oom
}

// fitRemedy names the largest batch whose run fits in limit bytes (where
// says where: "in the budget of", "on sim").
func (t *Trainer) fitRemedy(trainN, evalN int, dataBytes, limit int64, where string) string {
	fit, err := MaxBatch(t.cfg, trainN, evalN, dataBytes, limit, t.cfg.Batch)
	switch {
	case err != nil:
		return "could not search smaller batches: " + err.Error()
	case fit > 0:
		return fmt.Sprintf("batch %d needs %s; batch %d fits %s %s", t.cfg.Batch, mem.FormatBytes(t.Planned), fit, where, mem.FormatBytes(limit))
	}
	return fmt.Sprintf("batch %d needs %s; not even batch 1 fits %s %s (weights, optimizer state and data alone exceed it)",
		t.cfg.Batch, mem.FormatBytes(t.Planned), where, mem.FormatBytes(limit))
}

// Engine returns the engine holding the model's variables.
func (t *Trainer) Engine() *runtime.Engine { return t.engine }

// Close releases everything the trainer reserved.
func (t *Trainer) Close() {
	if t.engine == nil {
		return
	}
	t.release()
	for _, d := range t.data {
		t.engine.HostLedger().Release(mem.Input, "data:"+d.Name, mem.Align(d.Bytes()))
	}
	t.data = nil
	t.engine.Close()
	t.engine = nil
}

// CheckData returns the error New would return for training cfg's model
// on d: labels that do not fit what the loss needs of the model's output,
// or examples that do not fit its input.
func CheckData(cfg Config, d *data.Examples) error {
	cfg.defaults()
	in, ok := cfg.input()
	if !ok {
		return fmt.Errorf("train: the model has %d inputs; Fit feeds one (data.Examples hold one input per example)", len(cfg.Model.Inputs()))
	}
	t := &Trainer{cfg: cfg, xName: in.Name}
	return t.checkData(d)
}
