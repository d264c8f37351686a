package keras

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// A functional model's layers form a graph: each layer lists its calls
// ("inbound nodes"), and each call the tensors it took, as references
// [layer, node_index, tensor_index] to the outputs of earlier calls. The
// reader resolves the references from the model's outputs back to its
// inputs (the file's layer order is not trusted), maps each call with
// Keras' own shape arithmetic, and replays it with nn.Apply, so the result
// is an nn.Functional with the file's inputs, outputs and layer names.

// fnModel is a functional model being read: the file's, or one nested in
// it as a layer.
type fnModel struct {
	name      string
	prefix    string // the nn name of its layers is prefix + Keras name ("" at the top)
	index     int    // its index in the enclosing model's layer list (-1 at the top)
	trainable bool   // false: every layer frozen
	layers    []*fnLayer
	byName    map[string]*fnLayer
	inputs    []ref
	outputs   []ref
	results   map[callKey][]*value
	visiting  map[callKey]bool

	// built
	fn        *nn.Functional
	ins, outs []*value
	params    int
	trainParm int
}

// fnLayer is one layer of a functional model.
type fnLayer struct {
	*entry
	nnName string
	calls  []callSpec
	skip   int  // the config's index of the layer's first call (1 for some nested models)
	frozen bool // trainable=false here or on an enclosing model
	nested *nestedModel
	input  *value // an InputLayer's tensor
	layer  any    // the nn layer all calls share, from the first call mapped
	first  *mapped
	done   int // calls mapped
}

type callKey struct {
	l *fnLayer
	k int
}

// value is a symbolic tensor of the model being read: the nn tensor and
// the shape (per example) and dtype Keras' arithmetic gives it.
type value struct {
	t     *nn.Tensor
	shape []int
	dtype tensor.DType
}

// functional reads a Model/Functional config at the top of the file.
func (p *parser) functional(model map[string]any) (*Model, error) {
	g, err := p.readFunctional(model, "", -1, true)
	if err != nil {
		return nil, err
	}
	if err := p.buildFunctional(g); err != nil {
		return nil, err
	}
	m := &Model{Name: g.name, Functional: g.fn, Params: g.params, TrainableParams: g.trainParm}
	for _, l := range g.layers {
		m.Layers = append(m.Layers, l.info())
	}
	for _, r := range g.outputs {
		m.OutputNames = append(m.OutputNames, r.layer)
	}
	for _, in := range g.fn.Inputs() {
		if in.Name == "y" || in.Name == "step" || (strings.HasPrefix(in.Name, "y_") && strings.Trim(in.Name[2:], "0123456789") == "") {
			return nil, fmt.Errorf("an input layer named %q: headroom names its label and step inputs so; rename the InputLayer", in.Name)
		}
	}
	if err := p.crossCheckFunctional(m, g); err != nil {
		return nil, err
	}
	return m, nil
}

