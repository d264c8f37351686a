package cli

import (
	"errors"
	"fmt"
	"github.com/headroom-ml/headroom/data"
	"io"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/dist"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/profile"
	"github.com/headroom-ml/headroom/train"
)

func runTrain(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("train", stdout)
	o.register(fs)
	var df dataFlags
	df.register(fs, true)
	var kf fitFlags
	kf.register(fs)
	ckpt := fs.String("checkpoint-dir", "", "write a checkpoint at each epoch end (and on SIGTERM/SIGINT, and with --checkpoint-every) to this directory")
	every := fs.Int64("checkpoint-every", 0, "also write a checkpoint every this many optimizer steps, at the exact position in the epoch")
	resume := fs.Bool("resume", false, "continue from the newest checkpoint in --checkpoint-dir")
	csvPath := fs.String("csv", "", "append one line per epoch to this CSV file")
	quiet := fs.Bool("quiet", false, "print only the RESULT line")
	maxSteps := fs.Int64("max-steps", 0, "stop after this many optimizer steps (0: run every epoch)")
	savePath := fs.String("save", "", "write the model to this safetensors file: its weights and, in the metadata, its architecture and preprocessing (headroom predict, evaluate and export read it)")
	rankTimeout := fs.Duration("rank-timeout", 60*time.Second, "under mpirun: how long a collective may wait for the other processes before the job fails naming the missing rank")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of training to this file (go tool pprof)")
	strict := fs.Bool("strict-memory", false, "fail when memory grows after the first epoch (default: warn)")
	shard := fs.Bool("shard-optimizer", false, "under mpirun: keep 1/ranks of the optimizer state on each process (ZeRO stage 1)")
	fitBudget := fs.Bool("fit-to-budget", false, "choose micro-batches, recomputation (and, with --allow-precision, 16-bit activations) so the run fits --budget, keeping the effective batch")
	allowPrecision := fs.Bool("allow-precision", false, "let --fit-to-budget choose mixed_bfloat16")
	bucketSize := fs.String("bucket-size", "1MiB", "under mpirun: gradients are all-reduced in buckets of about this size, each started as soon as backward has produced it")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	bucketBytes, err := mem.ParseBytes(*bucketSize)
	if err != nil || bucketBytes <= 0 {
		return fmt.Errorf("--bucket-size %q: want a size such as 1MiB", *bucketSize)
	}
	if *resume && *ckpt == "" {
		return fmt.Errorf("--resume needs --checkpoint-dir")
	}
	if *every < 0 || (*every > 0 && *ckpt == "") {
		return fmt.Errorf("--checkpoint-every %d needs a positive count and --checkpoint-dir", *every)
	}
	if *ckpt != "" { // as Keras' ModelCheckpoint: make it, and fail before step 1 if we cannot
		if err := os.MkdirAll(*ckpt, 0o755); err != nil {
			return fmt.Errorf("--checkpoint-dir: %w", err)
		}
	}
	if o.isText() { // a language model on text (text.go)
		return runTrainText(&o, textFlags{ckpt: *ckpt, every: *every, resume: *resume, quiet: *quiet, strict: *strict, maxSteps: *maxSteps,
			save: *savePath, csv: *csvPath, cpuProf: *cpuProfile, fitBudget: *fitBudget, allowLow: *allowPrecision}, stdout)
	}
	var stream *streamed
	if !df.given() {
		if stream, err = o.planStream(); err != nil {
			return err
		}
	}
	var trainSet, testSet *data.Examples
	var pre data.Preprocessing
	if df.given() { // the user's own data
		if trainSet, testSet, pre, err = loadData(fs, &o, &df); err != nil {
			return err
		}
	} else if err := df.unused(fs); err != nil {
		return err
	} else if stream != nil { // the training set does not fit beside the plan
		trainSet = stream.standIn
		if testSet, err = datasets.FashionMNISTTest(o.dataDir); err != nil {
			return err
		}
	} else if trainSet, testSet, err = o.load(); err != nil {
		return err
	}
	if !df.given() {
		pre = builtinPreprocessing(&o, trainSet)
	}
	cfg, err := o.config(trainSet, testSet)
	if err != nil {
		return err
	}
	if err := kf.apply(&cfg, trainSet, o.lr); err != nil {
		return err
	}
	aug, err := kf.stream(&cfg, trainSet, o.seed)
	if err != nil {
		return err
	}
	if stream != nil {
		// the model scales the raw pixels the stream carries; the test set
		// in memory feeds raw pixels too
		cfg.Model = scaled(cfg.Model, trainSet.Scale)
		testSet.Scale = 1
	}
	cfg.CheckpointDir, cfg.Resume, cfg.StrictMemory, cfg.MaxSteps, cfg.CheckpointEvery = *ckpt, *resume, *strict, *maxSteps, *every
	// Under mpirun (a binary built with -tags mpi) the run is data-parallel;
	// otherwise this is a single process.
	comm, err := dist.Open(dist.Options{Timeout: *rankTimeout})
	if err != nil {
		return err
	}
	defer comm.Close()
	if comm.Size() > 1 {
		cfg.Comm, cfg.ShardOptimizer, cfg.BucketBytes = comm, *shard, bucketBytes
		// MPI's progress thread needs a P of its own beside the kernels'
		// threads: with GOMAXPROCS = --threads a completed collective waits
		// for the scheduler to take the P back from the thread's cgo call,
		// up to milliseconds each time (see dist's package comment)
		goruntime.GOMAXPROCS(o.threads + 1)
		if comm.Rank() != 0 { // one process reports
			stdout, *quiet = io.Discard, true
		}
	}
	var tb *train.TensorBoard
	if o.profileDir != "" {
		tb = &train.TensorBoard{Dir: o.profileDir}
		cfg.Callbacks = append(cfg.Callbacks, tb)
	}
	if *csvPath != "" {
		logger := &train.CSVLogger{Path: *csvPath}
		if err := logger.Check(); err != nil { // before step 1: never write over a user's file
			return fmt.Errorf("--csv: %w", err)
		}
		cfg.Callbacks = append(cfg.Callbacks, logger)
	}
	out := stdout
	if *quiet {
		out = io.Discard
	}
	if *fitBudget {
		if stream != nil {
			return fmt.Errorf("--fit-to-budget with a training set that must be streamed (%s): give a smaller --batch instead", stream.describe())
		}
		budget, _ := o.effectiveBudget()
		if budget <= 0 {
			return fmt.Errorf("--fit-to-budget needs a budget: give --budget (no memory limit is known for this process: %v)", o.processErr)
		}
		chosen, cands, err := train.FitToBudget(cfg, trainSet, budget, *allowPrecision)
		if len(cands) > 0 {
			fmt.Fprint(out, train.Describe(cands))
		}
		if err != nil {
			return err
		}
		cfg = chosen
	}
	p := &progress{w: out, tty: isTerminal(stdout) && !*quiet, epochs: cfg.Epochs, heldOut: o.heldOut()}
	cfg.Callbacks = append(cfg.Callbacks, p)
	cfg.Log = func(msg string) { fmt.Fprintf(out, "headroom: %s\n", msg) }
	// SIGTERM (Slurm, Kubernetes, spot instances) and SIGINT (Ctrl-C) end
	// the step in progress, write a checkpoint and exit 128+signal; a
	// second one is not caught and ends the process at once.
	stop := onSignals()
	defer stop.release()
	cfg.Interrupt = stop.fired

	inMemory := trainSet
	if stream != nil {
		inMemory = nil // planned for a stream: one batch, no data set, the pipeline's budget
		cfg.InputBudget = pipelineBudget
	}
	if df.streamed != nil { // --data streamed from its files
		inMemory = nil
		if cfg.InputBudget, err = df.pipelineBytes(); err != nil {
			return err
		}
	}
	t, err := train.New(cfg, inMemory)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := o.kerasStart(out, t); err != nil {
		return err
	}
	printPlan(out, &o, t, trainSet, testSet)
	if stream != nil {
		fmt.Fprintf(out, "  %s\n", stream.describe())
	}
	if o.processErr == nil {
		var onHeap int64 // the data sets, read into Go slices
		for _, d := range []*data.Examples{inMemory, testSet} {
			if d != nil {
				onHeap += mem.Align(d.Bytes())
			}
		}
		if bound := o.process.boundRuntime(t.Planned, onHeap); bound > 0 {
			fmt.Fprintf(out, "  the Go runtime's own memory (its heap, with the data sets in it) is bounded at %s (debug.SetMemoryLimit)\n", mem.FormatBytes(bound))
		}
	}
	if *cpuProfile != "" {
		// written beside the target and renamed over it at the end, as every
		// file headroom writes: an existing file is never left half-written
		f, err := os.CreateTemp(filepath.Dir(*cpuProfile), "."+filepath.Base(*cpuProfile)+".*")
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			os.Remove(f.Name())
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil || os.Rename(f.Name(), *cpuProfile) != nil {
				os.Remove(f.Name())
				fmt.Fprintf(stderr, "headroom: writing the CPU profile %s failed\n", *cpuProfile)
			}
		}()
	}
	var h *train.History
	if stream != nil {
		h, err = stream.fit(t)
	} else {
		h, err = fitData(out, t, trainSet, aug, &df, cfg.Batch, cfg.InputBudget)
	}
	p.finish()
	if tb != nil {
		if cerr := tb.Close(); err == nil {
			err = cerr
		}
	}
	var in *train.Interrupted
	if errors.As(err, &in) {
		sig := stop.signal()
		msg := fmt.Sprintf("stopped by %s after step %d (epoch %d, batch %d)", signalName(sig), in.Step, in.Epoch, in.Batch)
		if in.Checkpoint != "" {
			msg += fmt.Sprintf("; checkpoint written to %s: resume with --resume --checkpoint-dir %s", in.Checkpoint, *ckpt)
		} else {
			msg += "; no --checkpoint-dir was given, so nothing was saved"
		}
		return &exitError{status: 128 + signalNumber(sig), msg: msg}
	}
	if err != nil {
		return err
	}
	if h.Done {
		fmt.Fprintf(stdout, "headroom: nothing to do: %s is at the end of the run (%d epochs", h.ResumedFrom, cfg.Epochs)
		if cfg.MaxSteps > 0 {
			fmt.Fprintf(stdout, ", --max-steps %d", cfg.MaxSteps)
		}
		fmt.Fprintln(stdout, ")")
		return nil
	}
	if *savePath != "" { // every process takes part; rank 0 writes
		if err := t.SaveModel(*savePath, pre, o.registered(cfg, trainSet)); err != nil {
			return err
		}
	}
	if o.profileDir != "" {
		if err := profile.WriteAll(o.profileDir, t.Plan, profileRun(h), o.model); err != nil {
			return err
		}
		fmt.Fprintf(out, "headroom: profile written to %s (go tool pprof -top %s/profile.pb.gz; open report.html; trace.json in Perfetto; tensorboard --logdir %s)\n", o.profileDir, o.profileDir, o.profileDir)
	}
	for _, l := range h.Leaks {
		fmt.Fprintf(out, "warning: %v\n", l)
	}
	acc, valLoss := math.NaN(), math.NaN()
	if n := len(h.Epochs); n > 0 {
		acc, valLoss = h.Epochs[n-1].ValAccuracy, h.Epochs[n-1].ValLoss
	}
	for _, e := range h.Events {
		fmt.Fprintf(out, "headroom: %v\n", e)
	}
	if len(h.Growth) > 0 {
		fmt.Fprintf(out, "warning: the ledger grew by %d B after the first epoch; largest growth: %s (%s) +%d B\n",
			h.LedgerGrowth, h.Growth[0].Owner, h.Growth[0].Category, h.Growth[0].Bytes)
	}
	saved, err := rematSaved(cfg, trainSet, testSet, t)
	if err != nil {
		return err
	}
	_, paramCount, err := nn.Params(cfg.Model) // trainable, as the peers count
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "RESULT engine=headroom model=%s data=%s threads=%d param_count=%d batch=%d samples_per_sec=%.1f steps=%d first_loss=%.4f final_loss=%.6f train_s=%.2f test_acc=%.4f planned_peak_bytes=%d measured_peak_bytes=%d ledger_growth_bytes=%d peak_rss_mib=%.1f precision=%s micro_batch=%d accumulate=%d remat_bytes_saved=%d skipped_steps=%d ranks=%d optstate_bytes=%d allreduce_s=%.3f allreduce_wait_s=%.3f val_loss=%.6f val_acc=%.4f\n",
		o.model, o.dataset, o.threads, paramCount, o.batch, h.SamplesPerSec, h.Steps, h.FirstLoss, h.LastLoss, h.TrainSeconds, acc,
		t.Planned, h.MeasuredPeak, h.LedgerGrowth, peakRSSMiB(), precisionName(cfg.Precision), cfg.Batch/max(1, cfg.Accumulate)/comm.Size(), max(1, cfg.Accumulate), saved, h.SkippedSteps, comm.Size(), t.Engine().Ledger().LiveBy(mem.OptState), h.AllReduceSeconds, h.AllReduceWaitSeconds, valLoss, acc)
	return nil
}

