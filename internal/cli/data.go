package cli

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
)

// dataFlags are the flags that name the user's own data (train, evaluate,
// predict, export's calibration data).
type dataFlags struct {
	path, format, labels, label, imageSize, color, features, rescale string
	validationSplit                                                  float64
	validationData, validationLabels                                 string
	pipelineBudget                                                   string
	src                                                              *data.Source // --data, once userFiles made it
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
		fs.StringVar(&d.pipelineBudget, "pipeline-budget", "", "the most memory the input pipeline (streaming, augmentation) may hold, reserved in the plan (default: 6 batches, at least 8MiB)")
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

// userFiles returns --data (with --validation-split or --validation-data)
// as a data set train can load or stream.
func (d *dataFlags) userFiles(seed uint64) (*data.UserFiles, error) {
	if d.validationSplit != 0 && d.validationData != "" {
		return nil, usagef("give --validation-split or --validation-data, not both")
	}
	if d.validationSplit < 0 || d.validationSplit >= 1 {
		return nil, usagef("--validation-split %v: want a fraction in [0, 1)", d.validationSplit)
	}
	src, err := d.source()
	if err != nil {
		return nil, err
	}
	d.src = src
	f := &data.UserFiles{Source: src, Split: d.validationSplit, Seed: seed}
	if d.validationData != "" {
		f.Validation = &data.Source{Path: d.validationData, Labels: d.validationLabels}
	}
	return f, nil
}

// unused refuses flags of --data when it is not given.
func (d *dataFlags) unused(fs *flag.FlagSet) error {
	set := explicit(fs)
	for _, f := range []string{"validation-split", "validation-data", "validation-labels", "labels", "label", "format", "image-size", "features", "rescale"} {
		if set[f] {
			return usagef("--%s applies to --data, which is not given", f)
		}
	}
	return nil
}

// pipelineBytes returns --pipeline-budget (0: train's default).
func (d *dataFlags) pipelineBytes() (int64, error) {
	if d.pipelineBudget == "" {
		return 0, nil
	}
	b, err := mem.ParseBytes(d.pipelineBudget)
	if err != nil || b < minPipeline {
		return 0, usagef("--pipeline-budget %q: want a size of at least %s", d.pipelineBudget, mem.FormatBytes(minPipeline))
	}
	return b, nil
}

// minPipeline is the least budget an input pipeline gets: its file
// readers' buffers, a shuffle buffer, map workers' chunks and the batches
// in flight must fit beside one another.
const minPipeline = 8 << 20
