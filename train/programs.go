package train

import (
	"fmt"
	"sort"

	"github.com/headroom-ml/headroom/compile"
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
		if r := trainN % bt % mb; r != 0 {
			if err := add("train_tail", r, step.Apply); err != nil {
				return nil, err
			}
		}
	} else {
		if err := add("train", bt, step.Train); err != nil {
			return nil, err
		}
		if r := trainN % bt; r != 0 {
			if err := add("train_tail", r, step.Train); err != nil {
				return nil, err
			}
		}
	}
	if evalN > 0 {
		be := min(c.evalBatch(), evalN)
		if err := add("eval", be, step.Eval); err != nil {
			return nil, err
		}
		if r := evalN % be; r != 0 {
			if err := add("eval_tail", r, step.Eval); err != nil {
				return nil, err
			}
		}
	}
	return progs, nil
}

// planned returns what the programs reserve together, by category: every
// variable once, the backend's scratch once (the largest), the largest
// arena (split as its plan splits it), and each program's own persistent
// buffers; and the arena's split.
func planned(progs map[string]*program) (totals, share [mem.NumCategories]int64) {
	type v struct {
		cat   mem.Category
		bytes int64
	}
	vars := map[string]v{}
	var arena int64
	for _, key := range sortedKeys(progs) {
		pr := progs[key]
		for _, b := range pr.p.Plan.Buffers {
			switch b.Kind {
			case compile.KindVariable:
				vars[b.Name] = v{b.Category, b.Bytes}
			case compile.KindScratch:
				if b.Bytes > vars[b.Name].bytes {
					vars[b.Name] = v{b.Category, b.Bytes}
				}
			case compile.KindArena:
			default:
				totals[b.Category] += b.Bytes
			}
		}
		if pr.p.Plan.ArenaBytes > arena {
			arena = pr.p.Plan.ArenaBytes
			share = pr.p.Plan.ArenaShare
		}
	}
	for _, x := range vars {
		totals[x.cat] += x.bytes
	}
	for c, b := range share {
		totals[c] += b
	}
	return totals, share
}

// scratchOf returns the largest backend scratch the programs need.
func scratchOf(progs map[string]*program) int64 {
	var s int64
	for _, pr := range progs {
		s = max(s, pr.p.Plan.Scratch)
	}
	return s
}

func sum(c [mem.NumCategories]int64) int64 {
	var t int64
	for _, b := range c {
		t += b
	}
	return t
}

// PlanFor compiles the programs Fit would use for trainN training and evalN
// evaluation examples, and returns the training step's plan and the bytes
// the run would reserve by category (data sets excluded).
func PlanFor(cfg Config, trainN, evalN int) (*compile.Plan, [mem.NumCategories]int64, error) {
	cfg.defaults()
	progs, err := cfg.compileAll(trainN, evalN)
	if err != nil {
		return nil, [mem.NumCategories]int64{}, err
	}
	totals, _ := planned(progs)
	return progs["train"].p.Plan, totals, nil
}

// MaxBatch returns the largest batch size <= limit whose run fits in budget
// bytes (data sets included, as dataBytes), or 0 if none does.
func MaxBatch(cfg Config, trainN, evalN int, dataBytes, budget int64, limit int) (int, error) {
	fits := func(b int) (bool, error) {
		c := cfg
		c.Batch = b
		_, totals, err := PlanFor(c, trainN, evalN)
		if err != nil {
			return false, err
		}
		return sum(totals)+dataBytes <= budget, nil
	}
	lo, hi := 0, limit // fits(lo) holds (0 by convention); find the largest
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
