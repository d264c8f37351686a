package keras

import (
	"archive/zip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/internal/hdf5"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// WriteArchive writes a Keras 3 .keras archive to path, atomically:
// config.json, metadata.json and model.weights.h5 with each layer's
// variables at layers/<snake_case(class)>[_N]/vars/<i> in Keras' order.
// The config is from's own when the model was read from a Keras 3 config
// (from may be nil), else written from model, a Sequential of layers with
// Keras counterparts (Dense, Conv2D, pooling, Flatten, Dropout,
// BatchNormalization, ...). weight returns a variable's value.
func WriteArchive(path string, model nn.Model, from *Model, weight func(name string) (tensor.Tensor, bool)) error {
	config, err := archiveConfig(model, from)
	if err != nil {
		return &Error{File: path, Index: -1, Err: fmt.Errorf("cannot write a .keras archive: %w", err)}
	}
	root, err := modelOf(config)
	if err != nil {
		return &Error{File: path, Index: -1, Err: err}
	}
	declared, err := weightShapes(model)
	if err != nil {
		return &Error{File: path, Index: -1, Err: err}
	}
	w := hdf5.NewWriter()
	ww := &weightWriter{declared: declared, weight: weight, done: map[string]bool{}}
	top := w.Root()
	top.Group("vars").SetAttr("name", nameOf(root))
	if err := ww.container(top, layerList(root), ""); err != nil {
		return &Error{File: path, Index: -1, Err: err}
	}
	for name := range declared {
		if !ww.done[name] {
			return &Error{File: path, Index: -1, Err: fmt.Errorf("variable %s belongs to no layer of the config", name)}
		}
	}
	h5, err := w.Bytes()
	if err != nil {
		return &Error{File: path, Index: -1, Err: err}
	}
	meta, _ := json.Marshal(map[string]string{"keras_version": "3.0.0", "date_saved": time.Now().UTC().Format("2006-01-02@15:04:05"),
		"saved_by": "headroom"})
	err = atomicfile.WriteFile(atomicfile.OS, path, 0o666, func(out io.Writer) error {
		zw := zip.NewWriter(out)
		for _, m := range []struct {
			name string
			data []byte
		}{{"metadata.json", meta}, {"config.json", config}, {"model.weights.h5", h5}} {
			fw, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: zip.Store, Modified: time.Now()})
			if err != nil {
				return err
			}
			if _, err := fw.Write(m.data); err != nil {
				return err
			}
		}
		return zw.Close()
	})
	if err != nil {
		return &Error{File: path, Index: -1, Err: err}
	}
	return nil
}

// CheckArchive reports whether WriteArchive can write model (read from
// from, which may be nil): an error naming why not, before any training.
func CheckArchive(model nn.Model, from *Model) error {
	_, err := archiveConfig(model, from)
	return err
}

func nameOf(model map[string]any) string {
	if c, ok := model["config"].(map[string]any); ok {
		if n, ok := c["name"].(string); ok {
			return n
		}
	}
	return "model"
}

// archiveConfig returns the config.json to write: from's Keras 3 config,
// or one written from model.
func archiveConfig(model nn.Model, from *Model) ([]byte, error) {
	if from != nil && from.File != nil && from.File.Config != nil {
		if src, err := modelOf(from.File.Config); err == nil {
			if _, keras3 := src["module"]; keras3 {
				return json.Marshal(src)
			}
		}
	}
	seq, ok := model.(*nn.Sequential)
	if !ok {
		return nil, fmt.Errorf("a %T: .keras configs are written for Sequential models and for models read from a Keras 3 config (save it as .safetensors)", model)
	}
	return writeSequentialConfig(seq)
}

// kerasLayer is one layer of a Keras 3 config.
func kerasLayer(class string, config map[string]any) map[string]any {
	config["trainable"] = true
	config["dtype"] = "float32"
	return map[string]any{"module": "keras.layers", "class_name": class, "config": config, "registered_name": nil}
}

