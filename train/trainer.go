package train

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// Config describes a training run (Keras' compile and fit arguments).
type Config struct {
	Model     *nn.Sequential
	Loss      nn.Loss         // nil: sparse categorical cross-entropy
	Optimizer optim.Optimizer // nil: Adam
	Schedule  optim.Schedule  // nil: constant 1e-3
	ClipNorm  float64         // > 0: clip gradients by global norm
	Epochs    int
	Batch     int
	Seed      uint64
	Budget    int64 // bytes; <= 0: no budget
	// EvalBatch is the batch size of evaluation (0: Batch).
	EvalBatch int
	// Validation, when set, is evaluated at the end of each epoch.
	Validation *Examples
	Callbacks  []Callback
	// CheckpointDir, when set, receives a checkpoint at each epoch end;
	// with Resume, training continues from the newest one there.
	CheckpointDir   string
	Resume          bool
	KeepCheckpoints int // 0: keep 3
	// Warmup steps are left out of SamplesPerSec (20, as the peers).
	Warmup int
	// Threads is how many threads the step's kernels are planned for (0:
	// one); set kernels.SetThreads to match.
	Threads int
	// MaxSteps, when > 0, ends training after that many optimizer steps
	// (the epoch in progress ends there).
	MaxSteps int64
	// ShardOptimizer keeps 1/Size of the optimizer state on each process
	// (ZeRO stage 1; with Comm only, and not with ClipNorm or mixed_float16).
	ShardOptimizer bool
	// Comm, when it has more than one process, makes the run data-parallel:
	// each process trains on its share of every batch (Batch is the global
	// batch, as Keras' tf.distribute; each runs Batch/Size), gradients are
	// summed over the processes (weighted by their shares, so the update is
	// the one batch's) in buckets whose all-reduce starts as soon as
	// backward has produced them, weights start from rank 0's, and only
	// rank 0 writes checkpoints. dist.Comm provides it.
	Comm Collective
	// BucketBytes is the size of a gradient bucket of a data-parallel run
	// (0: DefaultBucketBytes).
	BucketBytes int64
	// StrictMemory makes memory growth after the first epoch an error
	// (*LeakError) instead of a warning in History.Leaks; NoWatchdog turns
	// the check off (it forces two garbage collections per epoch).
	StrictMemory bool
	NoWatchdog   bool
	// Precision is "float32" (or ""), "mixed_bfloat16" or "mixed_float16":
	// weights, optimizer state, the loss and the logits stay float32; each
	// other layer output is kept for the backward pass as a 16-bit copy.
	// mixed_float16 adds dynamic loss scaling (PyTorch GradScaler's
	// defaults: scale 65536, halved and the step skipped when a gradient is
	// not finite, doubled after 2000 good steps).
	Precision string
	// Remat recomputes activations in the backward pass instead of keeping
	// them, but for every ⌈√L⌉-th layer output (gradient checkpointing).
	Remat bool
	// Accumulate, when > 1, splits each batch into that many equal
	// micro-batches whose gradients are summed before one update (the
	// effective batch stays Batch). BatchNormalization sees each
	// micro-batch as a batch, as with Keras' gradient_accumulation_steps.
	Accumulate int
}

// Trainer holds a model's compiled programs and their memory.
type Trainer struct {
	cfg    Config
	engine *runtime.Engine
	arena  *runtime.Arena
	progs  map[string]*program
	data   []*Examples // charged to the ledger
	// Planned is the bytes the trainer reserves, known before step 1, and
	// PlannedTotals their split by category (the data sets count as input).
	Planned       int64
	PlannedTotals [mem.NumCategories]int64
	// Plan is the training step's plan (full batch).
	Plan *compile.Plan

	stop    bool    // set by StopTraining
	lrScale float64 // set by LRScheduler

	trainN, evalN int  // the data sizes the programs were compiled for
	replan        bool // SetBudget asked for a new reservation

	// dynamic loss scaling (mixed_float16)
	lossScale float64
	goodSteps int
	skipped   int64
}

