package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// runConfig is the run's configuration for data described by info: the
// model (--model built for the examples' shape and classes, a language
// model for text, or --keras), the optimizer at --lr, the budget the plan
// must fit, the precision policy and the step's options.
func (o *options) runConfig(info data.SetInfo) (train.Config, error) {
	m, err := o.runModel(info)
	if err != nil {
		return train.Config{}, err
	}
	opt, err := optim.ByName(o.optimizer)
	if err != nil {
		return train.Config{}, &usageError{err}
	}
	prec, err := step.ParsePrecision(o.precision)
	if err != nil {
		return train.Config{}, &usageError{err}
	}
	budget, source := o.planBudget()
	cfg := train.Config{Model: m, Optimizer: opt, Schedule: optim.Constant(o.lr), Epochs: o.epochs, Batch: o.batch, Seed: o.seed,
		Budget: budget, BudgetSource: source, Precision: prec, Accumulate: o.accumulate, Remat: o.remat, Threads: o.threads}
	if o.isText() {
		cfg.ClipNorm = 1 // as peers/seq.py trains
	}
	if b, budget, source, err := o.dev.backend(o.planOnly); err != nil {
		return train.Config{}, err
	} else if b != nil { // a GPU: the plan's budget is the device's
		cfg.Backend, cfg.Budget, cfg.BudgetSource = b, budget, source
	}
	if o.keras != "" {
		err = o.applyKeras(&cfg)
	}
	return cfg, err
}

// runModel builds the run's model.
func (o *options) runModel(info data.SetInfo) (nn.Model, error) {
	switch {
	case o.keras != "":
		return o.kerasModel(info)
	case o.isText():
		m, err := nn.NewModel(o.model, tensor.Shape{o.seq}, vocab)
		if err != nil {
			return nil, err
		}
		if ins := m.Inputs(); len(ins) != 1 || ins[0].Type() != tensor.Int32 {
			return nil, usagef("--model %s is not a language model (gpt, lstm)", o.model)
		}
		return m, nil
	}
	return nn.NewModel(o.model, info.Train.Shape, info.Train.Classes)
}

// modelName is the run's model as its output and RESULT line name it:
// --model, or the --keras file's name (one word).
func (o *options) modelName() string {
	if o.keras != "" {
		return strings.Join(strings.Fields(filepath.Base(o.keras)), "_")
	}
	return o.model
}

// planCheck says, for a run that must fit a plan, that no limit is known.
func (o *options) planCheck() error {
	if b, _ := o.planBudget(); b <= 0 {
		return fmt.Errorf("--fit-to-budget needs a budget: give --budget (no memory limit is known for this process: %v)", o.processErr)
	}
	return nil
}
