package cli

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/train"
)

// dataFlags are the flags that name the user's own data (train, evaluate,
// predict, export's calibration data).
type dataFlags struct {
	path, format, labels, label, imageSize, color, features, rescale string
	validationSplit                                                  float64
	validationData, validationLabels                                 string
	stream                                                           bool
	pipelineBudget                                                   string
	streamed                                                         *data.Stream // the stream, when --data is streamed
}

func (d *dataFlags) register(fs *flag.FlagSet, training bool) {
	fs.StringVar(&d.path, "data", "", "your data: a CSV file, an NPY (with --labels) or NPZ file, a folder of images in class sub-folders, TFRecord files, IDX files (the format from the name, or --format)")
	fs.StringVar(&d.format, "format", "", "the format of --data: "+strings.Join(data.Formats, ", ")+" (default: from the path)")
	fs.StringVar(&d.labels, "labels", "", "npy or idx: the file of the labels, one per example of --data")
	fs.StringVar(&d.label, "label", "", "csv: the label column (default \"label\", else the last column); tfrecord: the label key (default \"label\")")
	fs.StringVar(&d.imageSize, "image-size", "", "images: resize every image to HEIGHTxWIDTH, e.g. 64x64 (bilinear, as Keras; default: as stored, all one size)")
	fs.StringVar(&d.color, "color", "rgb", "images: rgb or grayscale")
	fs.StringVar(&d.features, "features", "", "tfrecord: the features the model reads, key:kind[:shape],... with kind float, int64 or bytes (raw uint8) and shape like 28x28x1")
	fs.StringVar(&d.rescale, "rescale", "", "multiply integer (uint8) data by this when it is fed, e.g. 1/255 (default: 1/255 for images and IDX, 1 otherwise)")
	if training {
		fs.Float64Var(&d.validationSplit, "validation-split", 0, "hold out this fraction of --data for validation: the last part after a seeded shuffle (Keras' validation_split)")
		fs.StringVar(&d.validationData, "validation-data", "", "validate on this data set (read as --data is)")
		fs.StringVar(&d.validationLabels, "validation-labels", "", "npy or idx: the labels of --validation-data")
		fs.BoolVar(&d.stream, "stream", false, "read --data from its files each epoch through the input pipeline (a shuffle buffer, batches, prefetch) instead of holding it in memory; automatic with --budget when the data would take more than half of it")
		fs.StringVar(&d.pipelineBudget, "pipeline-budget", "", "with --stream: the most memory the input pipeline may hold, counted in the plan (default 16MiB)")
	}
}

// given reports whether the user named a data set.
func (d *dataFlags) given() bool { return d.path != "" }

// source returns the Source the flags describe.
func (d *dataFlags) source() (*data.Source, error) {
	s := &data.Source{Path: d.path, Labels: d.labels, Preprocessing: data.Preprocessing{Format: d.format, Label: d.label, Features: d.features}}
	if err := d.applyTo(&s.Preprocessing); err != nil {
		return nil, err
	}
	return s, nil
}

// applyTo sets the preprocessing options given on the command line.
func (d *dataFlags) applyTo(p *data.Preprocessing) error {
	if d.imageSize != "" {
		h, w, err := parseSize(d.imageSize)
		if err != nil {
			return err
		}
		p.ImageSize = [2]int{h, w}
	}
	switch d.color {
	case "", "rgb", "grayscale":
		if d.color != "" {
			p.Color = d.color
		}
	default:
		return fmt.Errorf("--color %q: want rgb or grayscale", d.color)
	}
	if d.rescale != "" {
		v, err := parseFraction(d.rescale)
		if err != nil || !(v > 0) {
			return fmt.Errorf("--rescale %q: want a positive number such as 1/255 or 0.5", d.rescale)
		}
		p.Scale = v
	}
	return nil
}

// parseSize reads HEIGHTxWIDTH (or one number for a square).
func parseSize(s string) (h, w int, err error) {
	hs, ws, ok := strings.Cut(strings.ToLower(s), "x")
	if !ok {
		ws = hs
	}
	h, err1 := strconv.Atoi(strings.TrimSpace(hs))
	w, err2 := strconv.Atoi(strings.TrimSpace(ws))
	if err1 != nil || err2 != nil || h <= 0 || w <= 0 || h > 1<<14 || w > 1<<14 {
		return 0, 0, fmt.Errorf("--image-size %q: want HEIGHTxWIDTH, e.g. 64x64", s)
	}
	return h, w, nil
}

