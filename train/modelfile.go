package train

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train/checkpoint"
)

// A model file is a safetensors file holding a model's weights (every
// variable of the model: kernels, biases, moving statistics; no optimizer
// state, which checkpoints keep) and, in its metadata, what it takes to
// use them alone:
//
//	headroom.format         "model", the file's kind
//	headroom.architecture   the model as nn.MarshalModel writes it
//	headroom.registered     {"name", "input", "classes"}: the nn.NewModel
//	                        call that builds it, for a model MarshalModel
//	                        cannot write (Go code)
//	headroom.preprocessing  the data.Preprocessing of the training data
//	                        (class names, input shape, scaling, ...)
//	headroom.loss           the loss it was trained with (evaluate uses it)
//
// Keras' model.save keeps the same three things (architecture, weights,
// compile configuration) in one file.

// Metadata keys of a model file.
const (
	KeyFormat        = "headroom.format"
	KeyArchitecture  = "headroom.architecture"
	KeyRegistered    = "headroom.registered"
	KeyPreprocessing = "headroom.preprocessing"
	KeyLoss          = "headroom.loss"
	modelFileFormat  = "model"
)

// Registered names the nn.NewModel call that builds a model.
type Registered struct {
	Name    string       `json:"name"`
	Input   tensor.Shape `json:"input"`
	Classes int          `json:"classes"`
}

// Metadata keys of the files language models were saved in before model
// files held them (the model's name, window and vocabulary): LoadModel
// reads those files as a registered model.
const (
	KeySeqModel   = "headroom.seq.model"
	KeySeqContext = "headroom.seq.context"
	KeySeqVocab   = "headroom.seq.vocab"
)

// ModelFile is a model loaded from a model file: the model, its weights by
// variable name, and how its data is read.
type ModelFile struct {
	Path  string
	Model nn.Model
	// Registered is the nn.NewModel call that builds the model, when the
	// file names one (a model written as Go code; the language models).
	Registered    *Registered
	Weights       map[string]tensor.Tensor
	Preprocessing data.Preprocessing
	Loss          nn.Loss // nil when the file names none
	Meta          map[string]string
}

// Weight returns the weight called name (for export and inference).
func (f *ModelFile) Weight(name string) (tensor.Tensor, bool) {
	t, ok := f.Weights[name]
	return t, ok
}

// SaveModel writes the model's weights, its architecture, its loss and
// pre (how its data is read) to path as one safetensors file, atomically.
// When the model cannot be written as JSON (a ModelFunc), reg names the
// registered model that rebuilds it; otherwise reg may be nil. In a
// data-parallel run every process calls it and rank 0 writes.
func (t *Trainer) SaveModel(path string, pre data.Preprocessing, reg *Registered) error {
	meta := map[string]string{KeyFormat: modelFileFormat, "optimizer": t.cfg.Optimizer.Name()}
	arch, err := nn.MarshalModel(t.cfg.Model)
	switch {
	case err == nil:
		meta[KeyArchitecture] = string(arch)
	case reg != nil:
	default:
		return fmt.Errorf("train: saving the model to %s: %w", path, err)
	}
	if reg != nil {
		b, err := json.Marshal(reg)
		if err != nil {
			return fmt.Errorf("train: saving the model to %s: %w", path, err)
		}
		meta[KeyRegistered] = string(b)
	}
	b, err := json.Marshal(pre)
	if err != nil {
		return fmt.Errorf("train: saving the model to %s: %w", path, err)
	}
	meta[KeyPreprocessing] = string(b)
	meta[KeyLoss] = lossName(t.cfg.Loss)
	var entries []checkpoint.Entry
	for _, v := range t.engine.Variables() {
		if v.Role != graph.RoleParam {
			continue
		}
		x, err := t.wholeValue(v) // every process takes part in a gather
		if err != nil {
			return err
		}
		entries = append(entries, checkpoint.Entry{Name: v.Name, Tensor: x})
	}
	if t.cfg.ranks() > 1 && t.cfg.Comm.Rank() != 0 {
		return nil
	}
	if err := checkpoint.Save(path, entries, meta); err != nil {
		return fmt.Errorf("train: saving the model: %w", err)
	}
	return nil
}

// lossName returns the name LoadModel finds the loss by.
func lossName(l nn.Loss) string {
	if w, ok := l.(interface{ Unweighted() nn.Loss }); ok {
		l = w.Unweighted()
	}
	if l == nil {
		return nn.SparseCategoricalCrossentropy{}.Name()
	}
	return l.Name()
}