func writeSequentialConfig(m *nn.Sequential) ([]byte, error) {
	batch := []any{nil}
	for _, d := range m.InputShape {
		batch = append(batch, d)
	}
	dtype := "float32"
	if m.InputType() != tensor.Float32 {
		dtype = m.InputType().String()
	}
	in := kerasLayer("InputLayer", map[string]any{"batch_shape": batch, "name": "input_layer", "sparse": false})
	in["config"].(map[string]any)["dtype"] = dtype
	layers := []any{in}
	for i, l := range m.Layers {
		kl, err := layerConfig(l)
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i, l.Name(), err)
		}
		layers = append(layers, kl)
	}
	name := m.Name
	if name == "" {
		name = "sequential"
	}
	return json.Marshal(map[string]any{"module": "keras", "class_name": "Sequential", "registered_name": nil,
		"config":       map[string]any{"name": name, "trainable": true, "dtype": "float32", "layers": layers},
		"build_config": map[string]any{"input_shape": batch}})
}

func activationName(a string) string {
	if a == "" {
		return "linear"
	}
	return a
}

func padName(same bool) string {
	if same {
		return "same"
	}
	return "valid"
}

func or2(v [2]int, def int) []int {
	if v == [2]int{} {
		return []int{def, def}
	}
	return []int{v[0], v[1]}
}

// layerConfig writes an nn layer as the Keras 3 layer it maps from.
func layerConfig(l nn.Layer) (map[string]any, error) {
	switch l := l.(type) {
	case *nn.Dense:
		return kerasLayer("Dense", map[string]any{"name": l.LayerName, "units": l.Units, "activation": activationName(l.Activation), "use_bias": !l.NoBias}), nil
	case *nn.Conv2D:
		groups := max(l.Groups, 1)
		return kerasLayer("Conv2D", map[string]any{"name": l.LayerName, "filters": l.Filters, "kernel_size": []int{l.Kernel[0], l.Kernel[1]},
			"strides": or2(l.Strides, 1), "padding": padName(l.Same), "data_format": "channels_last", "dilation_rate": or2(l.DilationRate, 1),
			"groups": groups, "activation": activationName(l.Activation), "use_bias": !l.NoBias}), nil
	case *nn.Pool2D:
		class := "AveragePooling2D"
		if l.Max {
			class = "MaxPooling2D"
		}
		strides := any(nil)
		if l.Strides != [2]int{} {
			strides = []int{l.Strides[0], l.Strides[1]}
		}
		return kerasLayer(class, map[string]any{"name": l.LayerName, "pool_size": []int{l.Pool[0], l.Pool[1]}, "strides": strides,
			"padding": padName(l.Same), "data_format": "channels_last"}), nil
	case *nn.Flatten:
		return kerasLayer("Flatten", map[string]any{"name": l.LayerName, "data_format": "channels_last"}), nil
	case *nn.Dropout:
		return kerasLayer("Dropout", map[string]any{"name": l.LayerName, "rate": l.Rate, "seed": nil, "noise_shape": nil}), nil
	case *nn.BatchNormalization:
		mom, eps := l.Momentum, l.Epsilon
		if mom == 0 {
			mom = 0.99
		}
		if eps == 0 {
			eps = 1e-3
		}
		return kerasLayer("BatchNormalization", map[string]any{"name": l.LayerName, "axis": -1, "momentum": mom, "epsilon": eps,
			"center": !l.NoCenter, "scale": !l.NoScale}), nil
	case *nn.LayerNormalization:
		eps := l.Epsilon
		if eps == 0 {
			eps = 1e-3
		}
		return kerasLayer("LayerNormalization", map[string]any{"name": l.LayerName, "axis": -1, "epsilon": eps, "center": true, "scale": true}), nil
	case *nn.Activation:
		return kerasLayer("Activation", map[string]any{"name": l.LayerName, "activation": activationName(l.Fn)}), nil
	case *nn.Reshape:
		return kerasLayer("Reshape", map[string]any{"name": l.LayerName, "target_shape": l.TargetShape}), nil
	case *nn.GlobalAveragePooling2D:
		return kerasLayer("GlobalAveragePooling2D", map[string]any{"name": l.LayerName, "data_format": "channels_last", "keepdims": false}), nil
	case *nn.Embedding:
		return kerasLayer("Embedding", map[string]any{"name": l.LayerName, "input_dim": l.InputDim, "output_dim": l.OutputDim}), nil
	}
	return nil, fmt.Errorf("nn layer %T has no Keras config writer yet (Dense, Conv2D, pooling, Flatten, Dropout, BatchNormalization, LayerNormalization, Activation, Reshape, GlobalAveragePooling2D, Embedding)", l)
}