func precisionName(p string) string {
	if p == "" {
		return "float32"
	}
	return p
}

// rematSaved returns the activation bytes rematerialization saves: the
// plan's activations without remat minus with it (0 without --remat).
func rematSaved(cfg train.Config, trainSet, testSet *data.Examples, t *train.Trainer) (int64, error) {
	if !cfg.Remat {
		return 0, nil
	}
	evalN := 0
	if testSet != nil {
		evalN = testSet.N
	}
	cfg.Remat = false
	plain, _, err := train.PlanFor(cfg, trainSet.N, evalN)
	if err != nil {
		return 0, err
	}
	return plain.Totals[mem.Activation] - t.Plan.Totals[mem.Activation], nil
}

// printPlan prints the memory plan summary before the first step.
func printPlan(w io.Writer, o *options, t *train.Trainer, trainSet, testSet *data.Examples) {
	p := t.Plan
	n := 0
	if testSet != nil {
		n = testSet.N
	}
	fmt.Fprintf(w, "headroom: model %s on %s (%d train, %d %s examples), batch %d, %d epochs\n",
		o.model, o.dataset, trainSet.N, n, o.heldOut(), o.batch, o.epochs)
	fmt.Fprintf(w, "memory plan (known before step 1): %s in total\n", mem.FormatBytes(t.Planned))
	fmt.Fprintf(w, "  training step: params %s, grads %s, optimizer state %s, activations %s, workspace %s, inputs %s; arena %s (lower bound %s)\n",
		mem.FormatBytes(p.Totals[mem.Param]), mem.FormatBytes(p.Totals[mem.Grad]), mem.FormatBytes(p.Totals[mem.OptState]),
		mem.FormatBytes(p.Totals[mem.Activation]), mem.FormatBytes(p.Totals[mem.Workspace]), mem.FormatBytes(p.Totals[mem.Input]),
		mem.FormatBytes(p.ArenaBytes), mem.FormatBytes(p.LowerBound))
	if budget, source := o.effectiveBudget(); budget > 0 {
		fmt.Fprintf(w, "  budget %s (%s): %s to spare\n", mem.FormatBytes(budget), source, mem.FormatBytes(budget-t.Planned))
	}
	if _, note := t.Storage(); note != "" {
		fmt.Fprintf(w, "  precision %s\n", note)
	}
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
		line += fmt.Sprintf(" %s_loss %.4f %s_accuracy %.4f", prefix, l.ValLoss, prefix, l.ValAccuracy)
	}
	fmt.Fprintf(p.w, "%s (%.1fs)\n", line, l.Seconds)
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