// parseFraction reads a number or a fraction a/b.
func parseFraction(s string) (float64, error) {
	if a, b, ok := strings.Cut(s, "/"); ok {
		x, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
		y, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
		if err1 != nil || err2 != nil || y == 0 {
			return 0, errors.New("not a fraction")
		}
		return x / y, nil
	}
	return strconv.ParseFloat(strings.TrimSpace(s), 64)
}

// loadTraining reads --data (and --validation-data, or the
// --validation-split of --data) into memory and returns the training and
// validation sets (validation nil without either) and the preprocessing
// the model file keeps.
func (d *dataFlags) loadTraining(seed uint64) (trainSet, valSet *data.Examples, pre data.Preprocessing, err error) {
	if d.validationSplit != 0 && d.validationData != "" {
		return nil, nil, pre, errors.New("give --validation-split or --validation-data, not both")
	}
	if d.validationSplit < 0 || d.validationSplit >= 1 {
		return nil, nil, pre, fmt.Errorf("--validation-split %v: want a fraction in [0, 1)", d.validationSplit)
	}
	src, err := d.source()
	if err != nil {
		return nil, nil, pre, err
	}
	name := filepath.Base(d.path)
	all, err := src.Load(name)
	if errors.Is(err, data.ErrTextFormat) {
		return nil, nil, pre, fmt.Errorf("--data %s is text: training byte-level models on text is the sequence models' work, which this build does not have yet (train on csv, npy, npz, images, tfrecord or idx data)", d.path)
	}
	if err != nil {
		return nil, nil, pre, err
	}
	pre = src.Preprocessing
	trainSet = all
	switch {
	case d.validationSplit > 0:
		if trainSet, valSet, err = data.SplitValidation(all, d.validationSplit, seed); err != nil {
			return nil, nil, pre, err
		}
	case d.validationData != "":
		v := &data.Source{Path: d.validationData, Labels: d.validationLabels, Preprocessing: pre}
		v.Shape = nil
		if valSet, err = v.Load(filepath.Base(d.validationData)); err != nil {
			return nil, nil, pre, err
		}
		if !valSet.Shape.Equal(trainSet.Shape) {
			return nil, nil, pre, fmt.Errorf("--validation-data %s has examples of shape %v, --data %v", d.validationData, valSet.Shape, trainSet.Shape)
		}
		if v.Classes > pre.Classes {
			return nil, nil, pre, fmt.Errorf("--validation-data %s has labels up to %d, --data only up to %d", d.validationData, v.Classes-1, pre.Classes-1)
		}
		valSet.Classes = trainSet.Classes
	}
	return trainSet, valSet, pre, nil
}

// fashionClasses are Fashion-MNIST's class names (its labels 0 to 9), as
// Keras' documentation lists them.
var fashionClasses = []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}