// weightWriter writes variables in Keras 3's layout: the inverse of
// weightReader.container.
type weightWriter struct {
	declared map[string]tensor.Shape
	weight   func(name string) (tensor.Tensor, bool)
	done     map[string]bool
}

// subLayers are the groups Keras 3 keeps a layer's sub-layers in, by
// class: the nn prefix below the layer's that each holds ("" the layer's).
var subLayers = map[string][][2]string{
	"LSTM": {{"cell", ""}}, "GRU": {{"cell", ""}}, "SimpleRNN": {{"cell", ""}},
	"TimeDistributed":    {{"layer", ""}},
	"MultiHeadAttention": {{"key_dense", "key"}, {"output_dense", "attention_output"}, {"query_dense", "query"}, {"value_dense", "value"}},
}

func (w *weightWriter) container(g *hdf5.WGroup, layers []configLayer, prefix string) error {
	counts := map[string]int{}
	c := g.Group("layers")
	for _, l := range layers {
		if strings.HasPrefix(l.module, "keras.src.ops") || l.class == "InputLayer" {
			continue
		}
		key := kerasSnake(l.class)
		name := key
		if n := counts[key]; n > 0 {
			name = fmt.Sprintf("%s_%d", key, n)
		}
		counts[key]++
		lg := c.Group(name)
		if isModel(l.class) {
			lg.Group("vars").SetAttr("name", l.name)
			if err := w.container(lg, layerList(l.raw), prefix+l.name+"/"); err != nil {
				return err
			}
			continue
		}
		target := prefix + l.name
		lg.Group("vars").SetAttr("name", l.name)
		subs, ok := subLayers[l.class]
		if l.class == "Bidirectional" {
			subs = [][2]string{{"backward_layer", strings.TrimPrefix(w.dir(target, "backward"), target+"/")},
				{"forward_layer", strings.TrimPrefix(w.dir(target, "forward"), target+"/")}}
			ok = true
		}
		if !ok {
			if err := w.vars(lg.Group("vars"), target); err != nil {
				return err
			}
			continue
		}
		for _, s := range subs {
			sg := lg.Group(s[0])
			t := target
			if s[1] != "" {
				t = target + "/" + s[1]
			}
			if l.class == "Bidirectional" {
				sg = sg.Group("cell")
			}
			sg.Group("vars")
			if err := w.vars(sg.Group("vars"), t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *weightWriter) dir(target, dir string) string {
	return (&weightReader{declared: w.declared}).direction(target, dir)
}

// vars writes the variables named prefix/<leaf> as 0, 1, ... in Keras'
// order.
func (w *weightWriter) vars(g *hdf5.WGroup, prefix string) error {
	names := (&weightReader{declared: w.declared}).direct(prefix)
	for i, name := range names {
		t, ok := w.weight(name)
		if !ok {
			return fmt.Errorf("no value for variable %s", name)
		}
		if t.DType() != tensor.Float32 {
			return fmt.Errorf("variable %s is %s: float32 variables are written", name, t.DType())
		}
		shape := make([]int64, len(t.Shape()))
		for k, d := range t.Shape() {
			shape[k] = int64(d)
		}
		if len(shape) == 0 {
			shape = nil
		}
		v := t.Float32s()
		b := make([]byte, 4*len(v))
		for k, x := range v {
			binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
		}
		if err := g.Dataset(fmt.Sprint(i), "float32", shape, b); err != nil {
			return err
		}
		w.done[name] = true
	}
	return nil
}
