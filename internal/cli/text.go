package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// Language models on byte-level text: `headroom train|plan --dataset go-src`
// or `--text PATH`, with --model gpt or lstm (peers/seq.py's) and --seq.

// vocab is the vocabulary of byte-level text.
const vocab = 256

// isText reports whether the run trains a language model on text.
func (o *options) isText() bool { return o.dataset == "go-src" || o.text != "" }

// textName names the text data set in reports.
func (o *options) textName() string {
	if o.text != "" {
		return "text"
	}
	return o.dataset
}

// loadText reads the text: go-src (the Go toolchain's own sources), or the
// file or folder --text, split 90% / 10% as go-src is.
func (o *options) loadText() (*train.Text, error) {
	if o.text != "" {
		b, err := data.ReadText(o.text, data.TextOptions{Separator: true})
		if err != nil {
			return nil, err
		}
		cut := len(b) * 9 / 10
		return &train.Text{Name: "text:" + o.text, Train: b[:cut:cut], Val: b[cut:], T: o.seq, ValWindows: datasets.GoSrcValWindows}, nil
	}
	c, err := datasets.GoSrc()
	if err != nil {
		return nil, err
	}
	return &train.Text{Name: c.Name, Train: c.Train, Val: c.Val, T: o.seq, ValWindows: datasets.GoSrcValWindows}, nil
}

// textConfig is the run's configuration for a language model: Adam (or
// --optimizer) at --lr, gradients clipped to global norm 1.0, as
// peers/seq.py trains.
func (o *options) textConfig() (train.Config, error) {
	m, err := nn.NewModel(o.model, tensor.Shape{o.seq}, vocab)
	if err != nil {
		return train.Config{}, err
	}
	if len(m.Inputs()) != 1 || m.Inputs()[0].Type() != tensor.Int32 {
		return train.Config{}, fmt.Errorf("--model %s is not a language model (gpt, lstm)", o.model)
	}
	opt, err := optim.ByName(o.optimizer)
	if err != nil {
		return train.Config{}, err
	}
	return train.Config{Model: m, Optimizer: opt, Schedule: optim.Constant(o.lr), ClipNorm: 1, Epochs: o.epochs, Batch: o.batch,
		Seed: o.seed, Budget: o.budgetBytes, Precision: o.precision, Accumulate: o.accumulate, Remat: o.remat, Threads: o.threads}, nil
}

// textFlags are train's flags a text run reads.
type textFlags struct {
	ckpt                string
	every               int64
	resume, quiet       bool
	strict              bool
	maxSteps            int64
	save, csv, cpuProf  string
	fitBudget, allowLow bool
}

