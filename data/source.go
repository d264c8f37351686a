package data

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/headroom-ml/headroom/tensor"
)

// A Source is a data set in the user's files as `headroom train --data`
// names it: a path, its format and how its values become a model's input
// and labels (Preprocessing). Open streams it as samples, Load reads it
// into memory as Examples. Sources only read: they never write to, lock
// or rename the user's files.
//
// Formats (DetectFormat tells them from the path):
//   - csv: a header line, numeric feature columns and a label column
//     (Label; default "label", else the last column) holding integer
//     class indices or class names (sorted into indices, ClassNames).
//   - npy: the features' .npy and, in Labels, the labels' .npy.
//   - npz: an archive with arrays x and y (savez).
//   - images: a folder with one sub-folder per class of PNG, JPEG or GIF
//     files (Keras' image_dataset_from_directory); ImageSize resizes
//     (bilinear), Color is rgb or grayscale; pixels are scaled to [0, 1].
//   - tfrecord: tf.train.Example records; Features names the keys.
//   - idx: MNIST's format, with the labels' file in Labels.
//
// Integer data (uint8 pixels) is kept as bytes and multiplied by Scale
// when fed; float data is fed as it is.
type Source struct {
	Path   string
	Labels string // npy, idx: the labels' file
	// Unlabeled reads only the features (prediction): a CSV needs no label
	// column, an image folder may be flat.
	Unlabeled bool
	Preprocessing
}

// Preprocessing is how a data set's files become a model's input and
// labels. Open completes it (the format, the label column, the class
// names it found); a model file stores it, so that new data is read the
// way the training data was.
type Preprocessing struct {
	Format     string   `json:"format"`
	ClassNames []string `json:"class_names,omitempty"` // label i is ClassNames[i]
	Classes    int      `json:"classes,omitempty"`     // classes of integer labels (max + 1), or len(ClassNames)
	// Scale multiplies integer data (uint8 pixels) when fed; 0 means the
	// format's default: 1/255 for images and IDX, 1 otherwise.
	Scale     float64      `json:"scale,omitempty"`
	Columns   []string     `json:"columns,omitempty"`    // csv: the feature columns, in order
	Label     string       `json:"label,omitempty"`      // csv: the label column; tfrecord: the label key
	ImageSize [2]int       `json:"image_size,omitempty"` // images: [height, width]; zero: as stored
	Color     string       `json:"color,omitempty"`      // images: rgb (default) or grayscale
	Features  string       `json:"features,omitempty"`   // tfrecord: the feature spec (ParseFeatures)
	Shape     tensor.Shape `json:"shape,omitempty"`      // one example, as fed (set by Load)
	// Data names the training data: its path, or a built-in data set.
	Data string `json:"data,omitempty"`
}

// Formats are the formats a Source reads.
var Formats = []string{"csv", "npy", "npz", "images", "tfrecord", "idx", "text"}

// ErrTextFormat is returned for text data: byte-level text is read with
// ReadText by the sequence models, not through a Source.
var ErrTextFormat = errors.New("data: text is byte-level data for the sequence models, not a Source of examples")

// DetectFormat returns the format of the data at path from its name: .csv
// (also .csv.gz, .tsv), .npy, .npz, .tfrecord (.tfrecords, .tfr), IDX
// files (names with "idx" and "ubyte", as MNIST's), .txt (text), and a
// folder: images when it holds image files (in class sub-folders or not),
// text otherwise.
func DetectFormat(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("data: %w", err)
	}
	if info.IsDir() {
		images := false
		err := filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && IsImageFile(d.Name()) {
				images = true
				return filepath.SkipAll
			}
			return err
		})
		if err != nil {
			return "", fmt.Errorf("data: %w", err)
		}
		if images {
			return "images", nil
		}
		return "text", nil
	}
	name := strings.ToLower(filepath.Base(path))
	name = strings.TrimSuffix(name, ".gz")
	switch ext := filepath.Ext(name); {
	case ext == ".csv" || ext == ".tsv":
		return "csv", nil
	case ext == ".npy":
		return "npy", nil
	case ext == ".npz":
		return "npz", nil
	case ext == ".tfrecord" || ext == ".tfrecords" || ext == ".tfr":
		return "tfrecord", nil
	case ext == ".idx" || strings.Contains(name, "idx") && strings.Contains(name, "ubyte"):
		return "idx", nil
	case ext == ".txt" || ext == ".text":
		return "text", nil
	}
	return "", fmt.Errorf("data: cannot tell the format of %s from its name: give --format (%s)", path, strings.Join(Formats, ", "))
}

