package cli

import (
	"encoding/json"
	"fmt"
	"github.com/headroom-ml/headroom/data"
	"io"
	"sort"
	"strings"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/profile"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// planReport is what 'headroom plan --json' prints (bytes, integers).
type planReport struct {
	Model             string       `json:"model"`
	Dataset           string       `json:"dataset"`
	Batch             int          `json:"batch"`
	ParamCount        int          `json:"param_count"`
	ParamsBytes       int64        `json:"params_bytes"`
	GradsBytes        int64        `json:"grads_bytes"`
	OptStateBytes     int64        `json:"optstate_bytes"`
	ActivationsBytes  int64        `json:"activations_bytes"`
	WorkspaceBytes    int64        `json:"workspace_bytes"`
	InputBytes        int64        `json:"input_bytes"`
	ArenaBytes        int64        `json:"arena_bytes"`
	LowerBoundBytes   int64        `json:"arena_lower_bound_bytes"`
	PeakBytes         int64        `json:"peak_bytes"`
	BudgetBytes       int64        `json:"budget_bytes,omitempty"`      // --budget: the whole process's
	PlanBudgetBytes   int64        `json:"plan_budget_bytes,omitempty"` // what the plan may reserve under it (or under the limit the process lives under)
	BudgetSource      string       `json:"budget_source,omitempty"`
	MaxBatchForBudget *int         `json:"max_batch_for_budget,omitempty"`
	StepBatch         int          `json:"step_batch,omitempty"`     // set when --batch exceeds the training set: a step holds all of it
	PrecisionNote     string       `json:"precision_note,omitempty"` // a 16-bit policy that keeps float32's layout, and why
	Layers            []layerBytes `json:"layers"`
	// with --keras: the counts and rows of Keras' model.summary(), and the
	// file's optimizer when the plan uses it
	TotalParams        *int         `json:"total_params,omitempty"`
	TrainableParams    *int         `json:"trainable_params,omitempty"`
	NonTrainableParams *int         `json:"non_trainable_params,omitempty"`
	Optimizer          string       `json:"optimizer,omitempty"`
	KerasLayers        []kerasLayer `json:"keras_layers,omitempty"`
}

type layerBytes struct {
	Layer      string `json:"layer"`
	Params     int64  `json:"params_bytes"`
	OptState   int64  `json:"optstate_bytes"`
	Activation int64  `json:"activation_bytes"` // arena buffers it owns, time-shared
	Other      int64  `json:"other_bytes"`
}

func runPlan(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("plan", stdout)
	o.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object")
	ranks := fs.Int("ranks", 1, "plan one process of a data-parallel run over this many (as under mpirun -np N): its share of --batch, the gradient buckets")
	shard := fs.Bool("shard-optimizer", false, "with --ranks: keep 1/ranks of the optimizer state on each process (ZeRO stage 1)")
	bucketSize := fs.String("bucket-size", "1MiB", "with --ranks: the size of a gradient bucket")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if o.isText() { // a language model on text (text.go)
		return runPlanText(&o, *asJSON, stdout)
	}
	bucketBytes, err := mem.ParseBytes(*bucketSize)
	if err != nil || bucketBytes <= 0 {
		return fmt.Errorf("--bucket-size %q: want a size such as 1MiB", *bucketSize)
	}
	if *ranks < 1 {
		return fmt.Errorf("--ranks %d: want at least 1", *ranks)
	}
	var trainSet, testSet *data.Examples
	var cfg train.Config
	trainN, evalN, dataBytes := 0, 0, int64(0) // 0: one batch, no data set
	if o.keras != "" {
		// a Keras model is planned on its own: one step, no data set
		m, err := o.kerasModel(nil)
		if err != nil {
			return err
		}
		opt, err := optim.ByName(o.optimizer)
		if err != nil {
			return err
		}
		cfg = train.Config{Model: m, Optimizer: opt, Epochs: 1, Batch: o.batch, Precision: o.precision, Accumulate: o.accumulate, Remat: o.remat, Threads: o.threads}
		if err := o.applyKeras(&cfg); err != nil {
			return err
		}
		o.model, o.dataset = o.keras, "none"
		if err := o.printKeras(stdout, *asJSON); err != nil {
			return err
		}
	} else {
		if trainSet, testSet, err = o.load(); err != nil {
			return err
		}
		if cfg, err = o.config(trainSet, testSet); err != nil {
			return err
		}
		trainN, evalN = trainSet.N, testSet.N
		dataBytes = mem.Align(trainSet.Bytes()) + mem.Align(testSet.Bytes())
	}
	if *ranks > 1 {
		cfg.Comm, cfg.ShardOptimizer, cfg.BucketBytes = planRanks(*ranks), *shard, bucketBytes
	}
	plan, totals, err := train.PlanFor(cfg, trainN, evalN)
	if err != nil {
		return err
	}
	totals[mem.Input] += dataBytes
	// param_count: trainable parameters, as the peers count them (PyTorch's
	// parameters(): BatchNormalization's moving statistics are not); a
	// Keras file's count stays Keras' total (its "Total params")
	total, trainable, err := nn.Params(cfg.Model)
	if err != nil {
		return err
	}
	params := trainable
	if o.keras != "" {
		params = total
	}
	r := planReport{Model: o.model, Dataset: o.dataset, Batch: o.batch, ParamCount: params,
		ParamsBytes: totals[mem.Param], GradsBytes: totals[mem.Grad], OptStateBytes: totals[mem.OptState],
		ActivationsBytes: totals[mem.Activation], WorkspaceBytes: totals[mem.Workspace], InputBytes: totals[mem.Input],
		ArenaBytes: plan.ArenaBytes, LowerBoundBytes: plan.LowerBound, Layers: perLayer(plan)}
	for _, b := range totals {
		r.PeakBytes += b
	}
	if trainN > 0 && o.batch > trainN {
		r.StepBatch = trainN // as in Keras, one partial batch holds the whole set
	}
	if o.keras != "" {
		if err := o.addKeras(&r); err != nil {
			return err
		}
	}
	if budget, source := o.effectiveBudget(); budget > 0 {
		r.PlanBudgetBytes, r.BudgetSource = budget, source
	}
	if o.budgetBytes > 0 {
		r.BudgetBytes = o.budgetBytes
		limit := trainN
		if o.keras != "" {
			limit = 1 << 16
		}
		fit, err := train.MaxBatch(cfg, trainN, evalN, dataBytes, r.PlanBudgetBytes, limit)
		if err != nil {
			return err
		}
		r.MaxBatchForBudget = &fit
	}
	if o.profileDir != "" {
		if err := profile.WriteAll(o.profileDir, plan, nil, o.model); err != nil {
			return err
		}
	}
	if cfg.Precision == "mixed_bfloat16" || cfg.Precision == "mixed_float16" {
		if _, r.PrecisionNote, err = train.StorageFor(cfg, trainN, evalN); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printReport(stdout, &r)
	return nil
}

// perLayer sums the plan's buffers by the layer that owns them: variables
// by their name's first part, arena buffers (activations, gradients,
// temporaries) by the first part of their owner.
func perLayer(p *compile.Plan) []layerBytes {
	by := map[string]*layerBytes{}
	get := func(name string) *layerBytes {
		name = strings.TrimPrefix(name, "grad/")
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name = name[:i]
		}
		if by[name] == nil {
			by[name] = &layerBytes{Layer: name}
		}
		return by[name]
	}
	for _, b := range p.Buffers {
		switch {
		case b.Kind == compile.KindVariable && b.Category == mem.Param:
			get(b.Name).Params += b.Bytes
		case b.Kind == compile.KindVariable && b.Category == mem.OptState:
			get(b.Name).OptState += b.Bytes
		case b.Kind == compile.KindArena && b.Category == mem.Activation:
			get(b.Owner).Activation += b.Bytes
		default:
			get(b.Owner).Other += b.Bytes
		}
	}
	out := make([]layerBytes, 0, len(by))
	for _, l := range by {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Layer < out[j].Layer })
	return out
}

