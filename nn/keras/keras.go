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
	// maxLayers bounds the layers of a file, nested models included
	// (ResNet152 has about 500).
	maxLayers = 100000
	// maxDepth bounds the nesting of models and of configs stored as JSON
	// strings.
	maxDepth = 32
)

// Model is a Keras model read from its config: a Sequential stack or a
// functional graph of layers, mapped onto nn.
type Model struct {
	Name string
	// Sequential is the model in headroom's vocabulary when the file holds
	// a Sequential model: one nn layer per Keras layer but the InputLayer,
	// named as in the file, with the input shape the file gives.
	Sequential *nn.Sequential
	// Functional is the model when the file holds a functional one (Keras'
	// Model or Functional class): its inputs are the file's input layers,
	// its outputs its output layers, in the file's order.
	Functional *nn.Functional
	// Layers lists every Keras layer of the file in order, the InputLayers
	// included; a nested model is one layer.
	Layers []LayerInfo
	// Params is model.summary()'s "Total params": trainable and not.
	Params int
	// TrainableParams is "Trainable params": Params less BatchNormalization's
	// moving statistics and the weights of layers marked trainable=false.
	TrainableParams int
	// OutputNames names the model's outputs: the output layers' names.
	OutputNames []string
	// Loss is the training config's loss of the first output in Keras'
	// snake_case ("categorical_crossentropy"), or "" when the file has none.
	Loss string
	// Training is what the file's training_config or compile_config asks
	// for (optimizer, losses, loss weights); nil when it has none.
	Training *Training
	// File is the file the model was read from (Load, OpenFile): with
	// its weights, when it holds them (File.HasWeights, ReadFileWeights).
	File *File
}

// NN returns the model as an nn.Model: Sequential or Functional.
func (m *Model) NN() nn.Model {
	if m.Sequential != nil {
		return m.Sequential
	}
	return m.Functional
}

// NonTrainableParams is model.summary()'s "Non-trainable params".
func (m *Model) NonTrainableParams() int { return m.Params - m.TrainableParams }

// Inputs returns the model's inputs (name, per-example shape, dtype).
func (m *Model) Inputs() []nn.Input { return m.NN().Inputs() }

// LayerInfo is one Keras layer as model.summary() shows it.
type LayerInfo struct {
	Name   string
	Class  string       // Keras class name as written ("Conv2D")
	Output tensor.Shape // per example, without the batch dimension: the first call's first output
	// Outputs are the first call's outputs (one for most layers).
	Outputs []tensor.Shape
	// Calls is how many times the model calls the layer (a shared layer
	// more than once); its summary row then shows "multiple" as Keras'.
	Calls int
	// Inbound lists the tensors of each call as Keras' summary's
	// "Connected to" column writes them ("conv2d[0][0]").
	Inbound         []string
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
// problem is in one layer, the layer's index in its model's layer list and
// its name (a nested model's layer is named "outer/inner").
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

// Load reads a Keras model file: what model.to_json() writes (Keras 2
// and Keras 3 keys, Sequential and functional models), a TensorFlow.js
// layers-model model.json (the Keras config under
// modelTopology.model_config, or modelTopology itself), Keras 2.0-era files
// whose "config" is a bare list of layers, configs stored as a JSON string
// inside JSON, a Keras 3 .keras archive and a legacy full-model .h5 (with
// their weights: Model.File), told apart by their content (OpenFile). opts
// fix what the file leaves unknown (WithInputShape, WithSeq).
func Load(path string, opts ...Option) (*Model, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	return f.Model(opts...)
}

// LoadWithConfig reads the weights-only file at weightsPath (HDF5 from
// save_weights, or a .keras archive) with the architecture of the config
// at configPath.
func LoadWithConfig(weightsPath, configPath string, opts ...Option) (*Model, error) {
	f, err := OpenFile(weightsPath)
	if err != nil {
		return nil, err
	}
	if err := f.WithConfig(configPath); err != nil {
		return nil, err
	}
	return f.Model(opts...)
}

// openPath opens path, an *Error naming it when it cannot.
func openPath(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &Error{File: path, Index: -1, Err: fmt.Errorf("cannot open: %w", err)}
	}
	return f, nil
}