// scale returns the factor integer data is multiplied by.
func (p *Preprocessing) scale() float64 {
	if p.Scale != 0 {
		return p.Scale
	}
	if p.Format == "images" || p.Format == "idx" {
		return 1.0 / 255
	}
	return 1
}

// ScaleOrDefault returns Scale, or the format's default when it is 0.
func (p *Preprocessing) ScaleOrDefault() float64 { return p.scale() }

// Open returns the source's samples: X the features of one example (uint8
// or float32, or the array's own dtype for npy, npz and idx), Y its label
// (an int32 class index, or the array's values) unless Unlabeled. It
// completes the Preprocessing (the format, the label column, the class
// names found). Opening reads what it must to know the classes (a CSV's
// label column); the samples are read when a pass runs.
func (s *Source) Open() (Dataset[Sample], error) {
	if s.Format == "" {
		f, err := DetectFormat(s.Path)
		if err != nil {
			return Dataset[Sample]{}, err
		}
		s.Format = f
	}
	if _, err := os.Stat(s.Path); err != nil {
		return Dataset[Sample]{}, fmt.Errorf("data: %w", err)
	}
	switch s.Format {
	case "csv":
		return s.openCSV()
	case "npy", "idx":
		labels := s.Labels
		if s.Unlabeled {
			labels = ""
		} else if labels == "" {
			return Dataset[Sample]{}, fmt.Errorf("data: %s: %s features need their labels' file too (--labels)", s.Path, s.Format)
		}
		if labels != "" {
			if _, err := os.Stat(labels); err != nil {
				return Dataset[Sample]{}, fmt.Errorf("data: %w", err)
			}
		}
		if s.Format == "npy" {
			return NPY(s.Path, labels), nil
		}
		return IDX(s.Path, labels), nil
	case "npz":
		y := "y"
		if s.Unlabeled {
			y = ""
		}
		return NPZ(s.Path, "x", y), nil
	case "images":
		ch := 3
		switch s.Color {
		case "", "rgb":
			s.Color = "rgb"
		case "grayscale":
			ch = 1
		default:
			return Dataset[Sample]{}, fmt.Errorf("data: color %q: want rgb or grayscale", s.Color)
		}
		if !s.Unlabeled {
			_, _, classes, err := ImageFiles(s.Path, false)
			if err != nil {
				return Dataset[Sample]{}, err
			}
			if len(classes) == 0 {
				return Dataset[Sample]{}, fmt.Errorf("data: %s has no class sub-folders (one folder of images per class)", s.Path)
			}
			if s.ClassNames != nil && !equalStrings(s.ClassNames, classes) {
				return Dataset[Sample]{}, fmt.Errorf("data: %s has classes %q, the model's are %q", s.Path, classes, s.ClassNames)
			}
			s.ClassNames, s.Classes = classes, len(classes)
		}
		return ImageFolder(s.Path, ImageOptions{Channels: ch, Height: s.ImageSize[0], Width: s.ImageSize[1], Unlabeled: s.Unlabeled})
	case "tfrecord":
		return s.openTFRecord()
	case "text":
		return Dataset[Sample]{}, ErrTextFormat
	}
	return Dataset[Sample]{}, fmt.Errorf("data: unknown format %q (known: %s)", s.Format, strings.Join(Formats, ", "))
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Load reads the whole source into memory as Examples named name: uint8
// features as Pixels (scaled when fed), others as float32 Floats; integer
// labels as Labels (Classes from the class names, else the largest label
// plus one), float labels as Targets. Every example must have the first
// one's shape: an image of another size is an error naming the file (give
// ImageSize). It completes the Preprocessing, Shape included.
func (s *Source) Load(name string) (*Examples, error) {
	ds, err := s.Open()
	if err != nil {
		return nil, err
	}
	var files []string
	if s.Format == "images" {
		files, _, _, _ = ImageFiles(s.Path, s.Unlabeled)
	}
	c := newCollector(s, name, files)
	for smp, err := range ds.All(context.Background(), Config{Name: "load:" + name}) {
		if err != nil {
			return nil, err
		}
		if err := c.add(smp); err != nil {
			return nil, err
		}
	}
	e, err := c.done()
	if err != nil {
		return nil, err
	}
	if e.Labels != nil && s.Classes == 0 {
		s.Classes = e.Classes
	}
	s.Shape = e.Shape.Clone()
	return e, nil
}

// collector gathers samples of a source into Examples.
type collector struct {
	s        *Source
	files    []string // images: the file of each example, for errors
	e        *Examples
	maxLabel int32
}

func newCollector(s *Source, name string, files []string) *collector {
	return &collector{s: s, files: files, e: &Examples{Name: name, Scale: float32(s.scale())}, maxLabel: -1}
}

// add appends a sample: features, and its label unless the source is
// unlabeled.
func (c *collector) add(smp Sample) error {
	s, e := c.s, c.e
	i := e.N
	if i == 0 {
		e.Shape = smp.X.Shape().Clone()
		if smp.X.DType() == tensor.Uint8 {
			e.Pixels = []uint8{}
		} else {
			e.Floats = []float32{}
		}
	} else if !smp.X.Shape().Equal(e.Shape) || (smp.X.DType() == tensor.Uint8) != (e.Pixels != nil) {
		what := fmt.Sprintf("example %d", i)
		if i < len(c.files) {
			what = c.files[i]
		}
		hint := ""
		if s.Format == "images" {
			hint = " (give --image-size to resize every image to one size)"
		}
		return fmt.Errorf("data: %s has shape %v, the first example of %s has %v%s", what, smp.X.Shape(), s.Path, e.Shape, hint)
	}
	if e.Pixels != nil {
		e.Pixels = append(e.Pixels, smp.X.Uint8s()...)
	} else {
		for k := 0; k < smp.X.Len(); k++ {
			e.Floats = append(e.Floats, float32(smp.X.Float64At(k)))
		}
	}
	e.N++
	if s.Unlabeled {
		return nil
	}
	y := smp.Y
	switch {
	case !y.DType().Valid():
		return fmt.Errorf("data: %s: example %d has no label", s.Path, i)
	case y.DType().IsFloat():
		if e.Labels != nil {
			return fmt.Errorf("data: %s: example %d has a float label after integer ones", s.Path, i)
		}
		for k := 0; k < y.Len(); k++ {
			e.Targets = append(e.Targets, float32(y.Float64At(k)))
		}
	default:
		if e.Targets != nil || y.Len() != 1 {
			return fmt.Errorf("data: %s: example %d has %d integer labels, want one class index per example", s.Path, i, y.Len())
		}
		v := y.Float64At(0)
		if v < 0 || v > math.MaxInt32 || (s.Classes > 0 && int(v) >= s.Classes) {
			return fmt.Errorf("data: %s: label %v of example %d is not a class index%s", s.Path, v, i, classRange(s.Classes))
		}
		e.Labels = append(e.Labels, int32(v))
		c.maxLabel = max(c.maxLabel, int32(v))
	}
	return nil
}

// done returns the examples gathered.
func (c *collector) done() (*Examples, error) {
	e := c.e
	if e.N == 0 {
		return nil, fmt.Errorf("data: %s holds no examples", c.s.Path)
	}
	if e.Labels != nil {
		e.Classes = c.s.Classes
		if e.Classes == 0 {
			e.Classes = int(c.maxLabel) + 1
		}
	}
	return e, nil
}

func classRange(classes int) string {
	if classes <= 0 {
		return " (>= 0)"
	}
	return fmt.Sprintf(" in [0, %d)", classes)
}