// readFunctional reads a functional model's layer list and its inputs and
// outputs; index is its place in the enclosing model (-1 at the top).
func (p *parser) readFunctional(model map[string]any, prefix string, index int, trainable bool) (*fnModel, error) {
	conf, ok := model["config"].(map[string]any)
	if !ok {
		return nil, p.nestedErr(index, prefix, fmt.Errorf("config: want an object with layers, input_layers and output_layers, got %s", describe(model["config"])))
	}
	mf := &fields{m: conf}
	g := &fnModel{name: mf.str("name", "model"), prefix: prefix, index: index, byName: map[string]*fnLayer{},
		results: map[callKey][]*value{}, visiting: map[callKey]bool{}}
	g.trainable = trainable && mf.boolean("trainable", true)
	if dt := dtypeName(mf); dt != "" && dt != "float32" {
		mf.unsupported("model dtype %s is not supported: headroom reads float32 models and plans precision itself", dt)
	}
	if mf.err != nil {
		return nil, p.nestedErr(index, prefix, fmt.Errorf("config.%w", mf.err))
	}
	list, ok := conf["layers"].([]any)
	if !ok || len(list) == 0 {
		return nil, p.nestedErr(index, prefix, fmt.Errorf("config.layers: want a list of layers, got %s", describe(conf["layers"])))
	}
	var err error
	if g.inputs, err = readRefs(conf["input_layers"], "config.input_layers"); err != nil {
		return nil, p.nestedErr(index, prefix, err)
	}
	if g.outputs, err = readRefs(conf["output_layers"], "config.output_layers"); err != nil {
		return nil, p.nestedErr(index, prefix, err)
	}
	if len(g.inputs) == 0 || len(g.outputs) == 0 {
		return nil, p.nestedErr(index, prefix, errors.New("a model needs at least one input and one output"))
	}
	keras3 := false
	for i, raw := range list {
		e, err := p.readEntry(i, raw)
		if err != nil {
			return nil, p.prefixed(err, prefix)
		}
		if _, dup := g.byName[e.name]; dup {
			return nil, p.layerErr(i, prefix+e.name, fmt.Errorf("name %q is already used by layer %d; layers are referred to by name", e.name, g.byName[e.name].index))
		}
		l := &fnLayer{entry: e, nnName: prefix + e.name}
		calls, k3, err := readNodes(e.raw["inbound_nodes"])
		if err != nil {
			return nil, p.layerErr(i, l.nnName, err)
		}
		for k, c := range calls {
			if len(c.constants) > 0 && !e.op {
				return nil, p.layerErr(i, l.nnName, unsupportedError(fmt.Sprintf("call %d: a constant positional argument %s: headroom takes tensors from other layers only",
					k, describe(c.constants[sortedInts(c.constants)[0]]))))
			}
		}
		l.calls, keras3 = calls, keras3 || k3
		lt := e.f.boolean("trainable", true)
		if e.f.err != nil {
			return nil, p.layerErr(i, l.nnName, e.f.err)
		}
		l.frozen = !(g.trainable && lt)
		g.layers = append(g.layers, l)
		g.byName[e.name] = l
	}
	if prefix == "" {
		p.shapes.single = len(g.inputs) == 1
	}
	for _, l := range g.layers {
		switch {
		case l.class == "InputLayer":
			if err := p.readInput(l); err != nil {
				return nil, err
			}
		case isModel(l.class):
			nm, err := p.nestedModel(l.entry, prefix, l.frozen)
			if err != nil {
				return nil, err
			}
			l.nested = nm
			l.skip = nm.skip(keras3)
		case len(l.calls) == 0:
			return nil, p.layerErr(l.index, l.nnName, errors.New("the layer is never called (it has no inbound nodes)"))
		}
	}
	return g, nil
}

// nestedErr is an error about a model: the layer that nests it, or the file.
func (p *parser) nestedErr(index int, prefix string, err error) error {
	if index < 0 {
		return err
	}
	return p.layerErr(index, strings.TrimSuffix(prefix, "/"), err)
}

// prefixed names a nested model's layer by its path ("outer/inner").
func (p *parser) prefixed(err error, prefix string) error {
	var ke *Error
	if prefix != "" && errors.As(err, &ke) && ke.Layer != "" && !strings.HasPrefix(ke.Layer, prefix) {
		ke.Layer = prefix + ke.Layer
	}
	return err
}

// readInput reads an InputLayer: its shape (batch_input_shape or
// batch_shape, every size but the batch known) and dtype.
func (p *parser) readInput(l *fnLayer) error {
	s, key, err := shapeOf(l.f)
	if err != nil {
		return p.layerErr(l.index, l.nnName, fmt.Errorf("%s: %w", key, err))
	}
	if s == nil {
		return p.layerErr(l.index, l.nnName, errors.New("the InputLayer gives no batch_input_shape or batch_shape"))
	}
	top := l.nnName == l.name
	if top {
		s, err = p.shapes.fix(l.name, key, s, true)
	} else { // a nested model's: sizes left unknown come from its first call
		s, err = p.shapes.apply(l.name, key, s, false)
	}
	if err != nil {
		return p.layerErr(l.index, l.nnName, err)
	}
	dt := tensor.Float32
	switch name := dtypeName(l.f); name {
	case "", "float32":
	case "int32", "int64", "uint8", "int16", "int8", "uint16", "uint32", "bool":
		dt = tensor.Int32
	default:
		return p.layerErr(l.index, l.nnName, unsupportedError(fmt.Sprintf("input dtype %s is not supported: headroom reads float32 models (or integer indices into an Embedding)", name)))
	}
	if l.f.err != nil {
		return p.layerErr(l.index, l.nnName, l.f.err)
	}
	l.input = &value{shape: s, dtype: dt}
	if !slices.Contains(s, unknown) {
		l.input.t = nn.NewInput(l.nnName, tensor.Shape(s), dt)
	}
	return nil
}

