package keras

import (
	"errors"
	"fmt"
	"slices"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// nestedModel is a model used as a layer of another: a Functional (Model)
// with its own input layers, or a Sequential, which may leave its input
// shape to its first call. It is built into an nn.Functional, whose
// layers are named "<model>/<layer>", once.
type nestedModel struct {
	e      *entry
	prefix string // its layers' nn name prefix: "<enclosing prefix><name>/"
	frozen bool
	g      *fnModel // nil for a Sequential until its first call
	// pending: a Functional whose inputs leave sizes unknown, built at its
	// first call
	pending bool
	seq     struct {
		name    string
		entries []*entry
		input   []int // nil: the first call's
		partial []int // an input shape with sizes left unknown (-1), which the first call must fit
		dtype   tensor.DType
		f       *fields
	}
}

// nestedModel reads the model of entry e, nested in a model whose layers
// are prefixed with prefix.
func (p *parser) nestedModel(e *entry, prefix string, frozen bool) (*nestedModel, error) {
	if p.depth++; p.depth > maxDepth {
		return nil, p.layerErr(e.index, prefix+e.name, fmt.Errorf("models nested more than %d deep", maxDepth))
	}
	defer func() { p.depth-- }()
	nm := &nestedModel{e: e, prefix: prefix + e.name + "/", frozen: frozen}
	if e.class != "Sequential" {
		g, err := p.readFunctional(e.raw, nm.prefix, e.index, !frozen)
		if err != nil {
			return nil, err
		}
		nm.g = g
		if g.open() { // sizes left unknown: its first call gives them
			nm.pending = true
			return nm, nil
		}
		if err := p.buildFunctional(g); err != nil {
			return nil, err
		}
		return nm, nil
	}
	name, list, mf, err := sequentialConfig(e.raw)
	if err != nil {
		return nil, p.layerErr(e.index, prefix+e.name, err)
	}
	entries, err := p.entries(list)
	if err != nil {
		return nil, p.prefixed(err, nm.prefix)
	}
	nm.seq.name, nm.seq.entries, nm.seq.f = name, entries, mf
	if declaresInput(entries, e.raw, mf) {
		in, dt, err := p.inputShape(entries, e.raw, mf, false)
		if err != nil {
			return nil, p.prefixed(err, nm.prefix)
		}
		nm.seq.input, nm.seq.dtype = in, tensor.Float32
		if dt != "" && dt != "float32" {
			nm.seq.dtype = tensor.Int32
		}
		if first := firstLayer(entries); first.class == "Embedding" {
			nm.seq.dtype = tensor.Int32
		}
		if slices.Contains(in, unknown) { // its first call gives the sizes left unknown
			nm.seq.input, nm.seq.partial = nil, in
			return nm, nil
		}
		if err := p.buildSequential(nm, nm.seq.input, nm.seq.dtype); err != nil {
			return nil, err
		}
	}
	return nm, nil
}

// declaresInput reports whether a Sequential states its input shape.
func declaresInput(entries []*entry, raw map[string]any, mf *fields) bool {
	first := firstLayer(entries)
	if entries[0].class == "InputLayer" || first.f.has("input_dim") || first.f.has("input_length") || mf.has("build_input_shape") {
		return true
	}
	if s, _, err := shapeOf(first.f); s != nil || err != nil {
		return true
	}
	bc, _ := raw["build_config"].(map[string]any)
	return bc != nil && bc["input_shape"] != nil
}

// skip returns the config's node index of the model's first call: Keras
// (2 and 3) leaves out the node that links a Functional's own inputs to
// its outputs, and Keras 2 that of a Sequential built with an input shape,
// so their first call in the enclosing model is node 1.
func (nm *nestedModel) skip(keras3 bool) int {
	if nm.e.class != "Sequential" {
		return 1
	}
	if !keras3 && (nm.seq.input != nil || nm.seq.partial != nil) {
		return 1
	}
	return 0
}

// buildSequential makes the nested Sequential's layers a chain of calls of
// a functional model over input (per example) of dtype dt.
func (p *parser) buildSequential(nm *nestedModel, input []int, dt tensor.DType) error {
	g := &fnModel{name: nm.seq.name, prefix: nm.prefix, index: nm.e.index, byName: map[string]*fnLayer{},
		results: map[callKey][]*value{}, visiting: map[callKey]bool{}}
	g.trainable = !nm.frozen && nm.seq.f.boolean("trainable", true)
	if nm.seq.f.err != nil {
		return p.layerErr(nm.e.index, nm.prefix[:len(nm.prefix)-1], nm.seq.f.err)
	}
	entries := nm.seq.entries
	var in *fnLayer
	if entries[0].class == "InputLayer" {
		in = &fnLayer{entry: entries[0], nnName: nm.prefix + entries[0].name}
		entries = entries[1:]
	} else { // Keras names it after the first layer
		e := &entry{index: -1, class: "InputLayer", written: "InputLayer", name: entries[0].name + "_input", f: &fields{m: map[string]any{}}}
		in = &fnLayer{entry: e, nnName: nm.prefix + e.name}
	}
	in.input = &value{t: nn.NewInput(in.nnName, tensor.Shape(input), dt), shape: slices.Clone(input), dtype: dt}
	g.layers = append(g.layers, in)
	g.byName[in.name] = in
	g.inputs = []ref{{layer: in.name}}
	prev := in.name
	for _, e := range entries {
		if _, dup := g.byName[e.name]; dup {
			return p.layerErr(e.index, nm.prefix+e.name, fmt.Errorf("name %q is used twice", e.name))
		}
		lt := e.f.boolean("trainable", true)
		if e.f.err != nil {
			return p.layerErr(e.index, nm.prefix+e.name, e.f.err)
		}
		l := &fnLayer{entry: e, nnName: nm.prefix + e.name, frozen: !(g.trainable && lt),
			calls: []callSpec{{args: []ref{{layer: prev}}, named: map[string][]ref{}, kw: map[string]any{}}}}
		if isModel(e.class) {
			inner, err := p.nestedModel(e, nm.prefix, l.frozen)
			if err != nil {
				return err
			}
			l.nested = inner
		}
		g.layers = append(g.layers, l)
		g.byName[e.name] = l
		prev = e.name
	}
	if len(g.layers) < 2 {
		return p.layerErr(nm.e.index, nm.prefix[:len(nm.prefix)-1], errors.New("the nested Sequential has no layers besides its input"))
	}
	g.outputs = []ref{{layer: prev}}
	if err := p.buildFunctional(g); err != nil {
		return err
	}
	nm.g = g
	return nil
}

// call maps one call of the nested model on inputs of the given shapes
// and dtypes.
func (nm *nestedModel) call(p *parser, e *entry, shapes [][]int, dtypes []tensor.DType) (mapped, error) {
	name := nm.prefix[:len(nm.prefix)-1]
	if nm.pending {
		p.depth++
		err := p.close(nm.g, shapes)
		p.depth--
		if err != nil {
			return mapped{}, err
		}
		nm.pending = false
	}
	if nm.g == nil { // a Sequential without an input shape: its first call's
		if len(shapes) != 1 {
			return mapped{}, p.layerErr(e.index, name, fmt.Errorf("a Sequential model takes one input, got %d", len(shapes)))
		}
		if s := nm.seq.partial; s != nil && !fits(s, shapes[0]) {
			return mapped{}, p.layerErr(e.index, name, fmt.Errorf("the model takes %s, its first call gives %v", shapeText(s), shapes[0]))
		}
		dt := tensor.Float32
		if len(dtypes) > 0 {
			dt = dtypes[0]
		}
		if nm.seq.partial != nil {
			dt = nm.seq.dtype
		}
		p.depth++
		err := p.buildSequential(nm, shapes[0], dt)
		p.depth--
		if err != nil {
			return mapped{}, err
		}
	}
	g := nm.g
	if len(shapes) != len(g.ins) {
		return mapped{}, p.layerErr(e.index, name, fmt.Errorf("the model takes %d inputs, the call gives %d", len(g.ins), len(shapes)))
	}
	for i, v := range g.ins {
		if !slices.Equal(v.shape, shapes[i]) {
			return mapped{}, p.layerErr(e.index, name, fmt.Errorf("input %d: the model takes %v, the call gives %v", i, v.shape, shapes[i]))
		}
		if dtypes != nil && v.dtype != dtypes[i] {
			return mapped{}, p.layerErr(e.index, name, fmt.Errorf("input %d: the model takes %s, the call gives %s", i, v.dtype, dtypes[i]))
		}
	}
	m := mapped{layer: g.fn, params: g.params, nonTrainable: g.params - g.trainParm}
	for _, v := range g.outs {
		m.outs = append(m.outs, slices.Clone(v.shape))
	}
	return m, nil
}

// fits reports whether shape s fits partial, whose -1 sizes are unknown.
func fits(partial, s []int) bool {
	if len(partial) != len(s) {
		return false
	}
	for i, d := range partial {
		if d != unknown && d != s[i] {
			return false
		}
	}
	return true
}