func readFile(path string) ([]byte, error) {
	f, err := openPath(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, &Error{File: path, Index: -1, Err: fmt.Errorf("cannot read: %w", err)}
	}
	if len(data) > maxFileBytes {
		return nil, &Error{File: path, Index: -1, Err: fmt.Errorf("larger than %d MiB: not a model config", maxFileBytes>>20)}
	}
	return data, nil
}

// Parse reads a model config from data; name is the file name that errors
// carry; opts give the sizes of dimensions the file leaves unknown
// (WithInputShape, WithSeq). Any malformed input is an *Error, never a
// panic.
func Parse(data []byte, name string, opts ...Option) (*Model, error) {
	p := &parser{file: name}
	for _, o := range opts {
		o(&p.shapes.opts)
	}
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
	file   string
	layers int  // layers read so far, nested models included
	depth  int  // models nested around the one being read
	keras2 bool // written by Keras 2 or TensorFlow.js
	shapes inputShapes
}

func (p *parser) layerErr(i int, name string, err error) error {
	return &Error{File: p.file, Index: i, Layer: name, Err: err}
}

// source is where the model config sits in the file.
type source struct {
	version  string // keras_version, where the file gives it
	model    map[string]any
	training []any // candidate training/compile configs, first with a loss or optimizer wins
	manifest any   // TensorFlow.js weightsManifest, nil when absent
}

// configOf unpacks and decodes a config file's data and finds the model
// config in it.
func configOf(data []byte) (source, error) {
	data, err := unpack(data)
	if err != nil {
		return source{}, err
	}
	root, err := decode(data)
	if err != nil {
		return source{}, err
	}
	return locate(root)
}

func (p *parser) parse(data []byte) (*Model, error) {
	src, err := configOf(data)
	if err != nil {
		return nil, err
	}
	if v, ok := src.model["keras_version"].(string); ok && src.version == "" {
		src.version = v
	}
	// Keras 2 and TensorFlow.js (tfjs-layers versions) give a version;
	// Keras 3 writes it beside config.json, in metadata.json
	p.keras2 = src.version != "" && !strings.HasPrefix(src.version, "3")
	class, ok := src.model["class_name"].(string)
	if !ok {
		return nil, errors.New("no Keras model config: want {\"class_name\": \"Sequential\" or \"Functional\", \"config\": ...} (model.to_json()) or a TensorFlow.js model.json with modelTopology")
	}
	var m *Model
	switch class {
	case "Sequential":
		m, err = p.sequential(src.model)
	case "Model", "Functional":
		m, err = p.functional(src.model)
	default:
		return nil, unsupportedError(fmt.Sprintf("model class %s is not supported: headroom reads Sequential and functional (Model, Functional) models; a subclassed model's call() is Python code", class))
	}
	if err != nil {
		return nil, err
	}
	if err := p.shapes.unused(); err != nil {
		return nil, err
	}
	if m.Training, err = readTraining(src.training, m.OutputNames); err != nil {
		return nil, err
	}
	if m.Training != nil && len(m.Training.Losses) > 0 {
		m.Loss = m.Training.Losses[0].Name
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
		return nil, unsupportedError("an HDF5 (.h5) model file: read it from its path (Load), which reads HDF5")
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

// decode parses JSON keeping numbers exact (json.Number). A top-level JSON
// string is decoded again: configs stored as a string inside JSON (HDF5
// attributes dumped as text, json.dumps(model.to_json())).
func decode(data []byte) (map[string]any, error) {
	v, err := decodeValue(data)
	if err != nil {
		return nil, err
	}
	for depth := 0; ; depth++ {
		s, ok := v.(string)
		if !ok {
			break
		}
		if depth >= maxDepth {
			return nil, fmt.Errorf("a JSON string nested more than %d times", maxDepth)
		}
		if v, err = decodeValue([]byte(s)); err != nil {
			return nil, fmt.Errorf("the JSON string at the top: %w", err)
		}
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a JSON object at the top, got %s", describe(v))
	}
	return root, nil
}

func decodeValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("not valid JSON at byte %d: %w", se.Offset, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("not valid JSON: it ends early, at byte %d", len(data))
		}
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("not valid JSON: data after the top-level value at byte %d", dec.InputOffset())
	}
	return v, nil
}

