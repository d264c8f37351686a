package keras

import (
	"errors"
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// sequential reads a Sequential model config into an nn.Sequential.
func (p *parser) sequential(model map[string]any) (*Model, error) {
	name, list, mf, err := sequentialConfig(model)
	if err != nil {
		return nil, err
	}
	entries, err := p.entries(list)
	if err != nil {
		return nil, err
	}
	input, inputDType, err := p.inputShape(entries, model, mf, true)
	if err != nil {
		return nil, err
	}
	trainable := mf.boolean("trainable", true)
	if mf.err != nil {
		return nil, fmt.Errorf("config.%w", mf.err)
	}
	m := &Model{Name: name}
	seq := &nn.Sequential{Name: name, InputShape: tensor.Shape(input)}
	cur := input
	for _, e := range entries {
		if e.class == "InputLayer" {
			m.Layers = append(m.Layers, LayerInfo{Name: e.name, Class: e.written, Output: tensor.Shape(cur).Clone(),
				Outputs: []tensor.Shape{tensor.Shape(cur).Clone()}, Calls: 1})
			continue
		}
		if err := p.checkBuildInput(e, cur); err != nil {
			return nil, err
		}
		layerTrainable := e.f.boolean("trainable", true)
		if e.f.err != nil {
			return nil, p.layerErr(e.index, e.name, e.f.err)
		}
		frozen := !(trainable && layerTrainable)
		if isModel(e.class) {
			nm, err := p.nestedModel(e, "", frozen)
			if err != nil {
				return nil, err
			}
			if e.m, err = nm.call(p, e, [][]int{cur}, nil); err != nil {
				return nil, err
			}
			if len(e.m.outs) != 1 {
				return nil, p.layerErr(e.index, e.name, fmt.Errorf("the nested model gives %d outputs: a layer of a Sequential model gives one", len(e.m.outs)))
			}
			e.m.out = e.m.outs[0]
			e.m.layer = asLayer{nm.g.fn}
		} else {
			e.m = mapLayer(e.class, e.name, e.f, callIn{shapes: [][]int{cur}})
			if e.f.err != nil {
				return nil, p.layerErr(e.index, e.name, e.f.err)
			}
			if len(e.m.outs) != 1 {
				return nil, p.layerErr(e.index, e.name, fmt.Errorf("%s gives %d outputs: a layer of a Sequential model gives one", e.written, len(e.m.outs)))
			}
			if frozen {
				e.m.layer = freeze(e.m.layer, e.class)
			}
			if ml, ok := e.m.layer.(nn.MultiLayer); ok {
				if _, isLayer := e.m.layer.(nn.Layer); !isLayer {
					e.m.layer = asLayer{ml}
				}
			}
		}
		info := LayerInfo{Name: e.name, Class: e.written, Output: tensor.Shape(e.m.out).Clone(),
			Outputs: []tensor.Shape{tensor.Shape(e.m.out).Clone()}, Calls: 1, Params: e.m.params}
		if !frozen {
			info.TrainableParams = e.m.params - e.m.nonTrainable
		}
		if m.Params > maxElements-info.Params {
			return nil, p.layerErr(e.index, e.name, errors.New("the model's parameters exceed 2^40"))
		}
		m.Params += info.Params
		m.TrainableParams += info.TrainableParams
		m.Layers = append(m.Layers, info)
		seq.Layers = append(seq.Layers, e.m.layer.(nn.Layer))
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
	m.OutputNames = []string{entries[len(entries)-1].name}
	if err := p.crossCheck(m, entries); err != nil {
		return nil, err
	}
	return m, nil
}

// sequentialConfig returns the model's name, its layer list and its config
// fields (empty for a bare list).
func sequentialConfig(model map[string]any) (string, []any, *fields, error) {
	empty := &fields{m: map[string]any{}}
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

// entries reads the class, name and config of each layer of a Sequential.
func (p *parser) entries(list []any) ([]*entry, error) {
	if len(list) == 0 {
		return nil, errors.New("the model has no layers")
	}
	seen := map[string]int{}
	out := make([]*entry, 0, len(list))
	for i, raw := range list {
		e, err := p.readEntry(i, raw)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[e.name]; dup {
			return nil, p.layerErr(i, e.name, fmt.Errorf("name %q is already used by layer %d; nn names weights by layer", e.name, j))
		}
		seen[e.name] = i
		if e.op {
			return nil, p.layerErr(i, e.name, unsupportedError("an operation node (keras.src.ops) in a Sequential model: Keras writes them in functional models only"))
		}
		if e.class == "InputLayer" && i > 0 {
			return nil, p.layerErr(i, e.name, errors.New("an InputLayer may only come first in a Sequential model"))
		}
		out = append(out, e)
	}
	return out, nil
}

func firstLayer(entries []*entry) *entry {
	if entries[0].class == "InputLayer" && len(entries) > 1 {
		return entries[1]
	}
	return entries[0]
}

// asLayer makes a one-input, one-output model (a nested model) a layer of
// an nn.Sequential.
type asLayer struct{ m nn.MultiLayer }

func (a asLayer) Name() string { return a.m.Name() }
func (a asLayer) Forward(c *nn.Context, x *graph.Node) *graph.Node {
	return a.m.ForwardN(c, []*graph.Node{x})[0]
}
