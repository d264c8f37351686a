package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// inferFlags are what predict and evaluate share.
type inferFlags struct {
	load              string
	kerasConfig       string // the architecture of a weights-only Keras --load
	batch, micro      int
	threads           int
	budget            string
	budgetBytes       int64 // --budget: the whole process's
	planBudget        int64 // what the plan may reserve of it (or of the process's limit)
	pipelineBudget    string
	pipelineBudgetVal int64
	df                dataFlags
	dev               deviceFlags
}

func (f *inferFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.load, "load", "", "the model file: written by headroom train --save, or a Keras .keras or .h5 file")
	fs.StringVar(&f.kerasConfig, "keras-config", "", "with --load WEIGHTS.h5: the Keras model's architecture (model.to_json(), or a .keras archive's config.json)")
	fs.IntVar(&f.batch, "batch", 128, "examples read at once (Keras' batch_size)")
	fs.IntVar(&f.micro, "micro-batch", 32, "examples one run of the inference step computes: a batch runs as several (same outputs, a fraction of the memory); 0: the whole batch")
	fs.IntVar(&f.threads, "threads", defaultThreads(), "threads for kernels")
	fs.StringVar(&f.budget, "budget", "", "the process's memory budget, e.g. 128MiB (default: the limit it lives under): fail before the first batch if the plan does not fit")
	fs.StringVar(&f.pipelineBudget, "pipeline-budget", "", "most memory the input pipeline may hold (default: 6 batches of examples, at least 8MiB)")
	f.df.register(fs, false)
	f.dev.register(fs, false)
}

// parse parses args and checks the flags.
func (f *inferFlags) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return &usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if f.load == "" || f.df.path == "" {
		return usagef("--load (a model file) and --data are required")
	}
	if f.batch <= 0 || f.micro < 0 || f.threads <= 0 {
		return usagef("--batch and --threads must be positive, --micro-batch >= 0")
	}
	if err := f.dev.check(); err != nil {
		return err
	}
	var err error
	if f.budget != "" {
		if f.budgetBytes, err = mem.ParseBytes(f.budget); err != nil || f.budgetBytes <= 0 {
			return usagef("--budget %q: want a size such as 64MiB", f.budget)
		}
	}
	pb, err := train.NewProcessBudget(f.budgetBytes, "--budget "+f.budget)
	switch {
	case err == nil:
		f.planBudget = pb.Plan
	case f.budgetBytes > 0:
		return &usageError{err}
	}
	if f.pipelineBudget != "" {
		if f.pipelineBudgetVal, err = mem.ParseBytes(f.pipelineBudget); err != nil || f.pipelineBudgetVal <= 0 {
			return usagef("--pipeline-budget %q: want a size such as 16MiB", f.pipelineBudget)
		}
	}
	setThreads(f.threads)
	return nil
}

// source returns --data read as the model's training data was: its
// columns, label, classes, image size, color and scale, unless a flag
// says otherwise; the format is --data's own.
func (f *inferFlags) source(fs *flag.FlagSet, mf *train.ModelFile, unlabeled bool) (*data.Source, error) {
	pre := mf.Preprocessing
	pre.Format, pre.Shape = f.df.format, nil
	set := explicit(fs)
	if set["label"] {
		pre.Label = f.df.label
	}
	if set["features"] {
		pre.Features = f.df.features
	}
	if !set["color"] {
		f.df.color = ""
	}
	if err := f.df.applyTo(&pre); err != nil {
		return nil, err
	}
	if sh := mf.Preprocessing.Shape; pre.ImageSize == [2]int{} && sh.Rank() == 3 && !set["image-size"] {
		pre.ImageSize = [2]int{sh[0], sh[1]} // new images are resized to the training images' size
	}
	if pre.Scale == 0 { // a model trained on uint8 data of another format keeps its scale
		pre.Scale = mf.Preprocessing.ScaleOrDefault()
	}
	return &data.Source{Path: f.df.path, Labels: f.df.labels, Unlabeled: unlabeled, Preprocessing: pre}, nil
}

// open opens the source and the predictor, and prints the plan: the
// step's and the input pipeline's reservation, under the plan's budget.
func (f *inferFlags) open(w io.Writer, command string, src *data.Source, mf *train.ModelFile, evaluate bool) (*train.Predictor, data.Dataset[data.Batch], error) {
	var none data.Dataset[data.Batch]
	ds, err := src.Open()
	if errors.Is(err, data.ErrTextFormat) {
		return nil, none, fmt.Errorf("--data %s is text, which the model's input does not take", f.df.path)
	}
	if err != nil {
		return nil, none, err
	}
	cfg := train.PredictConfig{Model: mf.Model, Weights: mf.Weight, Batch: f.batch, MicroBatch: f.micro,
		Evaluate: evaluate, Loss: mf.Loss, Scale: src.ScaleOrDefault(), Threads: f.threads, Budget: f.planBudget, InputBudget: f.pipelineBudgetVal}
	if b, budget, _, err := f.dev.backend(false); err != nil {
		return nil, none, err
	} else if b != nil { // a GPU: the plan's budget is the device's
		cfg.Backend, cfg.Budget, f.planBudget = b, budget, budget
	}
	p, err := train.NewPredictor(cfg)
	if err != nil {
		return nil, none, err
	}
	mf.Weights = nil // copied into the engine: the file's copy on the Go heap can go
	runs := (f.batch + p.MicroBatch() - 1) / p.MicroBatch()
	fmt.Fprintf(w, "headroom: %s with %s (%d classes) on %s (%s), batch %d", command, f.load, max(len(mf.Preprocessing.ClassNames), mf.Preprocessing.Classes), f.df.path, src.Format, f.batch)
	if runs > 1 {
		fmt.Fprintf(w, " as %d runs of %d", runs, p.MicroBatch())
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "memory plan (known before the first batch): %s in total, the input pipeline's %s included\n", mem.FormatBytes(p.Planned), mem.FormatBytes(p.PipelineBytes()))
	step := "inference step"
	if evaluate {
		step = "evaluation step"
	}
	fmt.Fprintf(w, "  %s: %s\n", step, p.Describe())
	if f.planBudget > 0 {
		fmt.Fprintf(w, "  budget %s for the plan: %s to spare\n", mem.FormatBytes(f.planBudget), mem.FormatBytes(f.planBudget-p.Planned))
	}
	return p, data.Batches(ds, f.batch, false).Prefetch(2), nil
}

