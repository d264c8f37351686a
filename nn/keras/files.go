package keras

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/headroom-ml/headroom/internal/hdf5"
)

// File is a Keras model file, read but not yet mapped onto nn: its
// config (JSON) and, where it holds them, its weights.
type File struct {
	Path string
	// Format is what the file is, found from its first bytes, not its
	// name: "json" (model.to_json(), a TensorFlow.js model.json),
	// "keras" (a Keras 3 .keras zip: config.json, metadata.json,
	// model.weights.h5), "h5" (a legacy full model from model.save("x.h5"):
	// HDF5 with model_config, training_config and model_weights) or
	// "weights.h5" (HDF5 weights alone, from save_weights).
	Format string
	// Config is the model config as JSON; for an .h5 file an object with
	// the model_config, training_config and keras_version attributes.
	Config []byte
	// KerasVersion is the version the file says wrote it ("" when none).
	KerasVersion string
	// ConfigPath is where Config was read from when it is not Path (a
	// weights-only file's --keras-config).
	ConfigPath string

	h5        *hdf5.File  // the weights; nil when the file holds none
	wroot     *hdf5.Group // the group holding the weights
	keras3    bool        // Keras 3's layers/<name>/vars layout, not weight_names
	legacy    bool        // Keras 1 and 2's layer_names and weight_names
	layoutErr error       // why the weights are in no layout Keras writes
}

var (
	zipMagic = []byte("PK\x03\x04")
	// files that are neither: a Python pickle, a Git LFS pointer
	pickleMagic = []byte{0x80}
	lfsPointer  = []byte("version https://git-lfs")
)

// OpenFile reads a Keras model file of any format (see File.Format),
// recognised by its content. A weights-only .h5 file has no config:
// Config is nil until one is given (OpenWithConfig).
func OpenFile(path string) (*File, error) {
	f, err := openFile(path)
	if err != nil {
		var ke *Error
		var he *hdf5.FormatError
		if !errors.As(err, &ke) && !errors.As(err, &he) {
			err = &Error{File: path, Index: -1, Err: err}
		}
		return nil, err
	}
	return f, nil
}

func openFile(path string) (*File, error) {
	head, err := sniff(path)
	if err != nil {
		return nil, err
	}
	if !hdf5.IsHDF5(head) && !bytes.HasPrefix(head, zipMagic) {
		if err := notModel(head); err != nil {
			return nil, err
		}
		data, err := readFile(path)
		if err != nil {
			return nil, err
		}
		return &File{Path: path, Format: "json", Config: data}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read: %w", err)
	}
	return parseFile(data, path)
}

// ParseFile reads a Keras model file (see File.Format) from data; name is
// what errors call it. Malformed input is an error naming the file (and,
// inside HDF5, the byte offset), never a panic (FuzzParseFile).
func ParseFile(data []byte, name string) (*File, error) {
	f, err := parseFile(data, name)
	if err != nil {
		var ke *Error
		var he *hdf5.FormatError
		if !errors.As(err, &ke) && !errors.As(err, &he) {
			err = &Error{File: name, Index: -1, Err: err}
		}
		return nil, err
	}
	return f, nil
}

func parseFile(data []byte, name string) (*File, error) {
	switch {
	case hdf5.IsHDF5(data):
		h, err := hdf5.Parse(data, name)
		if err != nil {
			return nil, err
		}
		return fromH5(name, h)
	case bytes.HasPrefix(data, zipMagic):
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("a zip archive that cannot be read: %w", err)
		}
		return fromArchive(name, zr)
	}
	if err := notModel(data); err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d MiB: not a model config", maxFileBytes>>20)
	}
	return &File{Path: name, Format: "json", Config: data}, nil
}

// notModel names files that are often saved under a model's name.
func notModel(head []byte) error {
	switch {
	case bytes.HasPrefix(head, lfsPointer):
		return errors.New("a Git LFS pointer, not the model: fetch it with git lfs pull")
	case bytes.HasPrefix(head, pickleMagic) && len(head) > 1 && head[1] <= 5:
		return errors.New("a Python pickle, not a Keras model file: save the model with model.save(\"x.keras\")")
	}
	return nil
}

// sniff returns the first bytes of the file at path.
func sniff(path string) ([]byte, error) {
	f, err := openPath(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 64)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, &Error{File: path, Index: -1, Err: fmt.Errorf("cannot read: %w", err)}
	}
	return head[:n], nil
}

