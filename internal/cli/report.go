package cli

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/schollz/progressbar/v3"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/profile"
	"github.com/headroom-ml/headroom/train"
)

// printPlan prints the run and its memory plan before the first step.
func (r *trainRun) printPlan(t *train.Trainer) {
	w, o, cfg := r.out, &r.o, &r.cfg
	if o.isText() {
		params, _, _ := nn.Params(cfg.Model)
		fmt.Fprintf(w, "headroom: model %s (%d parameters) on %s, batch %d windows of %d bytes, %d epochs of %d steps\n",
			o.modelName(), params, o.dataName(&r.df), cfg.Batch, o.seq, cfg.Epochs, r.data.StepsPerEpoch(cfg.Batch))
	} else {
		fmt.Fprintf(w, "headroom: model %s on %s (%d train, %d %s examples), batch %d, %d epochs\n",
			o.modelName(), o.dataName(&r.df), r.info.Train.N, r.info.HeldOut, o.heldOut(), cfg.Batch, cfg.Epochs)
	}
	p := t.Plan
	fmt.Fprintf(w, "memory plan (known before step 1): %s in total\n", mem.FormatBytes(t.Planned))
	fmt.Fprintf(w, "  training step: params %s, grads %s, optimizer state %s, activations %s, workspace %s, inputs %s; arena %s (lower bound %s)\n",
		mem.FormatBytes(p.Totals[mem.Param]), mem.FormatBytes(p.Totals[mem.Grad]), mem.FormatBytes(p.Totals[mem.OptState]),
		mem.FormatBytes(p.Totals[mem.Activation]), mem.FormatBytes(p.Totals[mem.Workspace]), mem.FormatBytes(p.Totals[mem.Input]),
		mem.FormatBytes(p.ArenaBytes), mem.FormatBytes(p.LowerBound))
	if pl := t.Pipeline(); pl != nil {
		fmt.Fprintf(w, "  input pipeline: %s reserved for its buffers", mem.FormatBytes(pl.Budget()))
		if streamed, from := r.data.Streamed(); streamed {
			fmt.Fprintf(w, "; the training set is streamed from %s each epoch (in memory it would take more than half the budget, or --stream asked)", from)
		}
		fmt.Fprintln(w)
	}
	if budget, source := o.planBudget(); budget > 0 {
		fmt.Fprintf(w, "  budget %s (%s): %s to spare\n", mem.FormatBytes(budget), source, mem.FormatBytes(budget-t.Planned))
	}
	if c, err := cpu.ChoicesFromEnv(); err == nil && c.Mode() == "measure" {
		spent, timed := c.Spent()
		from := c.File()
		if from == "" {
			from = "memory (no choices file)"
		}
		fmt.Fprintf(w, "  kernels chosen by measurement (HEADROOM_KERNELS=rule times nothing): %d shapes timed in %.2f s, %d read from %s",
			timed, spent.Seconds(), c.Read(), from)
		if d := c.Deferred(); d > 0 {
			fmt.Fprintf(w, "; %d left to the rule for a later run (the %v budget was spent)", d, cpu.MeasureBudget)
		}
		fmt.Fprintln(w)
	}
	if r.live != nil {
		fmt.Fprintf(w, "  the budget follows the container's limit while training (read every %v: %s); a neighbour's growth or a lowered limit re-plans the step\n", train.DefaultLiveEvery, r.live.Describe())
	}
	if _, note := t.Storage(); note != "" {
		fmt.Fprintf(w, "  precision %s\n", note)
	}
	r.boundRuntime(t)
}

// result returns the RESULT line, in the peers' format: one line for
// every model, data set and data path; a language model's adds seq,
// tokens_per_sec and val_bpb.
func (r *trainRun) result(t *train.Trainer, h *train.History) (string, error) {
	o, cfg := &r.o, &r.cfg
	saved, err := r.rematSaved(t)
	if err != nil {
		return "", err
	}
	_, paramCount, err := nn.Params(cfg.Model) // trainable, as the peers count
	if err != nil {
		return "", err
	}
	acc, valLoss := math.NaN(), h.ValLoss
	if n := len(h.Epochs); n > 0 && !o.isText() {
		acc, valLoss = h.Epochs[n-1].ValAccuracy, h.Epochs[n-1].ValLoss
	}
	ranks := 1
	if r.comm != nil {
		ranks = r.comm.Size()
	}
	f := []any{"engine", "headroom", "model", o.modelName(), "data", o.dataName(&r.df), "threads", o.threads,
		"param_count", paramCount, "batch", cfg.Batch}
	if o.isText() {
		tokens := h.SamplesPerSec * float64(o.seq) // windows of seq tokens
		if h.TokensPerSec > 0 {                    // lines of buckets: the tokens kept
			tokens = h.TokensPerSec
		}
		f = append(f, "seq", o.seq, "tokens_per_sec", fmt.Sprintf("%.0f", tokens),
			"val_bpb", fmt.Sprintf("%.4f", valLoss/math.Ln2))
	}
	f = append(f, "samples_per_sec", fmt.Sprintf("%.1f", h.SamplesPerSec), "steps", h.Steps,
		"first_loss", fmt.Sprintf("%.4f", h.FirstLoss), "final_loss", fmt.Sprintf("%.6f", h.LastLoss),
		"train_s", fmt.Sprintf("%.2f", h.TrainSeconds), "test_acc", fmt.Sprintf("%.4f", acc),
		"planned_peak_bytes", h.PlannedPeak, "measured_peak_bytes", h.MeasuredPeak, "ledger_growth_bytes", h.LedgerGrowth,
		"peak_rss_mib", fmt.Sprintf("%.1f", peakRSSMiB()), "precision", cfg.Precision,
		"micro_batch", cfg.Batch/max(1, cfg.Accumulate)/ranks, "accumulate", max(1, cfg.Accumulate),
		"remat", cfg.Remat, "remat_bytes_saved", saved, "skipped_steps", h.SkippedSteps, "ranks", ranks,
		"optstate_bytes", t.Engine().Ledger().LiveBy(mem.OptState),
		"allreduce_s", fmt.Sprintf("%.3f", h.AllReduceSeconds), "allreduce_wait_s", fmt.Sprintf("%.3f", h.AllReduceWaitSeconds),
		"val_loss", fmt.Sprintf("%.6f", valLoss), "val_acc", fmt.Sprintf("%.4f", acc))
	per, err := r.perRank(t, h)
	if err != nil {
		return "", err
	}
	f = append(f, kernelFields()...)
	return resultLine(append(f, per...)...), nil
}

