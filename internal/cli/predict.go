package cli

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
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
	batch, micro      int
	threads           int
	budget            string
	budgetBytes       int64 // --budget: the whole process's
	planBudget        int64 // what the plan may reserve of it (or of the process's limit)
	pipelineBudget    string
	pipelineBudgetVal int64
	df                dataFlags
}

func (f *inferFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.load, "load", "", "the model file (written by headroom train --save)")
	fs.IntVar(&f.batch, "batch", 128, "examples read at once (Keras' batch_size)")
	fs.IntVar(&f.micro, "micro-batch", 32, "examples one run of the inference step computes: a batch runs as several (same outputs, a fraction of the memory); 0: the whole batch")
	fs.IntVar(&f.threads, "threads", defaultThreads(), "threads for kernels")
	fs.StringVar(&f.budget, "budget", "", "the process's memory budget, e.g. 128MiB (default: the limit it lives under): fail before the first batch if the plan does not fit")
	fs.StringVar(&f.pipelineBudget, "pipeline-budget", "", "most memory the input pipeline may hold (default: 16 batches of examples, at least 8MiB)")
	f.df.register(fs, false)
}

// parse parses args and checks the flags.
func (f *inferFlags) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.load == "" || f.df.path == "" {
		return errors.New("--load (a model file) and --data are required")
	}
	if f.batch <= 0 || f.micro < 0 || f.threads <= 0 {
		return errors.New("--batch and --threads must be positive, --micro-batch >= 0")
	}
	var err error
	if f.budget != "" {
		if f.budgetBytes, err = mem.ParseBytes(f.budget); err != nil || f.budgetBytes <= 0 {
			return fmt.Errorf("--budget %q: want a size such as 64MiB", f.budget)
		}
	}
	pb, err := newProcessBudget(f.budgetBytes, f.budget)
	switch {
	case err == nil:
		f.planBudget = pb.plan
	case f.budgetBytes > 0:
		return err
	}
	if f.pipelineBudget != "" {
		if f.pipelineBudgetVal, err = mem.ParseBytes(f.pipelineBudget); err != nil || f.pipelineBudgetVal <= 0 {
			return fmt.Errorf("--pipeline-budget %q: want a size such as 16MiB", f.pipelineBudget)
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

// open opens the source and the predictor, and prints the plan.
func (f *inferFlags) open(w io.Writer, command string, src *data.Source, mf *train.ModelFile, evaluate bool) (*train.Predictor, data.Dataset[data.Batch], data.Config, error) {
	var none data.Dataset[data.Batch]
	ds, err := src.Open()
	if errors.Is(err, data.ErrTextFormat) {
		return nil, none, data.Config{}, fmt.Errorf("--data %s is text, which the model's input does not take", f.df.path)
	}
	if err != nil {
		return nil, none, data.Config{}, err
	}
	in := mf.Model.Inputs()[0]
	dcfg := data.Config{Name: "input pipeline", Budget: f.pipelineBudgetVal}
	if dcfg.Budget == 0 {
		dcfg.Budget = max(8<<20, 16*int64(f.batch)*int64(in.Shape.Size()*4+8))
	}
	budget := f.planBudget // the plan's share: what the pipeline leaves
	if budget > 0 {
		if budget -= dcfg.Budget; budget <= 0 {
			return nil, none, data.Config{}, fmt.Errorf("the budget %s for the plan does not hold the input pipeline's %s", mem.FormatBytes(f.planBudget), mem.FormatBytes(dcfg.Budget))
		}
	}
	p, err := train.NewPredictor(train.PredictConfig{Model: mf.Model, Weights: mf.Weight, Batch: f.batch, MicroBatch: f.micro,
		Evaluate: evaluate, Loss: mf.Loss, Scale: src.ScaleOrDefault(), Threads: f.threads, Budget: budget})
	if err != nil {
		return nil, none, data.Config{}, err
	}
	mf.Weights = nil // copied into the engine: the file's copy on the Go heap can go
	runs := (f.batch + p.MicroBatch() - 1) / p.MicroBatch()
	fmt.Fprintf(w, "headroom: %s with %s (%d classes) on %s (%s), batch %d", command, f.load, max(len(mf.Preprocessing.ClassNames), mf.Preprocessing.Classes), f.df.path, src.Format, f.batch)
	if runs > 1 {
		fmt.Fprintf(w, " as %d runs of %d", runs, p.MicroBatch())
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "memory plan (known before the first batch): %s in total, and the input pipeline's budget %s\n", mem.FormatBytes(p.Planned), mem.FormatBytes(dcfg.Budget))
	step := "inference step"
	if evaluate {
		step = "evaluation step"
	}
	fmt.Fprintf(w, "  %s: %s\n", step, p.Describe())
	if f.planBudget > 0 {
		fmt.Fprintf(w, "  budget %s for the plan: %s to spare\n", mem.FormatBytes(f.planBudget), mem.FormatBytes(f.planBudget-p.Planned-dcfg.Budget))
	}
	return p, data.Batches(ds, f.batch, false).Prefetch(2), dcfg, nil
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
	if *out == "" {
		return errors.New("--out is required: a .npy or .csv file for the outputs")
	}
	kind := strings.ToLower(filepath.Ext(*out))
	if kind != ".npy" && kind != ".csv" {
		return fmt.Errorf("--out %s: want a .npy or .csv file", *out)
	}
	if same(*out, f.df.path) || same(*out, f.load) {
		return fmt.Errorf("--out %s would overwrite an input", *out)
	}
	w := stdout
	if *quiet {
		w = io.Discard
	}
	mf, err := train.LoadModel(f.load)
	if err != nil {
		return err
	}
	src, err := f.source(fs, mf, true)
	if err != nil {
		return err
	}
	p, ds, dcfg, err := f.open(w, "predict", src, mf, false)
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
	err = p.Predict(context.Background(), ds, dcfg, func(o tensor.Tensor) error {
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
	fmt.Fprintf(stdout, "RESULT engine=headroom command=predict examples=%d samples_per_sec=%.1f planned_peak_bytes=%d measured_peak_bytes=%d pipeline_budget_bytes=%d micro_batch=%d threads=%d\n",
		n, float64(n)/secs, p.Planned, p.Engine().Ledger().Peak(), dcfg.Budget, p.MicroBatch(), f.threads)
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
	w := stdout
	if *quiet {
		w = io.Discard
	}
	mf, err := train.LoadModel(f.load)
	if err != nil {
		return err
	}
	src, err := f.source(fs, mf, false)
	if err != nil {
		return err
	}
	p, ds, dcfg, err := f.open(w, "evaluate", src, mf, true)
	if err != nil {
		return err
	}
	defer p.Close()
	start := time.Now()
	loss, acc, n, err := p.Evaluate(context.Background(), ds, dcfg, max(src.Classes, len(src.ClassNames)))
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	line := fmt.Sprintf("headroom: %d examples: loss %.4f", n, loss)
	if !math.IsNaN(acc) {
		line += fmt.Sprintf(" accuracy %.4f", acc)
	}
	fmt.Fprintln(w, line)
	fmt.Fprintf(stdout, "RESULT engine=headroom command=evaluate examples=%d loss=%.6f acc=%.4f samples_per_sec=%.1f planned_peak_bytes=%d measured_peak_bytes=%d pipeline_budget_bytes=%d micro_batch=%d threads=%d\n",
		n, loss, acc, float64(n)/secs, p.Planned, p.Engine().Ledger().Peak(), dcfg.Budget, p.MicroBatch(), f.threads)
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

// outputSink writes prediction rows to an .npy or .csv file.
type outputSink struct {
	npy      *data.NPYWriter
	path     string
	tmp      *os.File
	csv      *csv.Writer
	names    []string // class names for the CSV header
	files    []string // image files, one per row (a first CSV column)
	row      int
	rowShape tensor.Shape
	header   bool
	record   []string
}

func newOutputSink(path string, names, files []string) (*outputSink, error) {
	return &outputSink{path: path, names: names, files: files}, nil
}

func (s *outputSink) write(o tensor.Tensor) error {
	if s.rowShape == nil {
		s.rowShape = o.Shape()[1:].Clone()
		if strings.EqualFold(filepath.Ext(s.path), ".npy") {
			var err error
			if s.npy, err = data.CreateNPY(s.path, tensor.Float32, s.rowShape); err != nil {
				return err
			}
		} else {
			f, err := os.CreateTemp(filepath.Dir(s.path), "."+filepath.Base(s.path)+".tmp-*")
			if err != nil {
				return err
			}
			f.Chmod(0o644) // as os.Create would make it (CreateTemp makes 0600)
			s.tmp, s.csv = f, csv.NewWriter(f)
		}
	}
	if s.npy != nil {
		if o.DType() != tensor.Float32 {
			c := tensor.New(tensor.Float32, o.Shape())
			for i := 0; i < o.Len(); i++ {
				c.SetFloat64At(i, o.Float64At(i))
			}
			o = c
		}
		return s.npy.Write(o)
	}
	rows := o.Shape()[0]
	per := o.Len() / max(rows, 1)
	if !s.header {
		s.header = true
		var head []string
		if s.files != nil {
			head = append(head, "file")
		}
		if len(s.names) == per {
			head = append(head, s.names...)
		} else {
			for k := 0; k < per; k++ {
				head = append(head, "out_"+strconv.Itoa(k))
			}
		}
		if err := s.csv.Write(head); err != nil {
			return err
		}
	}
	for r := 0; r < rows; r++ {
		s.record = s.record[:0]
		if s.files != nil {
			s.record = append(s.record, s.files[s.row])
		}
		for k := 0; k < per; k++ {
			s.record = append(s.record, strconv.FormatFloat(o.Float64At(r*per+k), 'g', 9, 32))
		}
		if err := s.csv.Write(s.record); err != nil {
			return err
		}
		s.row++
	}
	return nil
}

func (s *outputSink) close() error {
	if s.npy != nil {
		return s.npy.Close()
	}
	if s.csv == nil {
		return errors.New("no outputs: the data holds no examples")
	}
	s.csv.Flush()
	err := s.csv.Error()
	if err == nil {
		err = s.tmp.Sync()
	}
	if cerr := s.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(s.tmp.Name(), s.path)
	}
	if err != nil {
		os.Remove(s.tmp.Name())
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	return nil
}

func (s *outputSink) abort() {
	if s.npy != nil {
		s.npy.Abort()
	}
	if s.tmp != nil {
		s.tmp.Close()
		os.Remove(s.tmp.Name())
	}
}
