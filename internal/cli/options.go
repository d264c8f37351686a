package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn/keras"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/train"
)

// options are the flags train and plan share.
type options struct {
	model, dataset, dataDir, optimizer string
	epochs, batch, threads             int
	lr                                 float64
	seed                               uint64
	budget                             string
	budgetBytes                        int64 // --budget; 0 without it
	process                            train.ProcessBudget
	processErr                         error // why there is no budget
	precision                          string
	accumulate                         int
	remat, stream                      bool
	keras, profileDir                  string
	seq                                int    // text: the window, in tokens (bytes)
	text                               string // text: a file or folder of text to train on
	userData                           bool   // --data: the held-out set is validation data, not a test set
	kerasWeights                       bool
	kerasConfig                        string          // --keras-config: the architecture of a weights-only --keras file
	inputShapes                        []keras.Option  // --input-shape, each given
	buckets                            []int           // --buckets, ascending
	planOnly                           bool            // headroom plan: nothing runs
	set                                map[string]bool // flags given on the command line
	kf                                 *kerasFile      // --keras, once read
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.model, "model", "small", "model: small (dense 128, for 8x8 digits), mlp (784-1024-1024-10), cnn (the reference CNN), resnet (ResNet-20), unet (a small U-Net, for shapes); on text: gpt, lstm (peers/seq.py's)")
	fs.StringVar(&o.dataset, "dataset", "digits", "data set: digits (embedded), fashion-mnist, synthetic, shapes (segmentation: a class per pixel; the default for --model unet), go-src (Go's own sources: text for gpt and lstm)")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory of the Fashion-MNIST files (default "+datasets.FashionMNISTDir+")")
	fs.IntVar(&o.epochs, "epochs", 0, "epochs (default: 20 on digits, 4 on shapes, 1 otherwise)")
	fs.IntVar(&o.batch, "batch", 0, "batch size (default: 32 on digits, shapes, text and --data, 128 otherwise)")
	fs.IntVar(&o.threads, "threads", defaultThreads(), "threads for kernels")
	fs.Float64Var(&o.lr, "lr", 1e-3, "learning rate")
	fs.StringVar(&o.optimizer, "optimizer", "adam", "optimizer: adam, adamw, sgd, momentum, nesterov")
	fs.Uint64Var(&o.seed, "seed", 42, "random seed (weights, shuffling, dropout)")
	fs.StringVar(&o.budget, "budget", "", "the whole process's memory budget, e.g. 512MiB (default: the limit it lives under, a container's or the machine's): the run fails before step 1 if it cannot fit")
	fs.StringVar(&o.precision, "precision", "float32", "float32, mixed_bfloat16 or mixed_float16 (16-bit saved activations; float16 with dynamic loss scaling)")
	fs.IntVar(&o.accumulate, "accumulate", 1, "split each batch into this many micro-batches and accumulate their gradients")
	fs.BoolVar(&o.remat, "remat", false, "recompute activations in the backward pass, keeping every √L-th layer output")
	fs.BoolVar(&o.stream, "stream", false, "read the training set from its files (or generate it) each epoch through the input pipeline instead of holding it in memory (fashion-mnist, synthetic, --data); automatic when it would take more than half the budget")
	fs.StringVar(&o.keras, "keras", "", "a Keras model file to use instead of --model: model.to_json() of a Sequential or functional model, a .keras archive, a legacy full-model .h5, a weights-only .h5 (with --keras-config) or a TensorFlow.js model.json; its optimizer and loss are used unless --optimizer or --lr is given, and training starts from the weights it holds")
	fs.BoolVar(&o.kerasWeights, "keras-weights", false, "with --keras: start from the file's weights (the default for .keras and .h5 files; --keras-weights=false starts from fresh weights); for a TensorFlow.js model.json, from the shards its weightsManifest lists")
	fs.StringVar(&o.kerasConfig, "keras-config", "", "with --keras WEIGHTS.h5: the model's architecture (model.to_json(), or a .keras archive's config.json)")
	fs.IntVar(&o.seq, "seq", 128, "text data sets (go-src, --text): the window of a language model, in bytes; with --keras: the length of an input's time axis where the file leaves it unknown (None)")
	fs.Func("input-shape", "with --keras: NAME=DxD... gives the input NAME (an InputLayer's name; DxD... alone for a model's only input) this shape, the batch left out, fixing the dimensions the file leaves unknown (None); may be repeated", func(v string) error {
		name, shape, err := keras.ParseInputShape(v)
		if err == nil {
			o.inputShapes = append(o.inputShapes, keras.WithInputShape(name, shape))
		}
		return err
	})
	fs.Func("buckets", "text runs: train on the text's lines, batched by length into these buckets (e.g. 32,64,128: each batch padded to the smallest that holds it, the padding left out of the loss); the largest is the model's window (--seq)", o.parseBuckets)
	fs.StringVar(&o.text, "text", "", "train a language model (gpt, lstm) on this file or folder of text (read recursively, sorted; 90% train, 10% validation)")
	fs.StringVar(&o.profileDir, "profile", "", "write profile.pb.gz (go tool pprof), trace.json (Perfetto), report.html and TensorBoard events to this directory")
}