// explicit returns the flags set on the command line.
func explicit(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// unused refuses flags of --data when it is not given.
func (d *dataFlags) unused(fs *flag.FlagSet) error {
	set := explicit(fs)
	for _, f := range []string{"validation-split", "validation-data", "validation-labels", "labels", "label", "format", "image-size", "features", "rescale", "stream", "pipeline-budget"} {
		if set[f] {
			return fmt.Errorf("--%s applies to --data, which is not given", f)
		}
	}
	return nil
}

// builtinPreprocessing describes a built-in data set for the model file.
func builtinPreprocessing(o *options, trainSet *data.Examples) data.Preprocessing {
	pre := data.Preprocessing{Format: o.dataset, Classes: trainSet.Classes, Shape: trainSet.Shape.Clone(), Data: o.dataset}
	if trainSet.Pixels != nil || trainSet.Scale != 0 {
		pre.Scale = float64(trainSet.Scale)
	}
	if o.dataset == "fashion-mnist" || o.dataset == "fashion" {
		pre.ClassNames = fashionClasses
	}
	return pre
}

// loadData returns the training and validation sets of --data (with
// Keras' defaults of 32 examples a batch and 1 epoch unless given) and
// the preprocessing a model file keeps: in memory, or described for a
// stream (see streamTraining).
func loadData(fs *flag.FlagSet, o *options, d *dataFlags) (trainSet, valSet *data.Examples, pre data.Preprocessing, err error) {
	set := explicit(fs)
	if set["dataset"] {
		return nil, nil, pre, errors.New("give --data or --dataset, not both")
	}
	if !set["epochs"] {
		o.epochs = 1
	}
	if !set["batch"] {
		o.batch = 32
	}
	if o.batch%o.accumulate != 0 {
		return nil, nil, pre, fmt.Errorf("--batch %d does not split into --accumulate %d equal micro-batches", o.batch, o.accumulate)
	}
	o.dataset, o.userData = filepath.Base(d.path), true
	streamed, err := d.streamTraining(o)
	if err != nil {
		return nil, nil, pre, err
	}
	if streamed != nil {
		return streamed.train, streamed.val, streamed.pre, nil
	}
	trainSet, valSet, pre, err = d.loadTraining(o.seed)
	if abs, aerr := filepath.Abs(d.path); aerr == nil {
		pre.Data = abs
	}
	return trainSet, valSet, pre, err
}

// registered names the nn.NewModel call that built the run's model, kept
// in the model file for a model whose architecture cannot be written.
func (o *options) registered(cfg train.Config, trainSet *data.Examples) *train.Registered {
	if o.keras != "" {
		return nil
	}
	return &train.Registered{Name: o.model, Input: trainSet.Shape.Clone(), Classes: trainSet.Classes}
}

// heldOut names the data set evaluated at each epoch's end.
func (o *options) heldOut() string {
	if o.userData {
		return "validation"
	}
	return "test"
}

// streamedData is --data read as a stream: a descriptor of the training
// examples (no data), the validation examples and the preprocessing.
type streamedData struct {
	train, val *data.Examples
	pre        data.Preprocessing
}

// streamTraining scans --data for a streamed run when --stream asks for
// one, or when the data would take more than half of the run's budget in
// memory (--budget, else the limit the process lives under); it returns
// nil when the data is to be loaded.
func (d *dataFlags) streamTraining(o *options) (*streamedData, error) {
	src, err := d.source()
	if err != nil {
		return nil, err
	}
	if !d.stream {
		budget, _ := o.effectiveBudget()
		if budget <= 0 {
			return nil, nil
		}
		est, err := src.EstimateBytes()
		if err != nil || est <= budget/2 {
			return nil, nil // Load reports a bad path
		}
		d.stream = true
	}
	if d.validationData != "" {
		return nil, errors.New("--stream holds out a --validation-split of --data; --validation-data is for data loaded in memory")
	}
	if d.validationSplit < 0 || d.validationSplit >= 1 {
		return nil, fmt.Errorf("--validation-split %v: want a fraction in [0, 1)", d.validationSplit)
	}
	st := &data.Stream{Source: src, Split: d.validationSplit, Seed: o.seed}
	if err := st.Scan(); errors.Is(err, data.ErrTextFormat) {
		return nil, fmt.Errorf("--data %s is text: training byte-level models on text is the sequence models' work, which this build does not have yet", d.path)
	} else if err != nil {
		return nil, err
	}
	d.streamed = st
	desc := &data.Examples{Name: filepath.Base(d.path), Shape: st.Shape.Clone(), N: st.N, Classes: src.Classes}
	pre := src.Preprocessing
	if abs, err := filepath.Abs(d.path); err == nil {
		pre.Data = abs
	}
	return &streamedData{train: desc, val: st.Val, pre: pre}, nil
}

// inMemory returns the training set train.New holds: nil for a stream.
func (d *dataFlags) inMemory(trainSet *data.Examples) *data.Examples {
	if d.streamed != nil {
		return nil
	}
	return trainSet
}

// minPipeline is the least budget a streamed run's input pipeline gets:
// its file readers' buffers, a shuffle buffer, map workers' chunks and
// the batches in flight must fit beside one another.
const minPipeline = 8 << 20

// pipelineBytes returns the input pipeline's budget of a streamed run,
// which its plan counts (train.Config.InputBudget).
func (d *dataFlags) pipelineBytes() (int64, error) {
	if d.pipelineBudget == "" {
		return pipelineBudget, nil
	}
	b, err := mem.ParseBytes(d.pipelineBudget)
	if err != nil || b < minPipeline {
		return 0, fmt.Errorf("--pipeline-budget %q: want a size of at least %s", d.pipelineBudget, mem.FormatBytes(minPipeline))
	}
	return b, nil
}