// Loss scaling constants: torch.cuda.amp.GradScaler's defaults.
const (
	initLossScale  = 65536
	growthInterval = 2000
)

type program struct {
	p      *compile.Program
	x      *runtime.Executable
	batch  int // examples per run (a micro-batch when accumulating)
	mode   stepMode
	in     struct{ x, y, step tensor.Tensor }
	hyper  map[string]tensor.Tensor
	loss   tensor.Tensor                // train: mean loss; eval: sum of per-example losses
	out    tensor.Tensor                // logits (or outputs) for accuracy and Predict
	finite tensor.Tensor                // mixed_float16: whether the step's gradients were finite
	set    func(name string, v float64) // sets a hyper input (made once; allocates nothing)
}

func (c *Config) defaults() {
	if c.Loss == nil {
		c.Loss = nn.SparseCategoricalCrossentropy{}
	}
	if c.Optimizer == nil {
		c.Optimizer = &optim.Adam{}
	}
	if c.Schedule == nil {
		c.Schedule = optim.Constant(1e-3)
	}
	if c.Warmup == 0 {
		c.Warmup = 20
	}
	if c.KeepCheckpoints == 0 {
		c.KeepCheckpoints = 3
	}
}

// evalBatch is the evaluation batch size: EvalBatch, or the (micro-)batch
// of one process (each process evaluates the whole set, as they all hold
// the same weights).
func (c *Config) evalBatch() int {
	if c.EvalBatch > 0 {
		return c.EvalBatch
	}
	return max(1, c.Batch/c.accumulate()/c.ranks())
}

// Collective is what a data-parallel run needs of its processes.
type Collective interface {
	Rank() int
	Size() int
	AllReduceSum(buf []byte, dtype tensor.DType) error
	ReduceScatterSum(send, recv []byte, dtype tensor.DType) error
	AllGather(send, recv []byte) error
	Broadcast(buf []byte, root int) error
	// Start begins an all-reduce (sum) of buf in place; Wait completes it.
	Start(buf []byte, dtype tensor.DType) (interface{ Wait() error }, error)
}

// ranks returns the number of processes of the run (1 without Comm).
func (c *Config) ranks() int {
	if c.Comm == nil {
		return 1
	}
	return max(1, c.Comm.Size())
}

// stepMode says what a compiled step does.
type stepMode uint8

const (
	modeEval       stepMode = iota // forward, loss and outputs
	modeTrain                      // forward, backward, update
	modeAccumulate                 // forward, backward, add the gradients to the accumulators
	modeApply                      // as modeAccumulate, then update from the accumulated mean and reset
)