// open reports whether some input of g has a size left unknown: a nested
// model built at its first call, from the call's shapes.
func (g *fnModel) open() bool {
	for _, r := range g.inputs {
		if l, ok := g.byName[r.layer]; ok && l.input != nil && l.input.t == nil {
			return true
		}
	}
	return false
}

// close gives the open inputs of g the shapes of a call and builds it.
func (p *parser) close(g *fnModel, shapes [][]int) error {
	if len(shapes) != len(g.inputs) {
		return p.nestedErr(g.index, g.prefix, fmt.Errorf("the model takes %d inputs, the call gives %d", len(g.inputs), len(shapes)))
	}
	for i, r := range g.inputs {
		l, ok := g.byName[r.layer]
		if !ok || l.input == nil {
			continue // buildFunctional says what is wrong
		}
		s := l.input.shape
		if len(s) != len(shapes[i]) {
			return p.layerErr(l.index, l.nnName, fmt.Errorf("the model takes %s, its first call gives %v", shapeText(s), shapes[i]))
		}
		for j, d := range s {
			if d != unknown && d != shapes[i][j] {
				return p.layerErr(l.index, l.nnName, fmt.Errorf("the model takes %s, its first call gives %v", shapeText(s), shapes[i]))
			}
		}
		l.input.shape = slices.Clone(shapes[i])
		l.input.t = nn.NewInput(l.nnName, tensor.Shape(shapes[i]), l.input.dtype)
	}
	return p.buildFunctional(g)
}

// buildFunctional resolves every call of every layer, then makes the
// nn.Functional from the model's inputs to its outputs.
func (p *parser) buildFunctional(g *fnModel) error {
	for _, r := range g.inputs {
		l, ok := g.byName[r.layer]
		if !ok || l.class != "InputLayer" {
			return p.nestedErr(g.index, g.prefix, fmt.Errorf("input %s is not an InputLayer of the model", r))
		}
		g.ins = append(g.ins, l.input)
	}
	for _, l := range g.layers {
		for k := range l.calls {
			if _, err := p.callOutputs(g, l, k); err != nil {
				return err
			}
		}
	}
	for _, r := range g.outputs {
		v, err := p.resolve(g, r, -1, "")
		if err != nil {
			return p.nestedErr(g.index, g.prefix, fmt.Errorf("output %s: %w", r, err))
		}
		g.outs = append(g.outs, v)
	}
	ins := make([]*nn.Tensor, len(g.ins))
	for i, v := range g.ins {
		ins[i] = v.t
	}
	outs := make([]*nn.Tensor, len(g.outs))
	for i, v := range g.outs {
		outs[i] = v.t
	}
	fn, err := nn.NewFunctional(strings.TrimSuffix(g.prefix, "/")+g.topName(), ins, outs)
	if err != nil {
		return p.nestedErr(g.index, g.prefix, fmt.Errorf("nn cannot build the model: %w", err))
	}
	g.fn = fn
	for _, l := range g.layers {
		info := l.info()
		if g.params > maxElements-info.Params {
			return p.layerErr(l.index, l.nnName, errors.New("the model's parameters exceed 2^40"))
		}
		g.params += info.Params
		g.trainParm += info.TrainableParams
	}
	return nil
}

