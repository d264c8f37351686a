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

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

const (
	// maxRank is the largest per-example rank: tensor.MaxRank less the batch.
	maxRank = tensor.MaxRank - 1
	// maxFileBytes bounds what Load reads: real configs are kilobytes.
	maxFileBytes = 64 << 20
)

// Model is a Keras Sequential model read from its config.
type Model struct {
	Name string
	// Sequential is the model in headroom's vocabulary: one nn layer per
	// Keras layer but the InputLayer, named as in the file, with the input
	// shape the file gives.
	Sequential *nn.Sequential
	// Layers lists every Keras layer of the file in order, the InputLayer
	// included when the file has one.
	Layers []LayerInfo
	// Params is model.summary()'s "Total params": trainable and not.
	Params int
	// TrainableParams is "Trainable params": Params less BatchNormalization's
	// moving statistics and the weights of layers marked trainable=false.
	TrainableParams int
	// Loss is the training config's loss in Keras' snake_case
	// ("categorical_crossentropy"), or "" when the file has none.
	Loss string
}

// LayerInfo is one Keras layer as model.summary() shows it.
type LayerInfo struct {
	Name            string
	Class           string       // Keras class name as written ("Conv2D")
	Output          tensor.Shape // per example, without the batch dimension
	Params          int
	TrainableParams int
}

// ErrUnsupported is matched (errors.Is) by errors about a layer class,
// argument or format that the file uses correctly but headroom does not map.
var ErrUnsupported = errors.New("not supported")

type unsupportedError string

func (e unsupportedError) Error() string        { return string(e) }
func (e unsupportedError) Is(target error) bool { return target == ErrUnsupported }