// fromH5 reads a legacy full model (model_config attribute) or a
// weights-only file.
func fromH5(path string, h *hdf5.File) (*File, error) {
	root, err := h.Root()
	if err != nil {
		return nil, err
	}
	f := &File{Path: path, h5: h, Format: "weights.h5"}
	conf, err := strAttr(root, "model_config")
	if err != nil {
		return nil, err
	}
	if conf != "" {
		f.Format = "h5"
		doc := map[string]string{"model_config": conf}
		if t, err := strAttr(root, "training_config"); err != nil {
			return nil, err
		} else if t != "" {
			doc["training_config"] = t
		}
		if f.KerasVersion, err = strAttr(root, "keras_version"); err != nil {
			return nil, err
		}
		if f.KerasVersion != "" {
			doc["keras_version"] = f.KerasVersion
		}
		if f.Config, err = json.Marshal(doc); err != nil {
			return nil, err
		}
		w, err := root.Group("model_weights")
		var nf *hdf5.NotFoundError
		switch {
		case errors.As(err, &nf):
			f.h5 = nil // a model saved without weights
			return f, nil
		case err != nil:
			return nil, err
		}
		f.wroot = w
		if v, err := strAttr(w, "keras_version"); err == nil && f.KerasVersion == "" {
			f.KerasVersion = v
		}
	} else {
		f.wroot = root
		if v, err := strAttr(root, "keras_version"); err == nil {
			f.KerasVersion = v
		}
	}
	f.layoutErr = f.detectLayout()
	return f, nil
}

// detectLayout tells Keras 2's weight_names layout from Keras 3's
// layers/<name>/vars.
func (f *File) detectLayout() error {
	names, err := chunkedAttr(f.wroot, "layer_names")
	if err != nil {
		return err
	}
	if names != nil {
		f.legacy = true
		return nil
	}
	for _, c := range []string{"layers", "_layer_checkpoint_dependencies"} {
		if _, err := f.wroot.Group(c); err == nil {
			f.keras3 = true
			return nil
		}
	}
	return fmt.Errorf("no weights in a layout Keras writes: neither a layer_names attribute (Keras 1 and 2, legacy .h5) nor a layers group (Keras 3) in %s", f.wroot.Path())
}

// strAttr returns a string attribute of g, "" when it has none.
func strAttr(g *hdf5.Group, name string) (string, error) {
	a, err := g.Attr(name)
	if err != nil || a == nil {
		return "", err
	}
	v, err := a.Value()
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		if l, ok := v.([]string); ok && len(l) == 1 {
			return l[0], nil
		}
		return "", fmt.Errorf("attribute %s of %s: want a string, got %s", name, g.Path(), a.DType)
	}
	return s, nil
}

// chunkedAttr reads a list-of-strings attribute that Keras 2 splits into
// name0, name1, ... when it does not fit an object header (64 KiB); nil
// when there is none.
func chunkedAttr(g *hdf5.Group, name string) ([]string, error) {
	a, err := g.Attr(name)
	if err != nil {
		return nil, err
	}
	if a != nil {
		v, err := a.Strings()
		if err != nil {
			return nil, err
		}
		if v == nil {
			v = []string{}
		}
		return v, nil
	}
	var out []string
	for i := 0; ; i++ {
		a, err := g.Attr(fmt.Sprintf("%s%d", name, i))
		if err != nil {
			return nil, err
		}
		if a == nil {
			return out, nil
		}
		v, err := a.Strings()
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
		if out == nil {
			out = []string{}
		}
	}
}

// maxWeightsBytes bounds the model.weights.h5 read from a .keras archive.
const maxWeightsBytes = 1 << 36