// build returns the graph of a step of the given mode at batch size b.
func (c *Config) build(b int, mode stepMode) func() (*graph.Graph, compile.Options) {
	return func() (*graph.Graph, compile.Options) {
		g := graph.New()
		ctx := nn.NewContext(g, mode != modeEval, c.Seed)
		ctx.Storage = c.storage()
		// mixed_bfloat16 computes products on bfloat16 operands (float32
		// sums), as Keras' policy does on TPUs: forward, backward, eval
		g.SetMatMulBF16(c.Precision == "mixed_bfloat16")
		m := c.Model
		x := g.Input("x", m.InputType(), append(tensor.Shape{b}, m.InputShape...))
		out := m.Forward(ctx, x)
		y := g.Input("y", c.Loss.LabelType(), append(tensor.Shape{b}, c.Loss.LabelShape(out.Shape())...))
		g.PushScope("loss")
		per := c.Loss.PerExample(out, y)
		g.PopScope()
		scores, _ := nn.Logits(out)
		if mode == modeEval {
			opt := compile.Options{Name: "eval", Threads: c.Threads, Outputs: []compile.Output{
				{Name: "loss", Node: graph.ReduceSum(per)}, {Name: "out", Node: out}}}
			return g, opt
		}
		loss := graph.ReduceMean(per)
		target := loss // what is differentiated: the loss, scaled under float16
		var unscale *graph.Node
		if c.lossScaling() {
			target = graph.Mul(loss, g.Input("opt/loss_scale", loss.DType(), nil))
			unscale = g.Input("opt/inv_loss_scale", loss.DType(), nil)
		}
		// update builds what a training step does with wrt[i]'s gradient:
		// add it, weighted by this micro-batch's share of the batch
		// (opt/micro_weight), to the accumulator, and/or hand it to the
		// optimizer. The weighted sum is the gradient of the batch's mean loss.
		var weight, rankWeight *graph.Node
		if mode == modeAccumulate || mode == modeApply {
			weight = g.Input("opt/micro_weight", loss.DType(), nil)
		}
		if c.ranks() > 1 && mode != modeAccumulate {
			rankWeight = g.Input("opt/rank_weight", loss.DType(), nil)
		}
		// The gradient of a data-parallel run is summed over the processes
		// (each weighted by its share of the batch). Unless the optimizer
		// state is sharded (shardedUpdate reduce-scatters instead), the
		// gradients go through buckets whose all-reduce starts as soon as
		// backward has produced them and is waited for before the update.
		var bk *buckets
		if rankWeight != nil && !c.sharded() {
			bk = &buckets{g: g, limit: c.bucketBytes()}
		}
		// update builds what a training step does with wrt[i]'s gradient:
		// add it, weighted by this micro-batch's share of the batch
		// (opt/micro_weight), to the accumulator, and/or hand it on. The
		// weighted sum is the gradient of the batch's mean loss. It returns
		// this process's share, ready to be reduced (in accumulate mode, the
		// gradient itself, for the plan's categories).
		update := func(i int, gr *graph.Node) *graph.Node {
			p := ctx.Trainable[i]
			if weight != nil {
				// Accumulators are persistent gradients (grad category).
				acc := g.Variable(p.Attr().Name+"/accum", graph.RoleGrad, p.DType(), p.Shape())
				sum := graph.Add(acc, graph.Mul(gr, weight))
				if mode == modeAccumulate {
					graph.Assign(acc, sum)
					return gr
				}
				graph.Assign(acc, graph.BroadcastTo(graph.ScalarLike(p, 0), p.Shape()...))
				gr = sum
			}
			if rankWeight != nil {
				gr = graph.Mul(gr, rankWeight)
			}
			return gr
		}
		grads := make([]*graph.Node, len(ctx.Trainable))
		opt := autodiff.Options{Keep: c.keep(ctx), Lower: func(n *graph.Node) *graph.Node { return ctx.Low[n] }}
		interleave := c.ClipNorm <= 0 && !c.lossScaling()
		if interleave {
			// Each gradient is handed on as soon as it is final: to the
			// optimizer at once (gradients never all live at once), to the
			// sharded update, or to a bucket whose all-reduce it may start.
			opt.OnGrad = func(i int, gr *graph.Node) {
				old := g.SetPhase(graph.Update)
				grads[i] = update(i, gr)
				switch {
				case mode == modeAccumulate:
				case c.sharded():
					c.shardedUpdate(g, ctx.Trainable[i], grads[i])
				case bk != nil:
					bk.add(i, grads[i])
				default:
					c.Optimizer.Apply(g, ctx.Trainable[i:i+1], grads[i:i+1])
				}
				g.SetPhase(old)
			}
		}
		raw := autodiff.GradWith(target, opt, ctx.Trainable...)
		old := g.SetPhase(graph.Update)
		if interleave && bk != nil && mode != modeAccumulate {
			// wait for each bucket, in the order they started, and update
			// its parameters
			bk.waitAll(func(members []int, sums []*graph.Node) {
				params := make([]*graph.Node, len(members))
				for j, i := range members {
					params[j], grads[i] = ctx.Trainable[i], sums[j]
				}
				c.Optimizer.Apply(g, params, sums)
			})
		}
		var finite *graph.Node
		if !interleave { // clipping and overflow checks need every gradient first
			for i, gr := range raw {
				if unscale != nil {
					gr = graph.Mul(gr, unscale)
				}
				grads[i] = update(i, gr)
				if bk != nil && mode != modeAccumulate {
					bk.add(i, grads[i])
				}
			}
			if bk != nil && mode != modeAccumulate {
				bk.waitAll(func(members []int, sums []*graph.Node) {
					for j, i := range members {
						grads[i] = sums[j]
					}
				})
			}
			if unscale != nil && mode != modeAccumulate {
				// finite holds when no gradient (of the whole batch, after
				// the all-reduce) is Inf or NaN: 0·g is NaN exactly there.
				// The accumulators were reset above, unguarded: a skipped
				// step drops its gradients.
				var probe *graph.Node
				for _, gr := range grads {
					z := graph.ReduceSum(graph.MulScalar(gr, 0))
					if probe == nil {
						probe = z
					} else {
						probe = graph.Add(probe, z)
					}
				}
				finite = graph.Equal(probe, graph.ScalarLike(probe, 0))
				g.SetGuard(finite) // a step with an overflow changes nothing
			}
			if mode != modeAccumulate {
				grads = optim.ClipByGlobalNorm(grads, c.ClipNorm)
				c.Optimizer.Apply(g, ctx.Trainable, grads)
			}
		}
		for _, u := range ctx.Updates {
			graph.Assign(u[0], u[1])
		}
		g.SetGuard(nil)
		g.SetPhase(old)
		outs := []compile.Output{{Name: "loss", Node: loss}, {Name: "out", Node: scores}}
		if finite != nil {
			outs = append(outs, compile.Output{Name: "finite", Node: finite})
		}
		return g, compile.Options{Name: "train", Threads: c.Threads, Grads: grads, Outputs: outs}
	}
}