// topName is the nn name of a top-level model (a nested one is named by
// its prefix).
func (g *fnModel) topName() string {
	if g.prefix == "" {
		return g.name
	}
	return ""
}

// resolve returns the tensor r names; from is the layer (index) whose call
// takes it, for messages.
func (p *parser) resolve(g *fnModel, r ref, from int, fromName string) (*value, error) {
	l, ok := g.byName[r.layer]
	if !ok {
		return nil, fmt.Errorf("%s refers to layer %q, which the model does not have", r, r.layer)
	}
	var v *value
	if l.class == "InputLayer" {
		// Keras reads an InputLayer's node index as 0 whatever the file says
		if r.tensor != 0 {
			return nil, fmt.Errorf("%s: an InputLayer has one output", r)
		}
		v = l.input
	} else {
		k := r.node - l.skip
		if k < 0 || k >= len(l.calls) {
			return nil, fmt.Errorf("%s refers to call %d of %s, which has calls %d to %d in this model", r, r.node, r.layer, l.skip, l.skip+len(l.calls)-1)
		}
		outs, err := p.callOutputs(g, l, k)
		if err != nil {
			return nil, err
		}
		if r.tensor >= len(outs) {
			return nil, fmt.Errorf("%s refers to output %d of %s, which has %d", r, r.tensor, r.layer, len(outs))
		}
		v = outs[r.tensor]
	}
	if r.shape != nil && !shapeMatches(r.shape, v.shape) {
		return nil, fmt.Errorf("the file records %s with shape %s, the layers before it give %v", r, describe(r.shape), v.shape)
	}
	return v, nil
}

// shapeMatches compares a shape the file records (batch first, null for
// unknown) with a per-example one.
func shapeMatches(recorded []any, s []int) bool {
	if len(recorded) != len(s)+1 {
		return false
	}
	for i, d := range recorded[1:] {
		if d == nil {
			continue
		}
		if n, err := toInt(d); err != nil || n != s[i] {
			return false
		}
	}
	return true
}

// callOutputs maps call k of layer l (once) and returns its outputs.
func (p *parser) callOutputs(g *fnModel, l *fnLayer, k int) ([]*value, error) {
	key := callKey{l, k}
	if v, ok := g.results[key]; ok {
		return v, nil
	}
	if g.visiting[key] {
		return nil, p.layerErr(l.index, l.nnName, fmt.Errorf("call %d takes its own output: the layers form a cycle", k+l.skip))
	}
	g.visiting[key] = true
	defer delete(g.visiting, key)
	cs := l.calls[k]
	in := callIn{named: map[string][][]int{}, kw: &fields{m: cs.kw}}
	var args []*value
	named := map[string][]*value{}
	var dtypes []tensor.DType // of the positional tensors
	for _, r := range cs.args {
		v, err := p.resolve(g, r, l.index, l.nnName)
		if err != nil {
			return nil, p.callErr(l, k, "", err)
		}
		args = append(args, v)
		in.shapes = append(in.shapes, v.shape)
		dtypes = append(dtypes, v.dtype)
	}
	for _, key := range sortedNamed(cs.named) {
		for _, r := range cs.named[key] {
			v, err := p.resolve(g, r, l.index, l.nnName)
			if err != nil {
				return nil, p.callErr(l, k, key+": ", err)
			}
			named[key] = append(named[key], v)
			in.named[key] = append(in.named[key], v.shape)
		}
	}
	var m mapped
	if l.nested != nil {
		var err error
		if m, err = l.nested.call(p, l.entry, in.shapes, dtypes); err != nil {
			return nil, err
		}
		if len(in.named) > 0 {
			return nil, p.layerErr(l.index, l.nnName, unsupportedError("a nested model called with keyword tensors (a mask or a state): not supported"))
		}
	} else {
		if l.class != "Embedding" && slices.Contains(dtypes, tensor.Int32) {
			return nil, p.layerErr(l.index, l.nnName, unsupportedError(fmt.Sprintf("an integer input feeds %s: only an Embedding takes integer input", l.written)))
		}
		if err := p.checkBuildInputs(l.entry, l.nnName, in.shapes); err != nil {
			return nil, err
		}
		if l.op {
			m = mapOperation(l.class, l.nnName, l.f, in, cs)
		} else {
			m = mapLayer(l.class, l.nnName, l.f, in)
		}
		if m.outs == nil && m.out != nil {
			m.outs = [][]int{m.out}
		}
		if l.f.err == nil {
			l.f.err = in.kw.err
		}
		if l.f.err != nil {
			return nil, p.layerErr(l.index, l.nnName, fmt.Errorf("call %d: %w", k+l.skip, l.f.err))
		}
	}
	if l.first == nil {
		l.first = &m
		l.layer = m.layer
		if l.frozen && l.nested == nil {
			l.layer = freeze(m.layer, l.class)
		}
	} else if m.params != l.first.params {
		return nil, p.layerErr(l.index, l.nnName, fmt.Errorf("call %d gives the layer %d params, its first call %d: a shared layer's inputs must give its weights one shape",
			k+l.skip, m.params, l.first.params))
	}
	xs, err := feed(m.feed, args, named)
	if err != nil {
		return nil, p.layerErr(l.index, l.nnName, fmt.Errorf("call %d: %w", k+l.skip, err))
	}
	ts := nn.ApplyN(l.layer, xs...)
	if len(ts) != len(m.outs) {
		return nil, p.layerErr(l.index, l.nnName, fmt.Errorf("nn's layer gives %d outputs, Keras' arithmetic %d (a bug in the keras reader)", len(ts), len(m.outs)))
	}
	out := make([]*value, len(ts))
	for i, t := range ts {
		out[i] = &value{t: t, shape: m.outs[i], dtype: tensor.Float32}
	}
	l.done++
	g.results[key] = out
	return out, nil
}