func runPredict(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("predict", stdout)
	var f inferFlags
	f.register(fs)
	out := fs.String("out", "", "write the outputs here: .npy (float32 [N, ...]) or .csv (a header of class names, or out_0, out_1, ...)")
	quiet := fs.Bool("quiet", false, "print only the RESULT line")
	if err := f.parse(fs, args); err != nil {
		return err
	}
	defer f.dev.close()
	if err := checkOut(*out, f.df.path, f.load); err != nil {
		return err
	}
	w := stdout
	if *quiet {
		w = io.Discard
	}
	mf, err := loadModelFile(f.load, f.kerasConfig)
	if err != nil {
		return err
	}
	src, err := f.source(fs, mf, true)
	if err != nil {
		return err
	}
	p, ds, err := f.open(w, "predict", src, mf, false)
	if err != nil {
		return err
	}
	defer p.Close()
	var files []string
	if src.Format == "images" {
		files, _, _, _ = data.ImageFiles(src.Path, true)
	}
	sink, err := newOutputSink(*out, mf.Preprocessing.ClassNames, files)
	if err != nil {
		return err
	}
	start := time.Now()
	n := 0
	err = p.Predict(context.Background(), ds, func(o tensor.Tensor) error {
		n += o.Shape()[0]
		return sink.write(o)
	})
	if err != nil {
		sink.abort()
		return err
	}
	if err := sink.close(); err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(w, "headroom: wrote %d outputs of shape %v to %s\n", n, sink.rowShape, *out)
	fmt.Fprintln(stdout, resultLine("engine", "headroom", "command", "predict", "examples", n, "samples_per_sec", fmt.Sprintf("%.1f", float64(n)/secs),
		"planned_peak_bytes", p.Planned, "measured_peak_bytes", p.Engine().Ledger().Peak(), "pipeline_budget_bytes", p.PipelineBytes(),
		"micro_batch", p.MicroBatch(), "threads", f.threads))
	return nil
}

func runEvaluate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("evaluate", stdout)
	var f inferFlags
	f.register(fs)
	quiet := fs.Bool("quiet", false, "print only the RESULT line")
	if err := f.parse(fs, args); err != nil {
		return err
	}
	defer f.dev.close()
	w := stdout
	if *quiet {
		w = io.Discard
	}
	mf, err := loadModelFile(f.load, f.kerasConfig)
	if err != nil {
		return err
	}
	src, err := f.source(fs, mf, false)
	if err != nil {
		return err
	}
	p, ds, err := f.open(w, "evaluate", src, mf, true)
	if err != nil {
		return err
	}
	defer p.Close()
	start := time.Now()
	loss, acc, n, err := p.Evaluate(context.Background(), ds, max(src.Classes, len(src.ClassNames)))
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	line := fmt.Sprintf("headroom: %d examples: loss %.4f", n, loss)
	if !math.IsNaN(acc) {
		line += fmt.Sprintf(" accuracy %.4f", acc)
	}
	fmt.Fprintln(w, line)
	fmt.Fprintln(stdout, resultLine("engine", "headroom", "command", "evaluate", "examples", n, "loss", fmt.Sprintf("%.6f", loss),
		"acc", fmt.Sprintf("%.4f", acc), "samples_per_sec", fmt.Sprintf("%.1f", float64(n)/secs),
		"planned_peak_bytes", p.Planned, "measured_peak_bytes", p.Engine().Ledger().Peak(), "pipeline_budget_bytes", p.PipelineBytes(),
		"micro_batch", p.MicroBatch(), "threads", f.threads))
	return nil
}

// same reports whether paths a and b name the same file.
func same(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 == nil && err2 == nil {
		return os.SameFile(sa, sb)
	}
	aa, _ := filepath.Abs(a)
	ab, _ := filepath.Abs(b)
	return aa == ab
}

// checkOut refuses an --out predict cannot write: none, another format,
// or one of its inputs.
func checkOut(out string, inputs ...string) error {
	if out == "" {
		return usagef("--out is required: a .npy or .csv file for the outputs")
	}
	if kind := strings.ToLower(filepath.Ext(out)); kind != ".npy" && kind != ".csv" {
		return usagef("--out %s: want a .npy or .csv file", out)
	}
	for _, in := range inputs {
		if same(out, in) {
			return usagef("--out %s would overwrite an input", out)
		}
	}
	return nil
}