// keep returns the rematerialization policy: nil (keep every activation),
// or, with Remat, keep only every ⌈√L⌉-th of the L layer outputs and
// recompute the rest in the backward pass (Chen et al.'s √n checkpoints).
func (c *Config) keep(ctx *nn.Context) func(*graph.Node) bool {
	if !c.Remat {
		return nil
	}
	every := int(math.Ceil(math.Sqrt(float64(len(ctx.Outputs)))))
	kept := map[*graph.Node]bool{}
	for i, o := range ctx.Outputs {
		if (i+1)%every == 0 {
			kept[o] = true
		}
	}
	return func(n *graph.Node) bool { return kept[n] }
}

// storage returns the dtype of saved activations under the precision
// policy (Invalid for float32).
func (c *Config) storage() tensor.DType {
	switch c.Precision {
	case "mixed_bfloat16":
		return tensor.BFloat16
	case "mixed_float16":
		return tensor.Float16
	}
	return tensor.Invalid
}

func (c *Config) lossScaling() bool { return c.Precision == "mixed_float16" }

// sharded reports whether the optimizer state is sharded over the
// processes (ZeRO stage 1).
func (c *Config) sharded() bool { return c.ShardOptimizer && c.ranks() > 1 }

// shardedUpdate is ZeRO stage 1 (Rajbhandari et al., "ZeRO: Memory
// Optimizations Toward Training Trillion Parameter Models", 2020) for one
// parameter p of n elements, as blocks of b = ⌈n/size⌉: the share-weighted
// gradient is reduce-scattered (this process gets the sum's block), the
// optimizer updates this process's block of p with state of block size,
// and the updated blocks are all-gathered into p.
func (c *Config) shardedUpdate(g *graph.Graph, p, gr *graph.Node) {
	size, rank := c.ranks(), c.Comm.Rank()
	n := p.Shape().Size()
	b := (n + size - 1) / size
	flat := func(x *graph.Node) *graph.Node { // [n] padded with zeros to [b·size]
		x = graph.Reshape(x, n)
		if pad := b*size - n; pad > 0 {
			x = graph.Concat(0, x, graph.BroadcastTo(graph.ScalarLike(x, 0), pad))
		}
		return x
	}
	g.PushScope("zero")
	mine := graph.ReduceScatterSum(flat(gr), size)
	w := graph.Slice(flat(p), []int{rank * b}, []int{(rank + 1) * b})
	full := graph.AllGather(c.Optimizer.Update(g, p, w, mine), size)
	if b*size > n {
		full = graph.Slice(full, []int{0}, []int{n})
	}
	graph.Assign(p, graph.Reshape(full, p.Shape()...))
	g.PopScope()
}