// LoadModel reads a model file: the model (built from its architecture,
// or by its registered name), its weights and its preprocessing. Every
// weight the model declares must be in the file with its shape. Errors
// name the file.
func LoadModel(path string) (*ModelFile, error) {
	f, err := checkpoint.Load(path)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	legacyText := f.Meta[KeyFormat] == "" && f.Meta[KeySeqModel] != ""
	if f.Meta[KeyFormat] != modelFileFormat && !legacyText {
		return nil, fmt.Errorf("train: %s is not a headroom model file (a checkpoint, or another program's safetensors?): its metadata has no %s=%s", path, KeyFormat, modelFileFormat)
	}
	mf := &ModelFile{Path: path, Weights: map[string]tensor.Tensor{}, Meta: f.Meta}
	if mf.Registered, err = registered(f.Meta, legacyText); err != nil {
		return nil, fmt.Errorf("train: %s: %w", path, err)
	}
	switch {
	case f.Meta[KeyArchitecture] != "":
		if mf.Model, err = nn.LoadModel([]byte(f.Meta[KeyArchitecture])); err != nil {
			return nil, fmt.Errorf("train: %s: %w", path, err)
		}
	case mf.Registered != nil:
		r := mf.Registered
		if mf.Model, err = nn.NewModel(r.Name, r.Input, r.Classes); err != nil {
			return nil, fmt.Errorf("train: %s: %w", path, err)
		}
	default:
		return nil, fmt.Errorf("train: %s has neither %s nor %s in its metadata", path, KeyArchitecture, KeyRegistered)
	}
	if p := f.Meta[KeyPreprocessing]; p != "" {
		if err := json.Unmarshal([]byte(p), &mf.Preprocessing); err != nil {
			return nil, fmt.Errorf("train: %s: %s: %w", path, KeyPreprocessing, err)
		}
	}
	if l := f.Meta[KeyLoss]; l != "" {
		if mf.Loss, err = nn.LossByName(l); err != nil {
			return nil, fmt.Errorf("train: %s: %w", path, err)
		}
	}
	for _, e := range f.Entries {
		mf.Weights[e.Name] = e.Tensor
	}
	if err := mf.check(); err != nil {
		return nil, err
	}
	return mf, nil
}

// registered reads the registered model a file's metadata names: its
// KeyRegistered, or a language model's legacy keys.
func registered(meta map[string]string, legacyText bool) (*Registered, error) {
	if legacyText {
		ctx, err1 := strconv.Atoi(meta[KeySeqContext])
		vocab, err2 := strconv.Atoi(meta[KeySeqVocab])
		if err1 != nil || err2 != nil || ctx < 1 || vocab < 1 {
			return nil, fmt.Errorf("the language model's %s or %s is not a positive number", KeySeqContext, KeySeqVocab)
		}
		return &Registered{Name: meta[KeySeqModel], Input: tensor.Shape{ctx}, Classes: vocab}, nil
	}
	if meta[KeyRegistered] == "" {
		return nil, nil
	}
	var r Registered
	if err := json.Unmarshal([]byte(meta[KeyRegistered]), &r); err != nil {
		return nil, fmt.Errorf("%s: %w", KeyRegistered, err)
	}
	return &r, nil
}

// check makes sure the file holds every weight the model declares, with
// its dtype and shape.
func (f *ModelFile) check() error {
	spec, err := step.Describe(step.Config{Model: f.Model})
	if err != nil {
		return fmt.Errorf("train: %s: the model does not build: %w", f.Path, err)
	}
	var missing []string
	for _, w := range spec.Weights {
		x, ok := f.Weights[w.Name]
		switch {
		case !ok:
			missing = append(missing, w.Name)
		case x.DType() != w.DType || !x.Shape().Equal(w.Shape):
			missing = append(missing, fmt.Sprintf("%s (the file has %s%v, the model needs %s%v)", w.Name, x.DType(), x.Shape(), w.DType, w.Shape))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("train: %s lacks weights the model needs: %s", f.Path, strings.Join(missing, ", "))
	}
	return nil
}

// LoadWeights sets the model's weights (not the optimizer state) from a
// model file or a checkpoint at path, as Keras' model.load_weights: every
// weight of the model must be in the file with its shape; other tensors in
// the file are ignored. In a data-parallel run every process loads.
func (t *Trainer) LoadWeights(path string) error {
	f, err := checkpoint.Load(path)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	for _, v := range t.engine.Variables() {
		if v.Role != graph.RoleParam {
			continue
		}
		src, ok := f.Get(v.Name)
		if !ok {
			return fmt.Errorf("train: %s has no weight %q", path, v.Name)
		}
		if src.DType() != v.DType || !src.Shape().Equal(v.Shape) {
			return fmt.Errorf("train: %s holds %q as %s%v, the model needs %s%v", path, v.Name, src.DType(), src.Shape(), v.DType, v.Shape)
		}
		if err := update(v, func(x tensor.Tensor) error { copy(x.Bytes(), src.Bytes()); return nil }); err != nil {
			return err
		}
	}
	return nil
}
