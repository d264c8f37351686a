package nn

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/headroom-ml/headroom/tensor"
)

// functionalJSON is a Functional model as MarshalModel writes it: its
// inputs, its layers (each once, in the order they are first called),
// the calls in an order where each follows its inputs, and its outputs.
type functionalJSON struct {
	ModelName string      `json:"ModelName"`
	Inputs    []inputJSON `json:"inputs"`
	Layers    []*typed    `json:"layers"`
	Calls     []callJSON  `json:"calls"`
	Outputs   []refJSON   `json:"outputs"`
}

type inputJSON struct {
	Name  string       `json:"name"`
	Shape tensor.Shape `json:"shape"`
	DType string       `json:"dtype"`
}

// callJSON is one call: layer Layer (an index into Layers) on Inputs,
// making Outputs values.
type callJSON struct {
	Layer   int       `json:"layer"`
	Inputs  []refJSON `json:"inputs"`
	Outputs int       `json:"outputs"`
}

// refJSON names a symbolic tensor: model input Input, or output Index of
// call Call.
type refJSON struct {
	Input *int `json:"input,omitempty"`
	Call  *int `json:"call,omitempty"`
	Index int  `json:"index,omitempty"`
}

func encodeFunctional(m *Functional, path string) (any, error) {
	where := path + "(" + m.ModelName + ")"
	doc := functionalJSON{ModelName: m.ModelName}
	inputIdx := map[*Input]int{}
	for i, t := range m.inputs {
		inputIdx[t.input] = i
		doc.Inputs = append(doc.Inputs, inputJSON{Name: t.input.Name, Shape: t.input.Shape, DType: t.input.Type().String()})
	}
	layerIdx := map[MultiLayer]int{}
	callIdx := map[*call]int{}
	ref := func(t *Tensor) (refJSON, error) {
		if t.input != nil {
			i, ok := inputIdx[t.input]
			if !ok {
				return refJSON{}, fmt.Errorf("nn: %s: input %q is not among the model's inputs", where, t.input.Name)
			}
			return refJSON{Input: &i}, nil
		}
		j, ok := callIdx[t.call]
		if !ok {
			return refJSON{}, fmt.Errorf("nn: %s: layer %s is used before it is called", where, t.call.layer.Name())
		}
		return refJSON{Call: &j, Index: t.Index}, nil
	}
	for j, c := range m.order {
		k, ok := layerIdx[c.layer]
		if !ok {
			k = len(doc.Layers)
			layerIdx[c.layer] = k
			var l any = c.layer
			if s, ok := c.layer.(single); ok {
				l = s.Layer
			}
			tv, err := encodeTyped(reflect.ValueOf(l), fmt.Sprintf("%s.layers[%d]", where, k))
			if err != nil {
				return nil, err
			}
			doc.Layers = append(doc.Layers, tv)
		}
		cj := callJSON{Layer: k, Outputs: len(c.outs)}
		for _, x := range c.inputs {
			r, err := ref(x)
			if err != nil {
				return nil, err
			}
			cj.Inputs = append(cj.Inputs, r)
		}
		callIdx[c] = j
		doc.Calls = append(doc.Calls, cj)
	}
	for _, o := range m.outputs {
		r, err := ref(o)
		if err != nil {
			return nil, err
		}
		doc.Outputs = append(doc.Outputs, r)
	}
	return doc, nil
}

func decodeFunctional(raw json.RawMessage, path string) (*Functional, error) {
	var doc functionalJSON
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("nn: %s: %w", path, err)
	}
	where := path + "(" + doc.ModelName + ")"
	var inputs []*Tensor
	for _, in := range doc.Inputs {
		d, err := tensor.ParseDType(in.DType)
		if err != nil {
			return nil, fmt.Errorf("nn: %s: input %q: %w", where, in.Name, err)
		}
		inputs = append(inputs, NewInput(in.Name, in.Shape, d))
	}
	layers := make([]any, len(doc.Layers))
	for k, tv := range doc.Layers {
		if tv == nil {
			return nil, fmt.Errorf("nn: %s: layer %d is null", where, k)
		}
		raw, err := json.Marshal(tv)
		if err != nil {
			return nil, err
		}
		x, err := decodeTyped(raw, fmt.Sprintf("%s.layers[%d]", where, k))
		if err != nil {
			return nil, err
		}
		switch x.Interface().(type) {
		case Layer, MultiLayer:
		default:
			return nil, fmt.Errorf("nn: %s: layer %d is a %v, not a layer", where, k, x.Type())
		}
		layers[k] = x.Interface()
	}
	var calls [][]*Tensor
	get := func(r refJSON, what string) (*Tensor, error) {
		switch {
		case r.Input != nil && r.Call == nil && *r.Input >= 0 && *r.Input < len(inputs) && r.Index == 0:
			return inputs[*r.Input], nil
		case r.Call != nil && r.Input == nil && *r.Call >= 0 && *r.Call < len(calls) && r.Index >= 0 && r.Index < len(calls[*r.Call]):
			return calls[*r.Call][r.Index], nil
		}
		return nil, fmt.Errorf("nn: %s: %s names no input or earlier call's output", where, what)
	}
	for j, c := range doc.Calls {
		if c.Layer < 0 || c.Layer >= len(layers) {
			return nil, fmt.Errorf("nn: %s: call %d names layer %d of %d", where, j, c.Layer, len(layers))
		}
		var xs []*Tensor
		for i, r := range c.Inputs {
			x, err := get(r, fmt.Sprintf("input %d of call %d", i, j))
			if err != nil {
				return nil, err
			}
			xs = append(xs, x)
		}
		outs := ApplyN(layers[c.Layer], xs...)
		if len(outs) != c.Outputs {
			return nil, fmt.Errorf("nn: %s: call %d of layer %d makes %d outputs, the file says %d", where, j, c.Layer, len(outs), c.Outputs)
		}
		calls = append(calls, outs)
	}
	var outputs []*Tensor
	for i, r := range doc.Outputs {
		o, err := get(r, fmt.Sprintf("output %d", i))
		if err != nil {
			return nil, err
		}
		outputs = append(outputs, o)
	}
	m, err := NewFunctional(doc.ModelName, inputs, outputs)
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", where, err)
	}
	return m, nil
}
