package train

import (
	"fmt"
	"sort"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// program is a compiled step loaded in the trainer's arena, with its
// inputs and outputs bound.
type program struct {
	p      *compile.Program
	x      *runtime.Executable
	batch  int // examples per run (a micro-batch when accumulating)
	bucket int // the bucket length it runs at (0: the model's own)
	mode   step.Mode
	in     struct{ x, y, step tensor.Tensor }
	hyper  map[string]tensor.Tensor
	loss   tensor.Tensor                // train: mean loss; eval: sum of per-example losses
	out    tensor.Tensor                // logits (or outputs) for accuracy and Predict
	finite tensor.Tensor                // mixed_float16: whether the step's gradients were finite
	set    func(name string, v float64) // sets a hyper input (made once; allocates nothing)
}

// compile builds and compiles one step of mode at batch size b.
func (c *Config) compile(b int, mode step.Mode) (*compile.Program, error) {
	return step.Compile(c.stepConfig(), b, mode, (*step.Builder).Standard)
}

// compileAs compiles the programs for the given data sizes with the
// storage c holds; trainN <= 0 plans one batch without data. The programs are named by what they run:
// "train" (the batch, or its micro-batch that updates), "train_accumulate"
// (the other micro-batches), "train_tail" (the last, smaller batch),
// "eval" and "eval_tail".
func (c *Config) compileAs(trainN, evalN int) (map[string]*program, error) {
	if trainN <= 0 {
		trainN = c.Batch
	}
	progs := map[string]*program{}
	add := func(key string, b int, mode step.Mode) error {
		if b <= 0 {
			return nil
		}
		p, err := c.compile(b, mode)
		if err != nil {
			return fmt.Errorf("train: building the %s step (batch %d): %w", key, b, err)
		}
		p.Name = key
		progs[key] = &program{p: p, batch: b, mode: mode}
		return nil
	}
	if c.Batch%c.ranks() != 0 {
		return nil, fmt.Errorf("train: global batch %d does not split evenly over %d processes", c.Batch, c.ranks())
	}
	bt := min(c.Batch/c.ranks(), trainN) // this process's share of a batch
	last := c.share(trainN % c.Batch)    // and of the last, partial one (0: none)
	if trainN < c.Batch {
		last = c.share(trainN)
	}
	if k := c.accumulate(); k > 1 {
		if bt%k != 0 {
			return nil, fmt.Errorf("train: batch %d does not split into %d equal micro-batches", bt, k)
		}
		mb := bt / k
		if err := add("train_accumulate", mb, step.Accumulate); err != nil {
			return nil, err
		}
		if err := add("train", mb, step.Apply); err != nil {
			return nil, err
		}
		// the last partial batch: micro-batches of mb and a smaller last one
		if r := last % mb; r != 0 {
			if err := add("train_tail", r, step.Apply); err != nil {
				return nil, err
			}
		}
	} else {
		if err := add("train", bt, step.Train); err != nil {
			return nil, err
		}
		if last != 0 && last != bt {
			if err := add("train_tail", last, step.Train); err != nil {
				return nil, err
			}
		}
	}
	if err := c.addEval(add, evalN); err != nil {
		return nil, err
	}
	if len(c.buckets) > 1 {
		if err := c.addBuckets(progs); err != nil {
			return nil, err
		}
	}
	return progs, nil
}

// share returns this process's share of a batch of n examples: the
// examples [rank·n/ranks, (rank+1)·n/ranks) (Fit's split).
func (c *Config) share(n int) int {
	ranks, rank := c.ranks(), 0
	if ranks > 1 {
		rank = c.Comm.Rank()
	}
	return (rank+1)*n/ranks - rank*n/ranks
}

// addEval adds the evaluation programs of evalN examples.
func (c *Config) addEval(add func(key string, b int, mode step.Mode) error, evalN int) error {
	if evalN <= 0 {
		return nil
	}
	be := min(c.evalBatch(), evalN)
	if err := add("eval", be, step.Eval); err != nil {
		return err
	}
	if r := evalN % be; r != 0 {
		return add("eval_tail", r, step.Eval)
	}
	return nil
}

// RunPlan is what a run reserves, known before it reserves anything.
type RunPlan struct {
	// Step is the training step's plan (full batch).
	Step *compile.Plan
	// Totals split Peak, everything the run reserves, by category: the
	// programs' (see runtime.Reserve) and, as input, the examples held in
	// memory (DataBytes) and the input pipeline's reservation
	// (PipelineBytes).
	Totals        [mem.NumCategories]int64
	Peak          int64
	DataBytes     int64
	PipelineBytes int64
	// Streamed: the training set is read from From every epoch.
	Streamed bool
	From     string
	// Storage is what a 16-bit precision policy keeps for the backward
	// pass, and StorageNote why when that is not its 16-bit layout.
	Storage     StorageChoice
	StorageNote string
	// Programs are the compiled programs the run would reserve (the
	// training step, its partial last batch, evaluation), by name: what a
	// device backend would load (a CUDA run's kernels are rendered from
	// their instructions).
	Programs []*compile.Program
	// Buckets are a bucketed text's buckets, each with what a run of that
	// bucket alone would reserve (its programs, the data and the pipeline);
	// the run reserves them all in one session: Peak.
	Buckets []BucketPlan

	trainN, evalN int // the data sizes the programs were compiled for
}

// PlanFor compiles the programs Fit would run on d and returns what the
// run would reserve, without reserving it or reading the data (a data set
// that can only be described by reading it is read, see Data.Describe).
func PlanFor(cfg Config, d *Data) (*RunPlan, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.defaults()
	defer cfg.closeBackend()
	if err := d.resolve(cfg.Budget); err != nil {
		return nil, err
	}
	t := &Trainer{cfg: cfg, data: d, text: d.text}
	if err := t.describe(); err != nil { // the checks New makes
		return nil, err
	}
	_, rp, err := cfg.planRun(d)
	return rp, err
}

// planRun compiles the run's programs for d and plans them with the data.
func (c *Config) planRun(d *Data) (map[string]*program, *RunPlan, error) {
	if err := c.forBuckets(d); err != nil {
		return nil, nil, err
	}
	trainN, evalN := d.trainN(), d.info.HeldOut
	switch {
	case len(c.buckets) > 0: // batches padded to the batch: no smaller last one
		trainN, evalN = c.Batch, c.evalBatch()
	case d.text != nil:
		trainN, evalN = c.Batch, d.text.valWindows()
	}
	progs, err := c.compileAll(trainN, evalN)
	if err != nil {
		return nil, nil, err
	}
	rp, err := c.planRunWith(d, progs)
	if err != nil {
		return nil, nil, err
	}
	rp.trainN, rp.evalN = trainN, evalN
	return progs, rp, nil
}

// planRunWith plans compiled programs with d's bytes.
func (c *Config) planRunWith(d *Data, progs map[string]*program) (*RunPlan, error) {
	var list []*compile.Program
	for _, pr := range progs {
		list = append(list, pr.p)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	res := runtime.Reserve(list)
	rp := &RunPlan{Step: progs["train"].p.Plan, Totals: res.Totals, Storage: c.storage, StorageNote: c.storageNote,
		Programs: list, trainN: d.trainN(), evalN: d.info.HeldOut}
	if d.text != nil {
		rp.trainN, rp.evalN = c.Batch, d.text.valWindows()
		if len(c.buckets) > 0 {
			rp.evalN = c.evalBatch()
		}
	}
	rp.Streamed, rp.From = d.Streamed()
	if c.Backend.HostAddressable() { // else host memory, beside the device's plan
		rp.DataBytes = d.held
	}
	if d.fedThroughPipeline() {
		rp.PipelineBytes = c.InputBudget
		if rp.PipelineBytes <= 0 {
			rp.PipelineBytes = data.PipelineBudget(c.Batch, d.exampleBytes())
		}
		rp.PipelineBytes = mem.Align(rp.PipelineBytes)
	}
	rp.Totals[mem.Input] += rp.DataBytes + rp.PipelineBytes
	rp.Peak = sum(rp.Totals)
	rp.Buckets = c.bucketPlans(progs, rp.DataBytes+rp.PipelineBytes)
	return rp, nil
}

func sum(c [mem.NumCategories]int64) int64 {
	var t int64
	for _, b := range c {
		t += b
	}
	return t
}

// MaxBatch returns the largest batch size <= limit whose run on d fits in
// budget bytes, or 0 if none does.
func MaxBatch(cfg Config, d *Data, budget int64, limit int) (int, error) {
	if err := cfg.check(); err != nil {
		return 0, err
	}
	cfg.defaults()
	defer cfg.closeBackend()
	if err := d.resolve(cfg.Budget); err != nil {
		return 0, err
	}
	return cfg.maxBatch(d, budget, limit)
}

func (c Config) maxBatch(d *Data, budget int64, limit int) (int, error) {
	fits := func(b int) (bool, error) {
		c := c
		c.Batch = b
		if k := c.accumulate(); k > 1 && b%k != 0 {
			c.Accumulate = 1
		}
		_, rp, err := c.planRun(d)
		if err != nil {
			return false, err
		}
		return rp.Peak <= budget, nil
	}
	// batches that split evenly over the processes: unit·m for m in
	// [0, limit/unit]
	unit := c.ranks()
	m, err := largest(0, limit/unit, func(m int) (bool, error) { return fits(m * unit) })
	return m * unit, err
}

// largest returns the largest n in [lo, hi] for which fits holds, given
// that it holds for lo (by convention when lo is 0) and, past some n, for
// none above: a bisection.
func largest(lo, hi int, fits func(int) (bool, error)) (int, error) {
	for lo < hi {
		mid := (lo + hi + 1) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}

// bind binds the program's inputs (the model's input is xName) and
// outputs.
func (pr *program) bind(xName string) error {
	pr.set = func(name string, v float64) {
		if x, ok := pr.hyper[name]; ok {
			x.SetFloat64At(0, v)
		}
	}
	var err error
	get := func(name string) tensor.Tensor {
		if err != nil {
			return tensor.Tensor{}
		}
		var t tensor.Tensor
		t, err = pr.x.Input(name)
		return t
	}
	pr.in.x, pr.in.y = get(xName), get("y")
	pr.hyper = map[string]tensor.Tensor{}
	for _, s := range pr.p.Inputs {
		switch s.Name {
		case xName, "y":
		case "step":
			pr.in.step = get("step")
		default:
			pr.hyper[s.Name] = get(s.Name)
		}
	}
	if err != nil {
		return err
	}
	if pr.loss, err = pr.x.Output("loss"); err != nil {
		return err
	}
	if pr.out, err = pr.x.Output("out"); err != nil {
		return err
	}
	for _, s := range pr.p.Outputs {
		if s.Name == "finite" {
			pr.finite, err = pr.x.Output("finite")
		}
	}
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
