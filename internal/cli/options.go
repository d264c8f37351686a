package cli

import (
	"flag"
	"fmt"
	"github.com/headroom-ml/headroom/data"
	"io"
	"math"
	"runtime"

	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/tensor"
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
	process                            processBudget
	processErr                         error // why there is no budget
	precision                          string
	accumulate                         int
	remat                              bool
	keras, profileDir                  string
	seq                                int    // text: the window, in tokens (bytes)
	text                               string // text: a file or folder of text to train on
	userData                           bool   // --data: the held-out set is validation data, not a test set
	kerasWeights                       bool
	set                                map[string]bool // flags given on the command line
	kf                                 *kerasFile      // --keras, once read
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.model, "model", "small", "model: small (dense 128, for 8x8 digits), mlp (784-1024-1024-10), cnn (the reference CNN), resnet (ResNet-20), unet (a small U-Net, for shapes); on text: gpt, lstm (peers/seq.py's)")
	fs.StringVar(&o.dataset, "dataset", "digits", "data set: digits (embedded), fashion-mnist, synthetic, shapes (segmentation: a class per pixel; the default for --model unet), go-src (Go's own sources: text for gpt and lstm)")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory of the Fashion-MNIST files (default "+datasets.FashionMNISTDir+")")
	fs.IntVar(&o.epochs, "epochs", 0, "epochs (default: 20 on digits, 4 on shapes, 1 otherwise)")
	fs.IntVar(&o.batch, "batch", 0, "batch size (default: 32 on digits and shapes, 128 otherwise)")
	fs.IntVar(&o.threads, "threads", runtime.NumCPU(), "threads for kernels")
	fs.Float64Var(&o.lr, "lr", 1e-3, "learning rate")
	fs.StringVar(&o.optimizer, "optimizer", "adam", "optimizer: adam, adamw, sgd, momentum, nesterov")
	fs.Uint64Var(&o.seed, "seed", 42, "random seed (weights, shuffling, dropout)")
	fs.StringVar(&o.budget, "budget", "", "memory budget, e.g. 512MiB: the run fails before step 1 if it cannot fit")
	fs.StringVar(&o.precision, "precision", "float32", "float32, mixed_bfloat16 or mixed_float16 (16-bit saved activations; float16 with dynamic loss scaling)")
	fs.IntVar(&o.accumulate, "accumulate", 1, "split each batch into this many micro-batches and accumulate their gradients")
	fs.BoolVar(&o.remat, "remat", false, "recompute activations in the backward pass, keeping every √L-th layer output")
	fs.StringVar(&o.keras, "keras", "", "a Keras model config (model.to_json() of a Sequential or functional model, a .keras file, or a TensorFlow.js model.json) to use instead of --model; its optimizer and loss are used unless --optimizer or --lr is given")
	fs.BoolVar(&o.kerasWeights, "keras-weights", false, "with --keras: start from the weights the TensorFlow.js model.json's weightsManifest lists (shards beside it)")
	fs.IntVar(&o.seq, "seq", 128, "text data sets (go-src, --text): the window of a language model, in bytes")
	fs.StringVar(&o.text, "text", "", "train a language model (gpt, lstm) on this file or folder of text (read recursively, sorted; 90% train, 10% validation)")
	fs.StringVar(&o.profileDir, "profile", "", "write profile.pb.gz (go tool pprof), trace.json (Perfetto), report.html and TensorBoard events to this directory")
}

// parse parses args (flags only) and completes the options.
func (o *options) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if !o.set["dataset"] && o.model == "unet" {
		o.dataset = "shapes" // a segmentation model: its own data set unless told
	}
	return o.finish()
}