// accumulate is the number of micro-batches per update (at least 1).
func (c *Config) accumulate() int { return max(1, c.Accumulate) }

// compileAll compiles the programs for the given data sizes; trainN <= 0
// plans one batch without data.
func (c *Config) compileAll(trainN, evalN int) (map[string]*program, error) {
	if trainN <= 0 {
		trainN = c.Batch
	}
	progs := map[string]*program{}
	add := func(key string, b int, mode stepMode) error {
		if b <= 0 {
			return nil
		}
		p, err := compile.Build(c.build(b, mode))
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
		if err := add("train_accumulate", mb, modeAccumulate); err != nil {
			return nil, err
		}
		if err := add("train", mb, modeApply); err != nil {
			return nil, err
		}
		// the last partial batch: micro-batches of mb and a smaller last one
		if r := trainN % bt % mb; r != 0 {
			if err := add("train_tail", r, modeApply); err != nil {
				return nil, err
			}
		}
	} else {
		if err := add("train", bt, modeTrain); err != nil {
			return nil, err
		}
		if r := trainN % bt; r != 0 {
			if err := add("train_tail", r, modeTrain); err != nil {
				return nil, err
			}
		}
	}
	if evalN > 0 {
		be := min(c.evalBatch(), evalN)
		if err := add("eval", be, modeEval); err != nil {
			return nil, err
		}
		if r := evalN % be; r != 0 {
			if err := add("eval_tail", r, modeEval); err != nil {
				return nil, err
			}
		}
	}
	return progs, nil
}

// planned returns what the programs reserve together, by category: every
// variable once, the largest arena (split as its plan splits it), and each
// program's own persistent buffers; and the arena's split.
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