// runTrainText trains a language model on text and prints its RESULT line,
// which adds param_count, tokens_per_sec, val_loss and val_bpb (nats and
// bits per byte over the validation windows) to train's.
func runTrainText(o *options, f textFlags, stdout io.Writer) error {
	txt, err := o.loadText()
	if err != nil {
		return err
	}
	cfg, err := o.textConfig()
	if err != nil {
		return err
	}
	cfg.CheckpointDir, cfg.Resume, cfg.StrictMemory, cfg.MaxSteps, cfg.CheckpointEvery = f.ckpt, f.resume, f.strict, f.maxSteps, f.every
	out := stdout
	if f.quiet {
		out = io.Discard
	}
	if f.csv != "" {
		cfg.Callbacks = append(cfg.Callbacks, &train.CSVLogger{Path: f.csv})
	}
	if f.fitBudget {
		if o.budgetBytes <= 0 {
			return fmt.Errorf("--fit-to-budget needs --budget")
		}
		chosen, cands, err := train.FitToBudgetText(cfg, txt, o.budgetBytes, f.allowLow)
		if len(cands) > 0 {
			fmt.Fprint(out, train.Describe(cands))
		}
		if err != nil {
			return err
		}
		cfg = chosen
	}
	p := &progress{w: out, tty: isTerminal(stdout) && !f.quiet, epochs: cfg.Epochs}
	cfg.Callbacks = append(cfg.Callbacks, p)
	cfg.Log = func(msg string) { fmt.Fprintf(out, "headroom: %s\n", msg) }
	stop := onSignals()
	defer stop.release()
	cfg.Interrupt = stop.fired

	t, err := train.NewText(cfg, txt)
	if err != nil {
		return err
	}
	defer t.Close()
	params, _, err := nn.Params(cfg.Model)
	if err != nil {
		return err
	}
	steps := txt.StepsPerEpoch(cfg.Batch)
	fmt.Fprintf(out, "headroom: model %s (%d parameters) on %s (%d training, %d validation bytes), batch %d windows of %d bytes, %d epochs of %d steps\n",
		o.model, params, txt.Name, len(txt.Train), len(txt.Val), cfg.Batch, txt.T, cfg.Epochs, steps)
	printTrainerPlan(out, o, t)
	if f.cpuProf != "" {
		pf, err := os.Create(f.cpuProf)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	h, err := t.FitText()
	p.finish()
	if err != nil {
		return stopped(out, h, err)
	}
	if f.save != "" {
		if err := t.SaveText(f.save, o.model, vocab); err != nil {
			return err
		}
		fmt.Fprintf(out, "headroom: saved the model to %s (headroom generate --load %s)\n", f.save, f.save)
	}
	for _, l := range h.Leaks {
		fmt.Fprintf(out, "warning: %v\n", l)
	}
	for _, e := range h.Events {
		fmt.Fprintf(out, "headroom: %v\n", e)
	}
	saved := int64(0)
	if cfg.Remat {
		plain := cfg
		plain.Remat = false
		pp, _, err := train.PlanForText(plain, txt)
		if err != nil {
			return err
		}
		saved = pp.Totals[mem.Activation] - t.Plan.Totals[mem.Activation]
	}
	fmt.Fprintf(stdout, "RESULT engine=headroom model=%s data=%s threads=%d batch=%d seq=%d param_count=%d samples_per_sec=%.1f tokens_per_sec=%.0f steps=%d first_loss=%.4f final_loss=%.6f val_loss=%.4f val_bpb=%.4f train_s=%.2f test_acc=NaN planned_peak_bytes=%d measured_peak_bytes=%d ledger_growth_bytes=%d peak_rss_mib=%.1f precision=%s micro_batch=%d accumulate=%d remat=%v remat_bytes_saved=%d skipped_steps=%d optstate_bytes=%d\n",
		o.model, o.textName(), o.threads, cfg.Batch, txt.T, params, h.SamplesPerSec, h.SamplesPerSec*float64(txt.T), h.Steps,
		h.FirstLoss, h.LastLoss, h.ValLoss, h.ValLoss/math.Ln2, h.TrainSeconds, t.Planned, h.MeasuredPeak, h.LedgerGrowth,
		peakRSSMiB(), precisionName(cfg.Precision), cfg.Batch/max(1, cfg.Accumulate), max(1, cfg.Accumulate), cfg.Remat, saved,
		h.SkippedSteps, t.Engine().Ledger().LiveBy(mem.OptState))
	return nil
}

// stopped reports an interrupted run (its checkpoint) or returns err.
func stopped(out io.Writer, h *train.History, err error) error {
	if in, ok := err.(*train.Interrupted); ok {
		fmt.Fprintf(out, "headroom: %v\n", in)
	}
	return err
}

// printTrainerPlan prints the memory plan of a trainer before step 1.
func printTrainerPlan(w io.Writer, o *options, t *train.Trainer) {
	p := t.Plan
	fmt.Fprintf(w, "memory plan (known before step 1): %s in total\n", mem.FormatBytes(t.Planned))
	fmt.Fprintf(w, "  training step: params %s, grads %s, optimizer state %s, activations %s, workspace %s, inputs %s; arena %s (lower bound %s)\n",
		mem.FormatBytes(p.Totals[mem.Param]), mem.FormatBytes(p.Totals[mem.Grad]), mem.FormatBytes(p.Totals[mem.OptState]),
		mem.FormatBytes(p.Totals[mem.Activation]), mem.FormatBytes(p.Totals[mem.Workspace]), mem.FormatBytes(p.Totals[mem.Input]),
		mem.FormatBytes(p.ArenaBytes), mem.FormatBytes(p.LowerBound))
	if o.budgetBytes > 0 {
		fmt.Fprintf(w, "  budget %s: %s to spare\n", mem.FormatBytes(o.budgetBytes), mem.FormatBytes(o.budgetBytes-t.Planned))
	}
}

// runPlanText prints what training a language model on text would
// reserve, as runPlan does for examples (`headroom plan --dataset go-src
// --seq 2048 --json`).
func runPlanText(o *options, asJSON bool, stdout io.Writer) error {
	txt, err := o.loadText()
	if err != nil {
		return err
	}
	cfg, err := o.textConfig()
	if err != nil {
		return err
	}
	plan, totals, err := train.PlanForText(cfg, txt)
	if err != nil {
		return err
	}
	params, _, err := nn.Params(cfg.Model)
	if err != nil {
		return err
	}
	r := planReport{Model: o.model, Dataset: o.textName(), Batch: o.batch, ParamCount: params,
		ParamsBytes: totals[mem.Param], GradsBytes: totals[mem.Grad], OptStateBytes: totals[mem.OptState],
		ActivationsBytes: totals[mem.Activation], WorkspaceBytes: totals[mem.Workspace], InputBytes: totals[mem.Input],
		ArenaBytes: plan.ArenaBytes, LowerBoundBytes: plan.LowerBound, Layers: perLayer(plan)}
	for _, b := range totals {
		r.PeakBytes += b
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			planReport
			Seq int `json:"seq"`
		}{r, txt.T})
	}
	printReport(stdout, &r)
	fmt.Fprintf(stdout, "windows of %d bytes\n", txt.T)
	return nil
}