// Error is a problem with a model file: it names the file and, where the
// problem is in one layer, the layer's index in the file's layer list and
// its name.
type Error struct {
	File  string
	Index int    // layer index in the file (0-based), -1 when not about one layer
	Layer string // layer name, "" when unknown
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("keras: ")
	b.WriteString(e.File)
	b.WriteString(": ")
	if e.Index >= 0 {
		fmt.Fprintf(&b, "layer %d", e.Index)
		if e.Layer != "" {
			fmt.Fprintf(&b, " (%s)", e.Layer)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Load reads a Keras Sequential model config: what model.to_json() writes
// (Keras 2 and Keras 3 keys), a TensorFlow.js layers-model model.json (the
// Keras config under modelTopology.model_config, or modelTopology itself),
// Keras 2.0-era files whose "config" is a bare list of layers, and the
// config.json inside a Keras 3 .keras archive.
func Load(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &Error{File: path, Index: -1, Err: fmt.Errorf("cannot open: %w", err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, &Error{File: path, Index: -1, Err: fmt.Errorf("cannot read: %w", err)}
	}
	if len(data) > maxFileBytes {
		return nil, &Error{File: path, Index: -1, Err: fmt.Errorf("larger than %d MiB: not a model config", maxFileBytes>>20)}
	}
	return Parse(data, path)
}

// Parse reads a model config from data; name is the file name that errors
// carry. Any malformed input is an *Error, never a panic.
func Parse(data []byte, name string) (*Model, error) {
	p := &parser{file: name}
	m, err := p.parse(data)
	if err != nil {
		var ke *Error
		if !errors.As(err, &ke) {
			err = &Error{File: name, Index: -1, Err: err}
		}
		return nil, err
	}
	return m, nil
}

type parser struct {
	file string
}

func (p *parser) layerErr(i int, name string, err error) error {
	return &Error{File: p.file, Index: i, Layer: name, Err: err}
}

// entry is one element of the file's layer list, read but not yet mapped.
type entry struct {
	index       int
	class, name string // class in its canonical spelling
	written     string // class as written
	f           *fields
	raw         map[string]any
	m           mapped
}

// source is where the model config sits in the file.
type source struct {
	model    map[string]any
	training []any // candidate training/compile configs, first with a loss wins
	manifest any   // TensorFlow.js weightsManifest, nil when absent
}

func (p *parser) parse(data []byte) (*Model, error) {
	data, err := unpack(data)
	if err != nil {
		return nil, err
	}
	root, err := decode(data)
	if err != nil {
		return nil, err
	}
	src, err := locate(root)
	if err != nil {
		return nil, err
	}
	name, list, mf, err := sequentialConfig(src.model)
	if err != nil {
		return nil, err
	}
	entries, err := p.entries(list)
	if err != nil {
		return nil, err
	}
	input, inputDType, err := p.inputShape(entries, src.model, mf)
	if err != nil {
		return nil, err
	}
	trainable := mf.boolean("trainable", true)
	if mf.err != nil {
		return nil, fmt.Errorf("config.%w", mf.err)
	}
	m := &Model{Name: name, Loss: lossOf(src.training)}
	seq := &nn.Sequential{Name: name, InputShape: tensor.Shape(input)}
	cur := input
	for _, e := range entries {
		if e.class == "InputLayer" {
			m.Layers = append(m.Layers, LayerInfo{Name: e.name, Class: e.written, Output: tensor.Shape(cur).Clone()})
			continue
		}
		if err := p.checkBuildInput(e, cur); err != nil {
			return nil, err
		}
		e.m = mapLayer(e.class, e.name, e.f, cur)
		layerTrainable := e.f.boolean("trainable", true)
		if e.f.err != nil {
			return nil, p.layerErr(e.index, e.name, e.f.err)
		}
		info := LayerInfo{Name: e.name, Class: e.written, Output: tensor.Shape(e.m.out).Clone(), Params: e.m.params}
		if trainable && layerTrainable {
			info.TrainableParams = e.m.params - e.m.nonTrainable
		}
		if m.Params > maxElements-info.Params {
			return nil, p.layerErr(e.index, e.name, errors.New("the model's parameters exceed 2^40"))
		}
		m.Params += info.Params
		m.TrainableParams += info.TrainableParams
		m.Layers = append(m.Layers, info)
		seq.Layers = append(seq.Layers, e.m.layer)
		cur = e.m.out
	}
	if len(seq.Layers) == 0 {
		return nil, errors.New("the model has no layers besides its input")
	}
	first := firstLayer(entries)
	switch {
	case first.class == "Embedding":
		seq.InputDType = tensor.Int32 // indices; nn.Embedding gathers with int32
	case inputDType != "" && inputDType != "float32":
		return nil, p.layerErr(0, entries[0].name, unsupportedError(fmt.Sprintf(
			"input dtype %s feeds %s: only an Embedding takes integer input", inputDType, first.written)))
	}
	m.Sequential = seq
	if err := p.crossCheck(m, entries); err != nil {
		return nil, err
	}
	if err := p.checkManifest(m, src.manifest); err != nil {
		return nil, err
	}
	return m, nil
}

// unpack returns the JSON inside a Keras 3 .keras archive (a zip holding
// config.json) and rejects HDF5 files with a pointer to what to export.
func unpack(data []byte) ([]byte, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	if bytes.HasPrefix(data, []byte("\x89HDF\r\n\x1a\n")) {
		return nil, unsupportedError("an HDF5 (.h5) model file: headroom reads the JSON config; write it with model.to_json(), or save a .keras file")
	}
	if !bytes.HasPrefix(data, []byte("PK\x03\x04")) {
		return data, nil
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("a zip archive that cannot be read: %w", err)
	}
	for _, zf := range zr.File {
		if zf.Name != "config.json" {
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			return nil, fmt.Errorf("config.json in the .keras archive: %w", err)
		}
		defer rc.Close()
		out, err := io.ReadAll(io.LimitReader(rc, maxFileBytes+1))
		if err != nil {
			return nil, fmt.Errorf("config.json in the .keras archive: %w", err)
		}
		if len(out) > maxFileBytes {
			return nil, fmt.Errorf("config.json in the .keras archive is larger than %d MiB", maxFileBytes>>20)
		}
		return out, nil
	}
	return nil, errors.New("a zip archive without config.json: not a .keras model file")
}

// decode parses JSON keeping numbers exact (json.Number).
func decode(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("not valid JSON at byte %d: %w", se.Offset, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("not valid JSON: it ends early, at byte %d", len(data))
		}
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("not valid JSON: data after the top-level value at byte %d", dec.InputOffset())
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a JSON object at the top, got %s", describe(v))
	}
	return root, nil
}

// locate finds the Keras model config: the root itself (to_json), under
// modelTopology (TensorFlow.js), under modelTopology.model_config or
// model_config (converter and HDF5-attribute dumps).
func locate(root map[string]any) (source, error) {
	var src source
	top := root
	if v, ok := root["modelTopology"]; ok {
		if f, _ := root["format"].(string); f == "graph-model" {
			return src, unsupportedError("a TensorFlow.js graph model holds ops, not Keras layers; convert the Keras model as a layers model")
		}
		t, ok := v.(map[string]any)
		if !ok {
			return src, fmt.Errorf("modelTopology: want an object, got %s", describe(v))
		}
		top = t
		src.training = append(src.training, root["trainingConfig"], root["training_config"])
		src.manifest = root["weightsManifest"]
	}
	src.model = top
	if v, ok := top["model_config"]; ok {
		mc, ok := v.(map[string]any)
		if !ok {
			return src, fmt.Errorf("model_config: want an object, got %s", describe(v))
		}
		src.model = mc
	}
	src.training = append(src.training, top["training_config"], src.model["training_config"],
		src.model["compile_config"], root["compile_config"])
	return src, nil
}

// sequentialConfig returns the model's name, its layer list and its config
// fields (empty for a bare list).
func sequentialConfig(model map[string]any) (string, []any, *fields, error) {
	empty := &fields{m: map[string]any{}}
	class, ok := model["class_name"].(string)
	if !ok {
		return "", nil, nil, errors.New("no Keras model config: want {\"class_name\": \"Sequential\", \"config\": ...} (model.to_json()) or a TensorFlow.js model.json with modelTopology")
	}
	if class != "Sequential" {
		return "", nil, nil, unsupportedError(fmt.Sprintf("model class %s: only Sequential models are read (a %s model's layers form a graph, not a stack)", class, class))
	}
	switch c := model["config"].(type) {
	case []any: // Keras 2.0: the config is the layer list
		return "sequential", c, empty, nil
	case map[string]any:
		f := &fields{m: c}
		name := f.str("name", "sequential")
		if dt := dtypeName(f); dt != "" && dt != "float32" {
			f.unsupported("model dtype %s is not supported: headroom reads float32 models and plans precision itself", dt)
		}
		layers, ok := c["layers"].([]any)
		if !ok {
			f.fail("config.layers: want a list of layers, got %s", describe(c["layers"]))
		}
		if f.err != nil {
			return "", nil, nil, f.err
		}
		return name, layers, f, nil
	}
	return "", nil, nil, fmt.Errorf("config: want an object or a list of layers, got %s", describe(model["config"]))
}

// entries reads the class, name and config of each layer.
func (p *parser) entries(list []any) ([]*entry, error) {
	if len(list) == 0 {
		return nil, errors.New("the model has no layers")
	}
	seen := map[string]int{}
	out := make([]*entry, 0, len(list))
	for i, raw := range list {
		lm, ok := raw.(map[string]any)
		if !ok {
			return nil, p.layerErr(i, "", fmt.Errorf("want an object with class_name and config, got %s", describe(raw)))
		}
		class, ok := lm["class_name"].(string)
		if !ok {
			return nil, p.layerErr(i, "", fmt.Errorf("class_name: want a string, got %s", describe(lm["class_name"])))
		}
		conf, ok := lm["config"].(map[string]any)
		if !ok {
			return nil, p.layerErr(i, "", fmt.Errorf("config: want an object, got %s", describe(lm["config"])))
		}
		e := &entry{index: i, written: class, class: class, f: &fields{m: conf}, raw: lm}
		if a, ok := aliases[class]; ok {
			e.class = a
		}
		e.name = e.f.str("name", "")
		if e.name == "" {
			e.name = fmt.Sprintf("%s_%d", snake(e.class), i)
		}
		if e.f.err != nil {
			return nil, p.layerErr(i, "", e.f.err)
		}
		if !isSupported(e.class) {
			return nil, p.layerErr(i, e.name, unsupportedError(fmt.Sprintf("class %s is not supported; supported: %s",
				class, strings.Join(Supported, ", "))))
		}
		if j, dup := seen[e.name]; dup {
			return nil, p.layerErr(i, e.name, fmt.Errorf("name %q is already used by layer %d; nn names weights by layer", e.name, j))
		}
		seen[e.name] = i
		if e.class == "InputLayer" && i > 0 {
			return nil, p.layerErr(i, e.name, errors.New("an InputLayer may only come first in a Sequential model"))
		}
		if dt := dtypeName(e.f); e.class != "InputLayer" && dt != "" && dt != "float32" {
			e.f.unsupported("dtype %s is not supported: headroom reads float32 models and plans precision itself", dt)
		}
		if e.f.err != nil {
			return nil, p.layerErr(i, e.name, e.f.err)
		}
		out = append(out, e)
	}
	return out, nil
}

func isSupported(class string) bool {
	for _, s := range Supported {
		if s == class {
			return true
		}
	}
	return false
}

func firstLayer(entries []*entry) *entry {
	if entries[0].class == "InputLayer" && len(entries) > 1 {
		return entries[1]
	}
	return entries[0]
}