func printReport(w io.Writer, r *planReport) {
	fb := mem.FormatBytes
	fmt.Fprintf(w, "plan for model %s on %s, batch %d: %d parameters\n", r.Model, r.Dataset, r.Batch, r.ParamCount)
	if r.StepBatch > 0 {
		fmt.Fprintf(w, "  (the training set has %d examples: a step holds all of them)\n", r.StepBatch)
	}
	fmt.Fprintf(w, "  params      %12d B  %s\n", r.ParamsBytes, fb(r.ParamsBytes))
	fmt.Fprintf(w, "  grads       %12d B  %s\n", r.GradsBytes, fb(r.GradsBytes))
	fmt.Fprintf(w, "  optstate    %12d B  %s\n", r.OptStateBytes, fb(r.OptStateBytes))
	fmt.Fprintf(w, "  activations %12d B  %s\n", r.ActivationsBytes, fb(r.ActivationsBytes))
	fmt.Fprintf(w, "  workspace   %12d B  %s\n", r.WorkspaceBytes, fb(r.WorkspaceBytes))
	fmt.Fprintf(w, "  input       %12d B  %s (batches and the data set)\n", r.InputBytes, fb(r.InputBytes))
	fmt.Fprintf(w, "  peak        %12d B  %s (arena %s, lower bound %s)\n", r.PeakBytes, fb(r.PeakBytes), fb(r.ArenaBytes), fb(r.LowerBoundBytes))
	if r.PrecisionNote != "" {
		fmt.Fprintf(w, "  precision %s\n", r.PrecisionNote)
	}
	fmt.Fprintf(w, "per layer (activation and other: arena buffers the layer owns, which share memory over time):\n")
	fmt.Fprintf(w, "  %-24s %12s %12s %12s %12s\n", "layer", "params", "optstate", "activation", "other")
	for _, l := range r.Layers {
		fmt.Fprintf(w, "  %-24s %12d %12d %12d %12d\n", l.Layer, l.Params, l.OptState, l.Activation, l.Other)
	}
	if r.PlanBudgetBytes > 0 {
		fmt.Fprintf(w, "budget for the plan %s (%s)", fb(r.PlanBudgetBytes), r.BudgetSource)
		if r.PlanBudgetBytes < r.PeakBytes {
			fmt.Fprintf(w, ": this plan does not fit")
		}
		fmt.Fprintln(w)
	}
	if r.MaxBatchForBudget != nil {
		if *r.MaxBatchForBudget > 0 {
			fmt.Fprintf(w, "budget %s: the largest batch that fits is %d\n", fb(r.BudgetBytes), *r.MaxBatchForBudget)
		} else {
			fmt.Fprintf(w, "budget %s: no batch size fits\n", fb(r.BudgetBytes))
		}
	}
}

// planRanks stands for the processes of a data-parallel run while it is
// only planned: rank 0 of size; nothing is exchanged.
type planRanks int

func (r planRanks) Rank() int { return 0 }
func (r planRanks) Size() int { return int(r) }

var errPlanOnly = fmt.Errorf("headroom plan: the processes of a planned run exchange nothing")

func (planRanks) AllReduceSum([]byte, tensor.DType) error            { return errPlanOnly }
func (planRanks) ReduceScatterSum(_, _ []byte, _ tensor.DType) error { return errPlanOnly }
func (planRanks) AllGather(_, _ []byte) error                        { return errPlanOnly }
func (planRanks) Broadcast([]byte, int) error                        { return errPlanOnly }
func (planRanks) Start([]byte, tensor.DType) (interface{ Wait() error }, error) {
	return nil, errPlanOnly
}