// object returns v as a JSON object, decoding a JSON string that holds one
// (a config stored as text inside the file).
func object(v any, what string) (map[string]any, error) {
	if s, ok := v.(string); ok {
		d, err := decode([]byte(s))
		if err != nil {
			return nil, fmt.Errorf("%s (a JSON string): %w", what, err)
		}
		return d, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want an object, got %s", what, describe(v))
	}
	return m, nil
}

// locate finds the Keras model config: the root itself (to_json), under
// modelTopology (TensorFlow.js), under modelTopology.model_config or
// model_config (converter and HDF5-attribute dumps). Each may be a JSON
// string holding the object.
func locate(root map[string]any) (source, error) {
	var src source
	top := root
	if v, ok := root["modelTopology"]; ok {
		if f, _ := root["format"].(string); f == "graph-model" {
			return src, unsupportedError("a TensorFlow.js graph model holds ops, not Keras layers; convert the Keras model as a layers model")
		}
		t, err := object(v, "modelTopology")
		if err != nil {
			return src, err
		}
		top = t
		src.training = append(src.training, root["trainingConfig"], root["training_config"])
		src.manifest = root["weightsManifest"]
	}
	src.model = top
	for _, m := range []map[string]any{root, top} {
		if v, ok := m["keras_version"].(string); ok && src.version == "" {
			src.version = v
		}
	}
	if v, ok := top["model_config"]; ok {
		mc, err := object(v, "model_config")
		if err != nil {
			return src, err
		}
		src.model = mc
	}
	src.training = append(src.training, top["training_config"], src.model["training_config"],
		src.model["compile_config"], root["compile_config"])
	for i, t := range src.training {
		if s, ok := t.(string); ok { // HDF5 attributes keep training_config as text
			if d, err := decode([]byte(s)); err == nil {
				src.training[i] = d
			}
		}
	}
	return src, nil
}

// entry is one element of a model's layer list, read but not yet mapped.
type entry struct {
	index       int
	class, name string // class in its canonical spelling
	written     string // class as written
	op          bool   // an operation node (keras.src.ops), not a layer
	f           *fields
	raw         map[string]any
	m           mapped
}

// readEntry reads the class, name and config of layer i of a list. In a
// functional model the layer's own "name" key is what inbound nodes refer
// to; the config's "name" is the fallback (and the only one in a
// Sequential).
func (p *parser) readEntry(i int, raw any) (*entry, error) {
	p.layers++
	if p.layers > maxLayers {
		return nil, p.layerErr(i, "", fmt.Errorf("more than %d layers", maxLayers))
	}
	lm, ok := raw.(map[string]any)
	if !ok {
		return nil, p.layerErr(i, "", fmt.Errorf("want an object with class_name and config, got %s", describe(raw)))
	}
	class, ok := lm["class_name"].(string)
	if !ok {
		return nil, p.layerErr(i, "", fmt.Errorf("class_name: want a string, got %s", describe(lm["class_name"])))
	}
	var conf map[string]any
	switch c := lm["config"].(type) {
	case map[string]any:
		conf = c
	case []any:
		if class == "Sequential" { // Keras 2.0: a nested Sequential's config is its layer list
			conf = map[string]any{"layers": c}
			break
		}
		return nil, p.layerErr(i, "", fmt.Errorf("config: want an object, got %s", describe(lm["config"])))
	default:
		return nil, p.layerErr(i, "", fmt.Errorf("config: want an object, got %s", describe(lm["config"])))
	}
	e := &entry{index: i, written: class, class: class, f: &fields{m: conf, keras2: p.keras2}, raw: lm, op: isOperation(lm)}
	if a, ok := aliases[class]; ok && !e.op {
		e.class = a
	}
	if n, ok := lm["name"].(string); ok && n != "" {
		e.name = n
	} else {
		e.name = e.f.str("name", "")
	}
	if e.name == "" {
		e.name = fmt.Sprintf("%s_%d", snake(e.class), i)
	}
	if e.f.err != nil {
		return nil, p.layerErr(i, "", e.f.err)
	}
	if strings.Contains(e.name, "/") {
		return nil, p.layerErr(i, e.name, errors.New("a layer name with \"/\": headroom names weights \"<layer>/<weight>\""))
	}
	if err := refuse(e); err != nil {
		return nil, p.layerErr(i, e.name, err)
	}
	if dt := dtypeName(e.f); e.class != "InputLayer" && dt != "" && dt != "float32" && !sixteenBit[dt] {
		e.f.unsupported("dtype %s is not supported: headroom reads float32 models and plans precision itself", dt)
	}
	if e.f.err != nil {
		return nil, p.layerErr(i, e.name, e.f.err)
	}
	return e, nil
}