func (o *options) finish() error {
	if o.epochs == 0 {
		o.epochs = 1
		switch o.dataset {
		case "digits":
			o.epochs = 20
		case "shapes":
			o.epochs = shapesEpochs
		}
	}
	if o.batch == 0 {
		o.batch = 128
		switch {
		case o.dataset == "digits" || o.isText():
			o.batch = 32
		case o.dataset == "shapes":
			o.batch = shapesBatch
		}
	}
	if o.isText() && o.model == "small" { // the default model is not a language model
		o.model = "gpt"
	}
	if o.seq <= 0 {
		return fmt.Errorf("--seq %d: want a positive window", o.seq)
	}
	if o.batch < 0 || o.epochs < 0 || o.threads <= 0 || o.accumulate <= 0 {
		return fmt.Errorf("--batch, --epochs, --threads and --accumulate must be positive")
	}
	if !(o.lr >= 0) || math.IsInf(o.lr, 0) { // as torch.optim: 0 is allowed, negative and NaN are not
		return fmt.Errorf("--lr %v: want a finite learning rate >= 0", o.lr)
	}
	if o.kerasWeights && o.keras == "" {
		return fmt.Errorf("--keras-weights needs --keras")
	}
	if o.batch%o.accumulate != 0 {
		return fmt.Errorf("--batch %d does not split into --accumulate %d equal micro-batches", o.batch, o.accumulate)
	}
	if o.budget != "" {
		b, err := mem.ParseBytes(o.budget)
		if err != nil || b <= 0 {
			return fmt.Errorf("--budget %q: want a size such as 512MiB", o.budget)
		}
		o.budgetBytes = b
	}
	// the whole process's budget: --budget, else the limit it lives under
	o.process, o.processErr = newProcessBudget(o.budgetBytes, o.budget)
	if o.processErr != nil && o.budgetBytes > 0 {
		return o.processErr
	}
	runtime.GOMAXPROCS(o.threads)
	kernels.SetThreads(o.threads)
	return nil
}

// effectiveBudget returns the bytes the run's plan may reserve and where
// that comes from: the whole process's budget (--budget, else the limit the
// process lives under: the container's, else the machine's available
// memory) less the process itself; 0 when no limit is known.
func (o *options) effectiveBudget() (int64, string) {
	if o.processErr == nil && o.process.plan > 0 {
		return o.process.plan, o.process.describe()
	}
	return 0, ""
}

// load returns the training and test sets.
func (o *options) load() (trainSet, testSet *data.Examples, err error) {
	switch o.dataset {
	case "digits":
		return datasets.Digits()
	case "fashion-mnist", "fashion":
		return datasets.FashionMNIST(o.dataDir)
	case "synthetic":
		// the peers' sizes: 60,000 examples for the mlp, 20,000 for the cnn
		n, shape := 60000, tensor.Shape{784}
		if o.model == "cnn" || o.model == "resnet" {
			n, shape = 20000, tensor.Shape{28, 28, 1}
		}
		tr, te := datasets.Synthetic(shape, n, n/10, 10, 0)
		return tr, te, nil
	case "shapes":
		tr, te := datasets.Shapes(shapesTrain, shapesTest, shapesSize, 0)
		return tr, te, nil
	}
	return nil, nil, fmt.Errorf("unknown data set %q (known: digits, fashion-mnist, synthetic, shapes)", o.dataset)
}

// config builds the model and the training configuration for the data.
func (o *options) config(trainSet, testSet *data.Examples) (train.Config, error) {
	var m nn.Model
	var err error
	if o.keras != "" {
		if m, err = o.kerasModel(trainSet); err != nil {
			return train.Config{}, err
		}
	} else if m, err = nn.NewModel(o.model, trainSet.Shape, trainSet.Classes); err != nil {
		return train.Config{}, err
	}
	opt, err := optim.ByName(o.optimizer)
	if err != nil {
		return train.Config{}, err
	}
	budget, source := o.effectiveBudget()
	cfg := train.Config{Model: m, Optimizer: opt, Schedule: optim.Constant(o.lr), Epochs: o.epochs, Batch: o.batch,
		Seed: o.seed, Budget: budget, BudgetSource: source, Validation: testSet, Precision: o.precision, Accumulate: o.accumulate, Remat: o.remat, Threads: o.threads}
	if o.keras != "" {
		err = o.applyKeras(&cfg)
	}
	return cfg, err
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