// parse parses args (flags only) and completes the options; userData
// reports whether the run trains on the user's files (--data).
func (o *options) parse(fs *flag.FlagSet, args []string, userData func() bool) error {
	if err := fs.Parse(args); err != nil {
		return &usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	o.set = explicit(fs)
	if !o.set["dataset"] && o.model == "unet" {
		o.dataset = "shapes" // a segmentation model: its own data set unless told
	}
	if userData != nil && userData() {
		if o.set["dataset"] {
			return usagef("give --data or --dataset, not both")
		}
		o.userData = true
	}
	return o.finish()
}

// finish sets the defaults that depend on the data and checks the flags.
func (o *options) finish() error {
	if o.epochs == 0 {
		o.epochs = 1
		switch {
		case o.userData:
		case o.dataset == "digits":
			o.epochs = 20
		case o.dataset == "shapes":
			o.epochs = shapesEpochs
		}
	}
	if o.batch == 0 {
		o.batch = 128
		switch {
		case o.userData || o.dataset == "digits" || o.isText():
			o.batch = 32
		case o.dataset == "shapes":
			o.batch = shapesBatch
		}
	}
	if o.isText() && o.model == "small" { // the default model is not a language model
		o.model = "gpt"
	}
	if err := o.checkBuckets(); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	// the whole process's budget: --budget, else the limit it lives under
	o.process, o.processErr = train.NewProcessBudget(o.budgetBytes, "--budget "+o.budget)
	switch {
	case o.processErr == nil, errors.Is(o.processErr, mem.ErrNoLimit):
	case o.budgetBytes > 0:
		return &usageError{o.processErr}
	default: // the limit the process lives under leaves nothing for a plan
		return o.processErr
	}
	setThreads(o.threads)
	return nil
}

// check refuses flag values no run can have.
func (o *options) check() error {
	switch {
	case o.seq <= 0:
		return usagef("--seq %d: want a positive window", o.seq)
	case o.batch < 0 || o.epochs < 0 || o.threads <= 0 || o.accumulate <= 0:
		return usagef("--batch, --epochs, --threads and --accumulate must be positive")
	case !(o.lr >= 0) || math.IsInf(o.lr, 0): // as torch.optim: 0 is allowed, negative and NaN are not
		return usagef("--lr %v: want a finite learning rate >= 0", o.lr)
	case o.kerasWeights && o.keras == "":
		return usagef("--keras-weights needs --keras")
	case o.kerasConfig != "" && o.keras == "":
		return usagef("--keras-config needs --keras (the weights file)")
	case len(o.inputShapes) > 0 && o.keras == "":
		return usagef("--input-shape needs --keras")
	case o.batch%o.accumulate != 0:
		return usagef("--batch %d does not split into --accumulate %d equal micro-batches", o.batch, o.accumulate)
	}
	if _, err := step.ParsePrecision(o.precision); err != nil {
		return &usageError{err}
	}
	if o.budget != "" {
		b, err := mem.ParseBytes(o.budget)
		if err != nil || b <= 0 {
			return usagef("--budget %q: want a size such as 512MiB", o.budget)
		}
		o.budgetBytes = b
	}
	return nil
}

// planBudget returns the bytes the run's plan may reserve and where that
// comes from: the whole process's budget less the process itself; 0 when
// no limit is known.
func (o *options) planBudget() (int64, string) {
	if o.processErr == nil && o.process.Plan > 0 {
		return o.process.Plan, o.process.Describe()
	}
	return 0, ""
}

// isText reports whether the run trains a language model on text.
func (o *options) isText() bool { return o.dataset == "go-src" || o.text != "" }

// heldOut names the data set evaluated at each epoch's end.
func (o *options) heldOut() string {
	if o.userData || o.isText() {
		return "validation"
	}
	return "test"
}

// explicit returns the flags set on the command line.
func explicit(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// newFlagSet returns a flag set that prints its flags on stdout for -h
// (so that `| less` works) and, for a bad flag, nothing: Main prints the
// error once, on stderr.
func newFlagSet(name string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("headroom "+name, flag.ContinueOnError)
	var msg errorNote
	fs.SetOutput(&msg)
	fs.Usage = func() {
		if msg.written { // the flag package reports an error: Main says it
			msg.written = false
			return
		}
		fmt.Fprintf(stdout, "Usage of headroom %s:\n", name)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(&msg)
	}
	return fs
}

// errorNote notes that the flag package wrote an error message (which it
// does before calling Usage for a bad flag, not for -h) and drops it.
type errorNote struct{ written bool }

func (e *errorNote) Write(p []byte) (int, error) {
	e.written = true
	return len(p), nil
}