// fromArchive reads a Keras 3 .keras zip: config.json, metadata.json's
// keras_version and model.weights.h5.
func fromArchive(path string, zr *zip.Reader) (*File, error) {
	var err error
	f := &File{Path: path, Format: "keras"}
	var weights []byte
	for _, zf := range zr.File {
		switch zf.Name {
		case "config.json":
			if f.Config, err = readMember(zf, maxFileBytes); err != nil {
				return nil, err
			}
		case "metadata.json":
			b, err := readMember(zf, 1<<20)
			if err != nil {
				return nil, err
			}
			var meta struct {
				Version string `json:"keras_version"`
			}
			if err := json.Unmarshal(b, &meta); err != nil {
				return nil, fmt.Errorf("metadata.json in the .keras archive: %w", err)
			}
			f.KerasVersion = meta.Version
		case "model.weights.h5":
			if weights, err = readMember(zf, maxWeightsBytes); err != nil {
				return nil, err
			}
		case "model.weights.npz":
			return nil, unsupportedError("a .keras archive with its weights in model.weights.npz: save with the default weights format (HDF5)")
		}
	}
	if f.Config == nil {
		return nil, errors.New("a zip archive without config.json: not a .keras model file")
	}
	if weights != nil {
		h, err := hdf5.Parse(weights, path+"!model.weights.h5")
		if err != nil {
			return nil, err
		}
		root, err := h.Root()
		if err != nil {
			return nil, err
		}
		f.h5, f.wroot = h, root
		if err := f.detectLayout(); err != nil {
			f.layoutErr = fmt.Errorf("model.weights.h5: %w", err)
		}
	}
	return f, nil
}

// readMember reads a zip member of at most limit bytes; its declared
// size is not trusted.
func readMember(zf *zip.File, limit int64) ([]byte, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, fmt.Errorf("%s in the .keras archive: %w", zf.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s in the .keras archive: %w", zf.Name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s in the .keras archive is larger than %d MiB", zf.Name, limit>>20)
	}
	return b, nil
}

// HasWeights reports whether the file holds weights.
func (f *File) HasWeights() bool { return f.h5 != nil }

// WithConfig uses the model config of the file at path (JSON, or a .keras
// archive's config.json) for f: the architecture of a weights-only .h5.
func (f *File) WithConfig(path string) error {
	c, err := OpenFile(path)
	if err != nil {
		return err
	}
	if c.Config == nil {
		return &Error{File: path, Index: -1, Err: errors.New("a weights-only file: --keras-config takes the architecture (model.to_json(), config.json)")}
	}
	f.Config, f.ConfigPath = c.Config, path
	if f.KerasVersion == "" {
		f.KerasVersion = c.KerasVersion
	}
	return nil
}

// Model maps the file's config onto nn (as Parse does) and keeps the file
// for its weights (Model.File).
func (f *File) Model(opts ...Option) (*Model, error) {
	name := f.Path
	if f.ConfigPath != "" {
		name = f.ConfigPath
	}
	if f.Config == nil {
		return nil, &Error{File: f.Path, Index: -1, Err: errors.New("a weights-only HDF5 file holds no architecture: give its config with --keras-config (model.to_json(), or a .keras archive's config.json)")}
	}
	data := f.Config
	if f.Format == "keras" && f.KerasVersion != "" && !strings.HasPrefix(f.KerasVersion, "3") {
		// tf.keras 2.13 and 2.14 wrote .keras archives: their configs
		// follow Keras 2 (metadata.json says which)
		wrapped, err := json.Marshal(map[string]any{"keras_version": f.KerasVersion, "model_config": json.RawMessage(data)})
		if err == nil && json.Valid(data) {
			data = wrapped
		}
	}
	m, err := Parse(data, name, opts...)
	if err != nil {
		return nil, err
	}
	m.File = f
	return m, nil
}

// ParamCount returns the number of weight values the file holds: the
// datasets under model_weights (legacy .h5), every dataset (weights-only
// legacy .h5), or every dataset but the optimizer's and the metrics'
// state (Keras 3 layout). It is Keras' "Total params" of the model saved.
func (f *File) ParamCount() (int64, error) {
	var n int64
	err := f.walkWeights(func(d *hdf5.Dataset) error { n += d.Elements(); return nil })
	return n, err
}

// RawWeights calls fn with every weight the file holds (ParamCount's
// datasets), by its path in the HDF5 file, decoded to float32: what a
// file holds, read whether or not its layers map onto nn.
func (f *File) RawWeights(fn func(path string, shape []int64, values []float32) error) error {
	return f.walkWeights(func(d *hdf5.Dataset) error {
		v, err := d.Float32s()
		if err != nil {
			return err
		}
		return fn(d.Path(), d.Shape, v)
	})
}

func (f *File) walkWeights(fn func(d *hdf5.Dataset) error) error {
	if f.h5 == nil {
		return nil
	}
	return f.wroot.Walk(func(d *hdf5.Dataset) error {
		if !f.legacy {
			top, _, _ := strings.Cut(strings.TrimPrefix(d.Path(), "/"), "/")
			if top == "optimizer" || top == "metrics" {
				return nil
			}
		}
		return fn(d)
	})
}