// sixteenBit are the dtype policies of layers whose weights a file may
// store in 16 bits: headroom reads them as float32 (the weights
// converted) and plans precision itself (--precision).
var sixteenBit = map[string]bool{"float16": true, "bfloat16": true, "mixed_float16": true, "mixed_bfloat16": true}

// pythonOnly are Keras classes whose work is Python code or a lookup table
// built from data in Python: a config cannot say what they compute.
var pythonOnly = map[string]string{
	"Lambda":             "it runs a Python function",
	"SlicingOpLambda":    "it runs a TensorFlow slicing op called from Python",
	"StringLookup":       "its vocabulary is a lookup table built in Python",
	"IntegerLookup":      "its vocabulary is a lookup table built in Python",
	"TextVectorization":  "its vocabulary and string processing run in Python",
	"Hashing":            "it hashes strings in Python",
	"CategoryEncoding":   "it encodes categories in Python",
	"Discretization":     "its bin boundaries are built in Python",
	"TorchModuleWrapper": "it wraps a PyTorch module",
}

// refuse returns the error for a class headroom cannot map: Python code,
// custom classes, and classes without a layer yet, naming the class.
func refuse(e *entry) error {
	if e.class == "TFOpLambda" {
		if fn := tfOpFunction(e.f); tfOps[fn].class == "" {
			return unsupportedError(fmt.Sprintf("class TFOpLambda of tf.%s is not supported: headroom reads the TensorFlow functions of Python arithmetic, activations, reductions and reshapes; rebuild the model without it", fn))
		}
		return nil
	}
	if e.op {
		if !isSupportedOperation(e.class) {
			mod, _ := e.raw["module"].(string)
			return unsupportedError(fmt.Sprintf("operation %s (%s) is not supported yet; supported operations: %s", e.written, mod, strings.Join(SupportedOperations(), ", ")))
		}
		return nil
	}
	if why, ok := pythonOnly[e.class]; ok {
		return unsupportedError(fmt.Sprintf("class %s is not supported: %s, which cannot run outside Python; rebuild the model without it", e.written, why))
	}
	if reg, _ := e.raw["registered_name"].(string); strings.Contains(reg, ">") && !strings.HasPrefix(reg, "keras") {
		return unsupportedError(fmt.Sprintf("custom class %s (registered as %q) is not supported: its call() is Python code", e.written, reg))
	}
	if mod, _ := e.raw["module"].(string); mod != "" && !strings.HasPrefix(mod, "keras") && !strings.HasPrefix(mod, "tf_keras") {
		return unsupportedError(fmt.Sprintf("custom class %s from module %q is not supported: its call() is Python code", e.written, mod))
	}
	if !isSupported(e.class) && !isModel(e.class) {
		return unsupportedError(fmt.Sprintf("class %s is not supported yet; supported: %s", e.written, strings.Join(Supported, ", ")))
	}
	return nil
}

func isSupported(class string) bool {
	for _, s := range Supported {
		if s == class {
			return true
		}
	}
	return false
}

// isModel reports whether class is a model nested as a layer.
func isModel(class string) bool {
	return class == "Sequential" || class == "Functional" || class == "Model"
}
