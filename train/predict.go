package train

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// PredictConfig describes inference with a trained model: Keras' predict
// (the model's outputs) and evaluate (the loss and accuracy against
// labels), through an inference plan: the forward pass only, no labels for
// predict, no gradients, no optimizer state, no saved activations.
type PredictConfig struct {
	Model nn.Model
	// Weights gives each variable's value by name (a ModelFile's Weight,
	// a Trainer's Weight).
	Weights func(name string) (tensor.Tensor, bool)
	// Batch is how many examples the input pipeline hands over at once
	// (Keras' batch_size); MicroBatch (0: Batch) is how many one run of the
	// step computes. A model computes each example on its own in
	// inference (no batch statistics), so running a batch as several
	// micro-batches gives the same outputs in a fraction of the memory.
	Batch, MicroBatch int
	// Evaluate plans the evaluation step (labels, the loss, the outputs)
	// instead of the inference step.
	Evaluate bool
	Loss     nn.Loss // Evaluate's loss; nil: sparse categorical cross-entropy
	// Scale multiplies uint8 features (pixels) as they are fed (0: 1).
	Scale   float64
	Threads int             // the host backend's threads (0: one)
	Backend runtime.Backend // nil: the host (backend/cpu), which Close closes
	Budget  int64           // bytes, the pipeline's included; <= 0: no budget
	// InputBudget is the input pipeline's reservation (0:
	// data.PipelineBudget of Batch and the model's input).
	InputBudget int64
}

// Predictor holds a model's inference (and evaluation) step and its
// weights in memory reserved once: the plan is known before the first
// batch, and running allocates nothing.
type Predictor struct {
	cfg        PredictConfig
	ownBackend bool
	engine     *runtime.Engine
	session    *runtime.Session
	pr         *program
	xName      string
	pipeline   *mem.Ledger
	// Plan is the inference (or evaluation) step's plan; Planned is what
	// the predictor reserves in all (the step's session: its arena, the
	// weights, its inputs and outputs, the backend's scratch; and the input
	// pipeline's reservation), PlannedTotals its split.
	Plan          *compile.Plan
	Planned       int64
	PlannedTotals [mem.NumCategories]int64
	spec          step.OutputSpec
}