// kernelFields are the RESULT line's words on how convolution algorithms
// were picked (backend/cpu's HEADROOM_KERNELS): the mode, the seconds
// spent measuring and the shapes timed.
func kernelFields() []any {
	c, err := cpu.ChoicesFromEnv()
	if err != nil {
		return nil
	}
	spent, timed := c.Spent()
	return []any{"kernels", c.Mode(), "kernel_choice_s", fmt.Sprintf("%.3f", spent.Seconds()), "kernel_shapes_timed", timed,
		"kernel_shapes_deferred", c.Deferred()}
}

// resultLine formats key, value pairs as a RESULT line: "RESULT k=v ...".
// Every command's RESULT line is made here.
func resultLine(kv ...any) string {
	var b strings.Builder
	b.WriteString("RESULT")
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
	}
	return b.String()
}

// rematSaved returns the activation bytes rematerialization saves: the
// plan's activations without remat minus with it (0 without --remat).
func (r *trainRun) rematSaved(t *train.Trainer) (int64, error) {
	if !r.cfg.Remat {
		return 0, nil
	}
	cfg := r.cfg
	cfg.Remat, cfg.Backend, cfg.Callbacks = false, nil, nil
	plain, err := train.PlanFor(cfg, t.Data())
	if err != nil {
		return 0, err
	}
	return plain.Step.Totals[mem.Activation] - t.Plan.Totals[mem.Activation], nil
}

// peakRSSMiB returns the process's peak resident set size: VmHWM of
// /proc/self/status, the high-water mark of this program's own memory.
// getrusage's ru_maxrss is the fallback: Linux carries it across execve, so
// a process started from a larger one reports the parent's peak there.
func peakRSSMiB() float64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
					return float64(kb) / 1024
				}
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return math.NaN()
	}
	return float64(ru.Maxrss) / 1024 // Linux reports KiB
}

// progress shows a bar per epoch on a terminal and a line per epoch
// otherwise.
type progress struct {
	w      io.Writer
	tty    bool
	epochs int
	bar    *progressbar.ProgressBar
	// heldOut names the set evaluated at epoch ends: "test", or
	// "validation" (Keras' val_loss and val_accuracy)
	heldOut string
}

func (p *progress) OnBatchEnd(epoch, batch, batches int, loss float64) {
	if !p.tty {
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions(batches, progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(fmt.Sprintf("epoch %d/%d", epoch, p.epochs)),
			progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100e6))
	}
	p.bar.Describe(fmt.Sprintf("epoch %d/%d loss %.4f", epoch, p.epochs, loss))
	p.bar.Set(batch)
}

func (p *progress) OnEpochEnd(t *train.Trainer, l *train.EpochLog) error {
	p.finish()
	line := fmt.Sprintf("epoch %d/%d: loss %.4f", l.Epoch, p.epochs, l.Loss)
	if !math.IsNaN(l.Accuracy) {
		line += fmt.Sprintf(" accuracy %.4f", l.Accuracy)
	}
	if !math.IsNaN(l.ValLoss) {
		prefix := "test"
		if p.heldOut == "validation" {
			prefix = "val"
		}
		line += fmt.Sprintf(" %s_loss %.4f", prefix, l.ValLoss)
		if !math.IsNaN(l.ValAccuracy) {
			line += fmt.Sprintf(" %s_accuracy %.4f", prefix, l.ValAccuracy)
		}
	}
	line += fmt.Sprintf(" (%.1fs)", l.Seconds)
	if l.RSS > 0 {
		line += fmt.Sprintf(" rss %.1f MiB peak %.1f MiB", float64(l.RSS)/(1<<20), float64(l.PeakRSS)/(1<<20))
	}
	fmt.Fprintln(p.w, line)
	return nil
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
}

// profileRun copies what the reports show of a run from its history.
func profileRun(h *train.History) *profile.Run {
	r := &profile.Run{Steps: h.Steps, FirstLoss: h.FirstLoss, LastLoss: h.LastLoss, SamplesPerSec: h.SamplesPerSec,
		TrainSeconds: h.TrainSeconds, MeasuredPeak: h.MeasuredPeak, LedgerGrowth: h.LedgerGrowth, Growth: h.Growth}
	for _, e := range h.Epochs {
		r.Epochs = append(r.Epochs, profile.Epoch{Epoch: e.Epoch, Loss: e.Loss, Accuracy: e.Accuracy, ValLoss: e.ValLoss, ValAccuracy: e.ValAccuracy})
	}
	return r
}