// callErr is an error resolving the inputs of call k of l: one about an
// earlier layer is passed on as it is.
func (p *parser) callErr(l *fnLayer, k int, what string, err error) error {
	var ke *Error
	if errors.As(err, &ke) {
		return err
	}
	return p.layerErr(l.index, l.nnName, fmt.Errorf("call %d: %s%w", k+l.skip, what, err))
}

// feed orders a call's tensors as the nn layer takes them.
func feed(order []arg, args []*value, named map[string][]*value) ([]*nn.Tensor, error) {
	if order == nil {
		if len(named) > 0 {
			return nil, unsupportedError(fmt.Sprintf("keyword tensor arguments (%s) are not supported for this layer", strings.Join(sortedNamedV(named), ", ")))
		}
		xs := make([]*nn.Tensor, len(args))
		for i, a := range args {
			xs[i] = a.t
		}
		return xs, nil
	}
	var xs []*nn.Tensor
	for _, a := range order {
		switch {
		case a.key != "" && a.pos < len(named[a.key]):
			xs = append(xs, named[a.key][a.pos].t)
		case a.key == "" && a.pos < len(args):
			xs = append(xs, args[a.pos].t)
		default:
			return nil, fmt.Errorf("internal: the mapping asks for argument %v, which the call lacks", a)
		}
	}
	return xs, nil
}

func sortedNamedV(m map[string][]*value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// info is the layer's summary row.
func (l *fnLayer) info() LayerInfo {
	info := LayerInfo{Name: l.name, Class: l.written, Calls: l.done}
	if l.class == "InputLayer" {
		info.Output = tensor.Shape(l.input.shape).Clone()
		info.Outputs = []tensor.Shape{info.Output}
		info.Calls = 1
		return info
	}
	for _, c := range l.calls {
		info.Inbound = append(info.Inbound, c.inbound())
	}
	if l.first == nil {
		return info
	}
	for _, o := range l.first.outs {
		info.Outputs = append(info.Outputs, tensor.Shape(o).Clone())
	}
	if len(info.Outputs) > 0 {
		info.Output = info.Outputs[0]
	}
	info.Params = l.first.params
	if !l.frozen {
		info.TrainableParams = l.first.params - l.first.nonTrainable
	}
	return info
}
