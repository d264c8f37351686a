package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/headroom-ml/headroom/data"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/profile"
	"github.com/headroom-ml/headroom/train"
)

// planReport is what 'headroom plan --json' prints (bytes, integers).
type planReport struct {
	Model             string         `json:"model"`
	Dataset           string         `json:"dataset"`
	Batch             int            `json:"batch"`
	ParamCount        int            `json:"param_count"`
	ParamsBytes       int64          `json:"params_bytes"`
	GradsBytes        int64          `json:"grads_bytes"`
	OptStateBytes     int64          `json:"optstate_bytes"`
	ActivationsBytes  int64          `json:"activations_bytes"`
	WorkspaceBytes    int64          `json:"workspace_bytes"`
	InputBytes        int64          `json:"input_bytes"`
	ArenaBytes        int64          `json:"arena_bytes"`
	LowerBoundBytes   int64          `json:"arena_lower_bound_bytes"`
	PeakBytes         int64          `json:"peak_bytes"`
	BudgetBytes       int64          `json:"budget_bytes,omitempty"`      // --budget: the whole process's
	PlanBudgetBytes   int64          `json:"plan_budget_bytes,omitempty"` // what the plan may reserve under it (or under the limit the process lives under)
	BudgetSource      string         `json:"budget_source,omitempty"`
	MaxBatchForBudget *int           `json:"max_batch_for_budget,omitempty"`
	StepBatch         int            `json:"step_batch,omitempty"`     // set when --batch exceeds the training set: a step holds all of it
	PrecisionNote     string         `json:"precision_note,omitempty"` // a 16-bit policy that keeps float32's layout, and why
	DataBytes         int64          `json:"data_bytes"`               // the examples held in memory (part of input_bytes)
	PipelineBytes     int64          `json:"pipeline_bytes"`           // the input pipeline's reservation (part of input_bytes)
	Streamed          bool           `json:"streamed"`                 // the training set is read from its files (or generated) each epoch
	Seq               int            `json:"seq,omitempty"`            // a language model's window
	Buckets           []bucketReport `json:"buckets,omitempty"`        // --buckets: each one's peak alone
	LongestSeq        *int           `json:"longest_seq_for_budget,omitempty"`
	Layers            []layerBytes   `json:"layers"`
	// with --keras: the counts and rows of Keras' model.summary(), and the
	// file's optimizer when the plan uses it
	TotalParams        *int         `json:"total_params,omitempty"`
	TrainableParams    *int         `json:"trainable_params,omitempty"`
	NonTrainableParams *int         `json:"non_trainable_params,omitempty"`
	Optimizer          string       `json:"optimizer,omitempty"`
	KerasLayers        []kerasLayer `json:"keras_layers,omitempty"`
	// with --ranks or --zero: one process's share (zero.go)
	Processes *ranksReport `json:"processes,omitempty"`
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
	var f planFlags
	fs := newFlagSet("plan", stdout)
	o.register(fs)
	o.dev.register(fs, true)
	defer o.dev.close()
	f.register(fs)
	if err := o.parse(fs, args, nil); err != nil {
		return err
	}
	o.planOnly = true
	bucketBytes, stage, err := f.check()
	if err != nil {
		return err
	}
	cfg, d, err := o.planData(stdout, f.asJSON)
	if err != nil {
		return err
	}
	cfg.Zero, cfg.BucketBytes = stage, bucketBytes
	if f.ranks > 1 {
		cfg.Comm = train.PlanOnly(f.ranks)
	}
	rp, err := train.PlanFor(cfg, d)
	if err != nil {
		return err
	}
	if err := o.writeKernels(stdout, rp, f.asJSON); err != nil {
		return err
	}
	r, err := o.report(cfg, d, rp)
	if err != nil {
		return err
	}
	if err := r.addRanks(cfg, d, rp, f.ranks); err != nil {
		return err
	}
	if o.profileDir != "" {
		if err := profile.WriteAll(o.profileDir, rp.Step, nil, r.Model); err != nil {
			return err
		}
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printReport(stdout, r)
	printRanks(stdout, r)
	return nil
}

// planData returns the configuration and the data a plan is made for: the
// run's, or, with --keras, the model planned on its own (one step, no data
// set), whose layers are printed first.
func (o *options) planData(w io.Writer, asJSON bool) (train.Config, *train.Data, error) {
	if o.keras == "" {
		d, err := o.runData(nil)
		if err != nil {
			return train.Config{}, nil, err
		}
		info, err := o.describe(d, nil)
		if err != nil {
			return train.Config{}, nil, err
		}
		cfg, err := o.runConfig(info)
		return cfg, d, err
	}
	cfg, err := o.runConfig(data.SetInfo{})
	if err != nil {
		return train.Config{}, nil, err
	}
	d := train.Described(data.SetInfo{Train: &data.Examples{Name: "none", Shape: cfg.Model.Inputs()[0].Shape}})
	return cfg, d, o.printKeras(w, asJSON)
}

// report is the plan as plan prints it.
func (o *options) report(cfg train.Config, d *train.Data, rp *train.RunPlan) (*planReport, error) {
	// param_count: trainable parameters, as the peers count them (PyTorch's
	// parameters(): BatchNormalization's moving statistics are not); a
	// Keras file's count stays Keras' total (its "Total params")
	total, trainable, err := nn.Params(cfg.Model)
	if err != nil {
		return nil, err
	}
	params, dataset := trainable, o.dataName(nil)
	if o.keras != "" {
		params, dataset = total, "none"
	}
	t := rp.Totals
	r := &planReport{Model: o.modelName(), Dataset: dataset, Batch: o.batch, ParamCount: params,
		ParamsBytes: t[mem.Param], GradsBytes: t[mem.Grad], OptStateBytes: t[mem.OptState],
		ActivationsBytes: t[mem.Activation], WorkspaceBytes: t[mem.Workspace], InputBytes: t[mem.Input],
		ArenaBytes: rp.Step.ArenaBytes, LowerBoundBytes: rp.Step.LowerBound, PeakBytes: rp.Peak, Layers: perLayer(rp.Step),
		DataBytes: rp.DataBytes, PipelineBytes: rp.PipelineBytes, Streamed: rp.Streamed, PrecisionNote: rp.StorageNote}
	if o.isText() {
		r.Seq = o.seq
	}
	if err := o.addBuckets(r, cfg, rp); err != nil {
		return nil, err
	}
	if n := d.StepsPerEpoch(1); n > 0 && !o.isText() && o.batch > n {
		r.StepBatch = n // as in Keras, one partial batch holds the whole set
	}
	if o.keras != "" {
		if err := o.addKeras(r); err != nil {
			return nil, err
		}
	}
	budget, source := o.planBudget()
	if budget > 0 {
		r.PlanBudgetBytes, r.BudgetSource = budget, source
	}
	if o.budgetBytes > 0 {
		r.BudgetBytes = o.budgetBytes
		limit := d.StepsPerEpoch(1)
		if limit <= 0 || o.isText() {
			limit = 1 << 16
		}
		fit, err := train.MaxBatch(cfg, d, budget, limit)
		if err != nil {
			return nil, err
		}
		r.MaxBatchForBudget = &fit
	}
	return r, nil
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
	fmt.Fprintf(w, "  input       %12d B  %s (batches, the data held in memory %s, the input pipeline %s)\n", r.InputBytes, fb(r.InputBytes), fb(r.DataBytes), fb(r.PipelineBytes))
	fmt.Fprintf(w, "  peak        %12d B  %s (arena %s, lower bound %s)\n", r.PeakBytes, fb(r.PeakBytes), fb(r.ArenaBytes), fb(r.LowerBoundBytes))
	if r.PrecisionNote != "" {
		fmt.Fprintf(w, "  precision %s\n", r.PrecisionNote)
	}
	if r.Streamed {
		fmt.Fprintf(w, "  the training set is streamed each epoch (it does not fit beside the plan, or --stream asked)\n")
	}
	if r.Seq > 0 {
		fmt.Fprintf(w, "  windows of %d bytes\n", r.Seq)
	}
	printBuckets(w, r)
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