// NewPredictor compiles the inference step (with Evaluate, the
// evaluation step) at MicroBatch, reserves its memory and the input
// pipeline's on a new engine and sets the weights. It fails before
// reserving anything with a *mem.OOMError when Budget cannot hold the
// plan, and when a weight the model needs is missing or has another shape.
func NewPredictor(cfg PredictConfig) (*Predictor, error) {
	if cfg.Model == nil || cfg.Batch <= 0 || cfg.MicroBatch < 0 {
		return nil, errors.New("train: a model and a positive batch size are required")
	}
	if cfg.MicroBatch == 0 || cfg.MicroBatch > cfg.Batch {
		cfg.MicroBatch = cfg.Batch
	}
	if cfg.Loss == nil {
		cfg.Loss = nn.SparseCategoricalCrossentropy{}
	}
	p := &Predictor{cfg: cfg}
	if cfg.Backend == nil {
		p.cfg.Backend, p.ownBackend = cpu.New(cfg.Threads), true
	}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	ins := cfg.Model.Inputs()
	if len(ins) != 1 {
		return nil, fmt.Errorf("train: the model has %d inputs; prediction feeds one", len(ins))
	}
	sc := step.Config{Model: cfg.Model, Loss: cfg.Loss, Target: p.cfg.Backend}
	spec, err := step.Describe(sc)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	p.xName, p.spec = ins[0].Name, spec.Outputs[0]
	prog, err := p.compile(sc)
	if err != nil {
		return nil, err
	}
	if err := p.reserve(prog, ins[0]); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// compile builds the inference or evaluation step at MicroBatch.
func (p *Predictor) compile(sc step.Config) (*compile.Program, error) {
	b := p.cfg.MicroBatch
	key, mode, build := "infer", step.Infer, (*step.Builder).Standard
	if p.cfg.Evaluate {
		// the per-example losses, so that a padded last run counts only
		// its examples
		key, mode, build = "evaluate", step.Eval, func(bl *step.Builder) {
			bl.Output("loss", bl.PerExample())
			bl.Output("out", bl.Outputs[0])
		}
	}
	prog, err := step.Compile(sc, b, mode, build)
	if err != nil {
		return nil, fmt.Errorf("train: building the %s step (batch %d): %w", key, b, err)
	}
	prog.Name = key
	p.pr = &program{p: prog, batch: b, mode: mode}
	p.Plan = prog.Plan
	return prog, nil
}

// reserve checks the plan against the budget, then reserves the input
// pipeline and the step's session and sets the weights.
func (p *Predictor) reserve(prog *compile.Program, in nn.Input) error {
	cfg := &p.cfg
	res := runtime.Reserve([]*compile.Program{prog})
	pipe := cfg.InputBudget
	if pipe <= 0 {
		pipe = data.PipelineBudget(cfg.Batch, int64(in.Shape.Size()*4+8))
	}
	pipe = mem.Align(pipe)
	p.PlannedTotals = res.Totals
	p.PlannedTotals[mem.Input] += pipe
	p.Planned = sum(p.PlannedTotals)
	if cfg.Budget > 0 && p.Planned > cfg.Budget {
		oom := p.Plan.OOM(prog.Name, cfg.Budget)
		oom.Ledger, oom.Owner, oom.Request, oom.Totals = "budget", fmt.Sprintf("inference (micro-batch %d)", cfg.MicroBatch), p.Planned, p.PlannedTotals
		return oom
	}
	p.engine = runtime.NewEngine(cfg.Backend, cfg.Budget)
	if err := p.engine.HostLedger().Charge(mem.Input, "input pipeline", pipe); err != nil {
		return err
	}
	p.pipeline = mem.NewLedger("input pipeline", pipe)
	s, err := p.engine.Open(prog)
	if err != nil {
		return err
	}
	p.session = s
	p.pr.x, _ = s.Program(prog.Name)
	if err := p.pr.bindInfer(p.xName); err != nil {
		return err
	}
	if err := p.engine.SetValues(cfg.Weights, nil); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}

// bindInfer binds an inference or evaluation program's input, labels,
// outputs and per-example losses.
func (pr *program) bindInfer(xName string) error {
	var err error
	if pr.in.x, err = pr.x.Input(xName); err != nil {
		return err
	}
	if pr.out, err = pr.x.Output("out"); err != nil {
		return err
	}
	if pr.mode == step.Eval {
		if pr.in.y, err = pr.x.Input("y"); err != nil {
			return err
		}
		if pr.loss, err = pr.x.Output("loss"); err != nil {
			return err
		}
	}
	return nil
}

// Engine returns the engine holding the weights and the plan's memory.
func (p *Predictor) Engine() *runtime.Engine { return p.engine }

// MicroBatch returns how many examples one run of the step computes.
func (p *Predictor) MicroBatch() int { return p.cfg.MicroBatch }

// PipelineBytes returns the input pipeline's reservation.
func (p *Predictor) PipelineBytes() int64 {
	if p.pipeline == nil {
		return 0
	}
	return p.pipeline.Budget()
}

// Close releases everything the predictor reserved.
func (p *Predictor) Close() {
	if p.engine != nil {
		p.session.Close()
		p.session = nil
		if p.pipeline != nil {
			p.engine.HostLedger().Release(mem.Input, "input pipeline", p.pipeline.Budget())
			p.pipeline = nil
		}
		p.engine.Close()
		p.engine = nil
	}
	if cl, ok := p.cfg.Backend.(interface{ Close() }); ok && p.ownBackend {
		cl.Close()
		p.ownBackend = false
	}
}

// Predict runs the model over every batch of ds (features only; labels
// are ignored) and calls each with the outputs of the batch's n examples,
// [n, ...] in order: what the model's last layer computes (probabilities
// after a final softmax). The tensor is valid until each returns. The
// pipeline's buffers come out of the predictor's reservation for them.
func (p *Predictor) Predict(ctx context.Context, ds data.Dataset[data.Batch], each func(out tensor.Tensor) error) error {
	pr := p.pr
	if pr.mode != step.Infer {
		return errors.New("train: the predictor was built to evaluate, not to predict")
	}
	rowOut := pr.out.Len() / pr.batch
	return p.run(ctx, ds, pr, func(b data.Batch, lo, n int) error {
		view, err := tensor.FromBytes(pr.out.DType(), append(tensor.Shape{n}, pr.out.Shape()[1:]...),
			pr.out.Bytes()[:n*rowOut*pr.out.DType().Size()])
		if err != nil {
			return err
		}
		return each(view)
	})
}

// Evaluate returns the mean loss over ds's examples and the accuracy (NaN
// when it does not apply: regression targets), as Keras' evaluate. The
// labels are class indices (converted to what the loss needs, as Fit
// does) or float targets.
func (p *Predictor) Evaluate(ctx context.Context, ds data.Dataset[data.Batch], classes int) (loss, acc float64, n int, err error) {
	pr := p.pr
	if pr.mode != step.Eval {
		return 0, 0, 0, errors.New("train: the predictor was built without Evaluate")
	}
	sc := scoringFor(p.spec, data.LabelKind{Class: true, Classes: classes})
	var sum float64
	correct, counted := 0, 0
	err = p.run(ctx, ds, pr, func(b data.Batch, lo, k int) error {
		for r := 0; r < k; r++ {
			sum += pr.loss.Float64At(r)
		}
		if sc.kind != scoreNone && b.Y.DType().IsInt() {
			view, err := tensor.FromBytes(pr.out.DType(), append(tensor.Shape{k}, pr.out.Shape()[1:]...),
				pr.out.Bytes()[:k*(pr.out.Len()/pr.batch)*pr.out.DType().Size()])
			if err != nil {
				return err
			}
			c, _ := sc.count(view, batchLabels{b.Y, lo}, false)
			correct, counted = correct+c, counted+k
		}
		n += k
		return nil
	})
	if err != nil {
		return 0, 0, n, err
	}
	if n == 0 {
		return 0, 0, 0, errors.New("train: evaluation data holds no examples")
	}
	return sum / float64(n), ratio(correct, counted), n, nil
}

// batchLabels reads class labels of a pipeline batch from row lo on.
type batchLabels struct {
	y  tensor.Tensor
	lo int
}

func (l batchLabels) label(r int) int { return int(l.y.Float64At(l.lo + r)) }

// run streams ds through pr, micro-batch by micro-batch (the last one of
// a batch padded with the previous contents), calling done with the batch,
// the first row of the run and how many of its rows are examples.
func (p *Predictor) run(ctx context.Context, ds data.Dataset[data.Batch], pr *program, done func(b data.Batch, lo, n int) error) error {
	it, err := ds.Iter(ctx, data.Config{Name: "input pipeline", Ledger: p.pipeline, Budget: p.pipeline.Budget()})
	if err != nil {
		return fmt.Errorf("train: opening %s: %w", ds.Name(), err)
	}
	defer it.Close()
	mb := pr.batch
	for {
		b, err := it.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		if b.X.Len()/max(b.Size, 1) != pr.in.x.Len()/mb {
			return fmt.Errorf("train: the data's examples have shape %v, the model's input %q takes %v", b.X.Shape()[1:], p.xName, pr.in.x.Shape()[1:])
		}
		for lo := 0; lo < b.Size; lo += mb {
			n := min(mb, b.Size-lo)
			p.fillX(pr.in.x, b.X, lo, n)
			if pr.mode == step.Eval {
				if err := p.fillY(pr.in.y, b.Y, lo, n); err != nil {
					return err
				}
			}
			if err := pr.x.Run(); err != nil {
				return fmt.Errorf("train: %w", err)
			}
			if err := done(b, lo, n); err != nil {
				return err
			}
		}
	}
}

// fillX copies rows [lo, lo+n) of src into the first n rows of dst,
// converting to dst's dtype and scaling uint8 values.
func (p *Predictor) fillX(dst, src tensor.Tensor, lo, n int) {
	per := dst.Len() / dst.Shape()[0]
	if src.DType() == tensor.Uint8 && dst.DType() == tensor.Float32 {
		scale := float32(p.cfg.Scale)
		if scale == 0 {
			scale = 1
		}
		d, s := dst.Float32s()[:n*per], src.Uint8s()[lo*per:(lo+n)*per]
		for i, v := range s {
			d[i] = float32(v) * scale
		}
		return
	}
	copyRows(dst, src, lo, lo+n) // into dst's first rows
}

// fillY copies the labels of rows [lo, lo+n) into the label input:
// class indices as they are, one-hot or 0/1 floats for a loss over
// distributions, float targets as they are.
func (p *Predictor) fillY(dst, src tensor.Tensor, lo, n int) error {
	if !src.DType().Valid() {
		return errors.New("train: evaluation needs labels; the data has none")
	}
	rows := src.Shape()[0]
	per := src.Len() / max(rows, 1)
	out := dst.Len() / dst.Shape()[0]
	switch {
	case dst.DType() == tensor.Int32 && per == 1:
		ys := dst.Int32s()
		for r := 0; r < n; r++ {
			ys[r] = int32(src.Float64At(lo + r))
		}
	case dst.DType().IsFloat() && src.DType().IsInt() && per == 1 && out > 1:
		for r := 0; r < n; r++ {
			c := int(src.Float64At(lo + r))
			for k := 0; k < out; k++ {
				v := 0.0
				if k == c {
					v = 1
				}
				dst.SetFloat64At(r*out+k, v)
			}
		}
	case dst.DType().IsFloat() && per == out:
		for i := 0; i < n*out; i++ {
			dst.SetFloat64At(i, src.Float64At(lo*per+i))
		}
	default:
		return fmt.Errorf("train: the loss %s needs %s labels of %d per example; the data has %s labels of %d", p.cfg.Loss.Name(), dst.DType(), out, src.DType(), per)
	}
	return nil
}

// Describe returns the plan's one-line summary, as the training plan's.
func (p *Predictor) Describe() string {
	t := p.PlannedTotals
	return fmt.Sprintf("params %s, grads %s, optimizer state %s, activations %s, workspace %s, inputs %s; arena %s (lower bound %s)",
		mem.FormatBytes(t[mem.Param]), mem.FormatBytes(t[mem.Grad]), mem.FormatBytes(t[mem.OptState]),
		mem.FormatBytes(t[mem.Activation]), mem.FormatBytes(t[mem.Workspace]), mem.FormatBytes(t[mem.Input]),
		mem.FormatBytes(p.Plan.ArenaBytes), mem.FormatBytes(p.Plan.LowerBound))
}