// New compiles the model for the training data and cfg.Validation and
// reserves all the memory the run will use on a new CPU engine. It fails
// before any step with *mem.OOMError when Budget cannot hold it, naming a
// batch size that fits.
func New(cfg Config, trainData *Examples) (*Trainer, error) {
	evalData := cfg.Validation
	cfg.defaults()
	if cfg.Model == nil || cfg.Batch <= 0 || cfg.Epochs < 0 {
		return nil, errors.New("train: a model, a positive batch size and epochs >= 0 are required")
	}
	if cfg.sharded() && (cfg.ClipNorm > 0 || cfg.lossScaling()) {
		return nil, errors.New("train: a sharded optimizer state does not combine with gradient clipping or mixed_float16 loss scaling yet")
	}
	switch cfg.Precision {
	case "", "float32", "mixed_bfloat16", "mixed_float16":
	default:
		return nil, fmt.Errorf("train: unknown precision %q (float32, mixed_bfloat16, mixed_float16)", cfg.Precision)
	}
	trainN := 0 // 0: plan one batch, for a stream (FitStream)
	if trainData != nil {
		if err := trainData.Validate(); err != nil {
			return nil, err
		}
		trainN = trainData.N
	}
	evalN := 0
	if evalData != nil {
		if err := evalData.Validate(); err != nil {
			return nil, err
		}
		evalN = evalData.N
	}
	progs, err := cfg.compileAll(trainN, evalN)
	if err != nil {
		return nil, err
	}
	totals, share := planned(progs)
	var dataBytes int64
	if trainData != nil {
		dataBytes = mem.Align(trainData.Bytes())
	}
	if evalData != nil {
		dataBytes += mem.Align(evalData.Bytes())
	}
	totals[mem.Input] += dataBytes
	t := &Trainer{cfg: cfg, progs: progs, Planned: sum(totals), PlannedTotals: totals, Plan: progs["train"].p.Plan, lossScale: initLossScale}
	if cfg.Budget > 0 && t.Planned > cfg.Budget {
		return nil, t.budgetError(trainN, evalN, dataBytes)
	}
	t.engine = runtime.NewCPU(cfg.Budget)
	if cfg.Comm != nil {
		t.engine.SetCollective(cfg.Comm)
	}
	ok := false
	defer func() {
		if !ok {
			t.Close()
		}
	}()
	for _, d := range []*Examples{trainData, evalData} {
		if d == nil {
			continue
		}
		if err := t.engine.Ledger().Charge(mem.Input, "data:"+d.Name, mem.Align(d.Bytes())); err != nil {
			return nil, err
		}
		t.data = append(t.data, d)
	}
	t.trainN, t.evalN = trainN, evalN
	if err := t.reserve(progs, share); err != nil {
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

// broadcastWeights gives every process rank 0's variables (a
// data-parallel run starts, and resumes, from one set of weights).
func (t *Trainer) broadcastWeights() error {
	if t.cfg.ranks() == 1 {
		return nil
	}
	for _, v := range t.engine.Variables() {
		if _, sharded := t.shardOf(v); sharded {
			continue // each process keeps its own block
		}
		if err := t.cfg.Comm.Broadcast(v.Tensor().Bytes(), 0); err != nil {
			return fmt.Errorf("train: broadcasting %s from rank 0: %w", v.Name, err)
		}
	}
	return nil
}

func (t *Trainer) budgetError(trainN, evalN int, dataBytes int64) error {
	oom := t.Plan.OOM("train", t.cfg.Budget)
	oom.Ledger, oom.Owner, oom.Request = "budget", fmt.Sprintf("training (batch %d)", t.cfg.Batch), t.Planned
	oom.Totals = t.PlannedTotals
	oom.Remedies = nil
	fit, err := MaxBatch(t.cfg, trainN, evalN, dataBytes, t.cfg.Budget, t.cfg.Batch)
	switch {
	case err != nil:
		oom.Remedies = append(oom.Remedies, "could not search smaller batches: "+err.Error())
	case fit > 0:
		oom.Remedies = append(oom.Remedies, fmt.Sprintf("batch %d needs %s; batch %d fits in the budget of %s",
			t.cfg.Batch, mem.FormatBytes(t.Planned), fit, mem.FormatBytes(t.cfg.Budget)))
	default:
		oom.Remedies = append(oom.Remedies, fmt.Sprintf("batch %d needs %s; not even batch 1 fits in %s (weights, optimizer state and data alone exceed it)",
			t.cfg.Batch, mem.FormatBytes(t.Planned), mem.FormatBytes(t.cfg.Budget)))
	}
	return oom
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// reserve reserves the shared arena and loads every program into it. On
// failure it releases what it took.
func (t *Trainer) reserve(progs map[string]*program, share [mem.NumCategories]int64) error {
	arena, err := t.engine.ReserveArena("arena", share)
	if err != nil {
		return err
	}
	t.arena, t.progs = arena, progs
	for _, key := range sortedKeys(progs) {
		if err := t.attach(progs[key]); err != nil {
			t.release()
			return err
		}
	}
	return nil
}

// release frees the programs and the arena, keeping the variables.
func (t *Trainer) release() {
	for _, pr := range t.progs {
		if pr.x != nil {
			pr.x.Close()
			pr.x = nil
		}
	}
	if t.arena != nil {
		t.arena.Release()
		t.arena = nil
	}
}

// SetBudget changes the run's memory budget (the ledger's limit). If the
// run's reservation does not fit under it, the next step first re-plans:
// see Replan.
func (t *Trainer) SetBudget(b int64) {
	t.cfg.Budget = b
	t.engine.Ledger().SetBudget(b)
	t.replan = true
}

// Event is something the trainer did on its own during Fit: a re-plan after
// a reservation failed (with the peaks and the micro-batching it chose), or a
// resume that passed over a damaged newer checkpoint (no peaks, no Err).
type Event struct {
	Step       int64
	Message    string
	PeakBefore int64 // planned bytes before and after
	PeakAfter  int64
	Accumulate int
	MicroBatch int
	Err        error // the reservation failure that caused it
}

func (e Event) String() string {
	if e.PeakBefore == 0 && e.PeakAfter == 0 { // not a re-plan
		return fmt.Sprintf("step %d: %s", e.Step, e.Message)
	}
	return fmt.Sprintf("step %d: %s (planned %s -> %s)", e.Step, e.Message, mem.FormatBytes(e.PeakBefore), mem.FormatBytes(e.PeakAfter))
}

// Replan re-reserves the run's memory under the current budget. When the
// reservation fails with *mem.OOMError it re-plans the step as twice as
// many micro-batches (the effective batch and the update stay the same)
// and tries again, until it fits or micro-batches of one example do not.
// Variables (weights, optimizer state) are kept throughout, so the step
// about to run is neither lost nor applied twice.
func (t *Trainer) Replan(step int64) ([]Event, error) {
	t.replan = false
	var events []Event
	t.release()
	for {
		progs, err := t.cfg.compileAll(t.trainN, t.evalN)
		if err != nil {
			return events, err
		}
		totals, share := planned(progs)
		for _, d := range t.data {
			totals[mem.Input] += mem.Align(d.Bytes())
		}
		if len(events) > 0 {
			events[len(events)-1].PeakAfter = sum(totals)
		}
		err = t.reserve(progs, share)
		if err == nil {
			t.Planned, t.PlannedTotals, t.Plan = sum(totals), totals, progs["train"].p.Plan
			return events, nil
		}
		var oom *mem.OOMError
		k := t.cfg.accumulate()
		if !errors.As(err, &oom) || t.cfg.Batch%(2*k) != 0 {
			return events, fmt.Errorf("train: step %d: re-planning under a budget of %s: %w", step, mem.FormatBytes(t.cfg.Budget), err)
		}
		t.cfg.Accumulate = 2 * k
		events = append(events, Event{Step: step, Err: err, PeakBefore: sum(totals), Accumulate: 2 * k, MicroBatch: t.cfg.Batch / (2 * k),
			Message: fmt.Sprintf("reserving %s failed under a budget of %s; retrying the step as %d micro-batches of %d",
				mem.FormatBytes(sum(totals)), mem.FormatBytes(t.cfg.Budget), 2*k, t.cfg.Batch/(2*k))})
	}
}

// attach loads a compiled program into the shared arena and binds its
// inputs and outputs.
func (t *Trainer) attach(pr *program) error {
	var err error
	if pr.x, err = t.engine.LoadIn(pr.p, t.arena); err != nil {
		return err
	}
	return pr.bind()
}

// load compiles and attaches a program after New (evaluation of data of a
// size New did not plan for). Its buffers add to the ledger beyond Planned.
func (t *Trainer) load(key string, b int, mode stepMode) (*program, error) {
	p, err := compile.Build(t.cfg.build(b, mode))
	if err != nil {
		return nil, err
	}
	p.Name = key
	pr := &program{p: p, batch: b, mode: mode}
	if err := t.attach(pr); err != nil {
		return nil, err
	}
	return pr, nil
}

func (pr *program) bind() error {
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
	pr.in.x, pr.in.y = get("x"), get("y")
	pr.hyper = map[string]tensor.Tensor{}
	for _, s := range pr.p.Inputs {
		switch s.Name {
		case "x", "y":
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

// initWeights draws every variable's initial value from the model seed.
func (t *Trainer) initWeights() error {
	g := graph.New()
	ctx := nn.NewContext(g, true, t.cfg.Seed)
	err := graph.Catch(func() {
		x := g.Input("x", t.cfg.Model.InputType(), append(tensor.Shape{1}, t.cfg.Model.InputShape...))
		t.cfg.Model.Forward(ctx, x)
	})
	if err != nil {
		return err
	}
	for name, init := range ctx.Init {
		v, ok := t.engine.Variable(name)
		if !ok {
			continue
		}
		nn.InitTensor(init, t.cfg.Seed, name, v.Tensor())
	}
	return nil // optimizer state starts at zero, as the engine made it
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
		t.engine.Ledger().Release(mem.Input, "data:"+d.Name, mem.Align(d.Bytes()))
	}
	t.engine.Close()
	t.engine = nil
}
