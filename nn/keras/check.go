package keras

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// candidate is one place a file states the model's input shape.
type candidate struct {
	what  string // for messages: "InputLayer batch_shape", "build_input_shape"
	index int    // layer index, -1 for the model's own keys
	name  string
	shape []int
}

// inputShape finds the model's per-example input shape and the InputLayer's
// dtype. Keras writes it in several places (an InputLayer, the first
// layer's batch_input_shape or batch_shape, input_dim on a first Dense,
// input_length on a first Embedding, the Sequential's build_input_shape,
// the model's build_config); every one present must agree.
// Unknown (null) dimensions are fixed by the shapes given for the input
// (named as its InputLayer, or "<first layer>_input" as Keras 2 names it);
// top is set for the file's own model, whose one input "" also names.
func (p *parser) inputShape(entries []*entry, model map[string]any, mf *fields, top bool) ([]int, string, error) {
	var cands []candidate
	dtype := ""
	input := entries[0].name
	if entries[0].class != "InputLayer" {
		input += "_input"
	}
	if top {
		p.shapes.single = true
	}
	var fixErr error
	add := func(e *entry, what string, s []int) {
		idx, name := -1, ""
		if e != nil {
			idx, name = e.index, e.name
		}
		fix := p.shapes.fix
		if !top { // a nested Sequential's: sizes left unknown come from its first call
			fix = p.shapes.apply
		}
		fixed, err := fix(input, what, s, top)
		if err != nil && fixErr == nil {
			fixErr = p.layerErr(idx, name, err)
			if idx < 0 {
				fixErr = err
			}
		}
		cands = append(cands, candidate{what: what, index: idx, name: name, shape: fixed})
	}
	if in := entries[0]; in.class == "InputLayer" {
		s, key, err := shapeOf(in.f)
		if err != nil {
			return nil, "", p.layerErr(0, in.name, fmt.Errorf("%s: %w", key, err))
		}
		if s == nil {
			return nil, "", p.layerErr(0, in.name, errors.New("the InputLayer gives no batch_input_shape or batch_shape"))
		}
		add(in, "InputLayer "+key, s)
		dtype = dtypeName(in.f)
		switch dtype {
		case "", "float32", "int32", "int64", "uint8", "int16", "int8":
		default:
			return nil, "", p.layerErr(0, in.name, unsupportedError(fmt.Sprintf("input dtype %s is not supported: headroom reads float32 models (or integer indices into an Embedding)", dtype)))
		}
	}
	if first := firstLayer(entries); first.class != "InputLayer" {
		s, key, err := shapeOf(first.f)
		if err != nil {
			return nil, "", p.layerErr(first.index, first.name, fmt.Errorf("%s: %w", key, err))
		}
		if s != nil {
			add(first, key, s)
		}
		for _, k := range [...]struct{ class, key string }{{"Dense", "input_dim"}, {"Embedding", "input_length"}} {
			if first.class != k.class || !first.f.has(k.key) {
				continue
			}
			n := first.f.positive(k.key, 0, true)
			if first.f.err != nil {
				return nil, "", p.layerErr(first.index, first.name, first.f.err)
			}
			add(first, k.key, []int{n})
		}
	}
	if v, ok := mf.get("build_input_shape"); ok {
		s, err := batchShape(v)
		if err != nil {
			return nil, "", fmt.Errorf("config.build_input_shape: %w", err)
		}
		add(nil, "build_input_shape", s)
	}
	if bc, ok := model["build_config"].(map[string]any); ok && bc["input_shape"] != nil {
		s, err := batchShape(bc["input_shape"])
		if err != nil {
			return nil, "", fmt.Errorf("build_config.input_shape: %w", err)
		}
		add(nil, "build_config.input_shape", s)
	}
	if fixErr != nil {
		return nil, "", fixErr
	}
	if len(cands) == 0 {
		return nil, "", errors.New("no input shape: the file has no InputLayer, no batch_input_shape or batch_shape on its first layer and no build_input_shape; headroom needs fixed shapes to plan")
	}
	want := cands[0]
	for _, c := range cands[1:] {
		if !slices.Equal(c.shape, want.shape) {
			return nil, "", p.layerErr(c.index, c.name, fmt.Errorf("input shapes disagree: %s gives %v, %s gives %v",
				where(want), want.shape, where(c), c.shape))
		}
	}
	return want.shape, dtype, nil
}

func where(c candidate) string {
	if c.index < 0 {
		return c.what
	}
	return fmt.Sprintf("layer %d (%s) %s", c.index, c.name, c.what)
}

// shapeOf reads batch_input_shape (Keras 2), batch_shape (Keras 3) or
// input_shape (no batch dimension) from a layer config; nil when none.
func shapeOf(f *fields) ([]int, string, error) {
	for _, k := range [...]string{"batch_input_shape", "batch_shape"} {
		if v, ok := f.get(k); ok {
			s, err := batchShape(v)
			return s, k, err
		}
	}
	if v, ok := f.get("input_shape"); ok {
		list, isList := v.([]any)
		if !isList || len(list) == 0 {
			return nil, "input_shape", fmt.Errorf("want a list such as [28, 28, 1], got %s", describe(v))
		}
		s, err := dims(list, 0)
		return s, "input_shape", err
	}
	return nil, "", nil
}

// checkBuildInput compares a layer's build_config.input_shape (Keras 2.13+
// and 3 record the shape each layer was built with) with the output of the
// layers before it. Unknown (null) entries match anything.
func (p *parser) checkBuildInput(e *entry, cur []int) error {
	return p.checkBuildInputs(e, e.name, [][]int{cur})
}

// checkBuildInputs compares build_config.input_shape, one shape or a list
// of them (a merge layer's), with the shapes a call's inputs have.
func (p *parser) checkBuildInputs(e *entry, name string, shapes [][]int) error {
	v, ok := e.raw["build_config"]
	if !ok || v == nil {
		return nil
	}
	bc, ok := v.(map[string]any)
	if !ok {
		return p.layerErr(e.index, name, fmt.Errorf("build_config: want an object, got %s", describe(v)))
	}
	is, ok := bc["input_shape"]
	if !ok || is == nil {
		return nil
	}
	list, ok := is.([]any)
	var recorded [][]any
	if ok && len(list) > 0 {
		if _, nested := list[0].([]any); nested {
			for _, s := range list {
				l, _ := s.([]any)
				recorded = append(recorded, l)
			}
		} else {
			recorded = [][]any{list}
		}
	}
	match := len(recorded) == len(shapes)
	for i := 0; match && i < len(shapes); i++ {
		match = shapeMatches(recorded[i], shapes[i])
	}
	if !match {
		want := fmt.Sprint(shapes[0])
		if len(shapes) != 1 {
			want = fmt.Sprint(shapes)
		}
		return p.layerErr(e.index, name, fmt.Errorf("build_config.input_shape %s does not match the output of the layers before it, %s",
			describe(is), want))
	}
	return nil
}

// crossCheck builds the nn model (nn.Sequential.Summary) and compares each
// layer's output shape and parameter count with the Keras arithmetic the
// mapping did. A difference is a bug in this reader or in nn, reported as
// an error rather than a wrong plan.
func (p *parser) crossCheck(m *Model, entries []*entry) error {
	infos, total, err := m.Sequential.Summary()
	if err != nil {
		var ge *graph.Error
		if errors.As(err, &ge) {
			for _, e := range entries {
				if ge.Owner == e.name || strings.HasPrefix(ge.Owner, e.name+"/") {
					return p.layerErr(e.index, e.name, fmt.Errorf("nn cannot build it: %w", err))
				}
			}
		}
		return fmt.Errorf("nn cannot build the model: %w", err)
	}
	k := 0
	for _, e := range entries {
		if e.m.layer == nil {
			continue
		}
		if k >= len(infos) {
			return fmt.Errorf("nn's summary has %d layers, the file maps to more", len(infos))
		}
		got := infos[k]
		k++
		if !got.Output.Equal(e.m.out) || got.Params != e.m.params {
			return p.layerErr(e.index, e.name, fmt.Errorf("nn builds output %v with %d params, Keras' arithmetic gives %v with %d (a bug in the keras reader)",
				got.Output, got.Params, e.m.out, e.m.params))
		}
	}
	if total != m.Params {
		return fmt.Errorf("nn counts %d params, Keras' arithmetic %d (a bug in the keras reader)", total, m.Params)
	}
	return nil
}

// checkManifest compares a TensorFlow.js weightsManifest with the model:
// its values must add up to Params, and each weight whose name nn also
// declares ("conv2d/kernel") must have nn's shape. Manifests list weights
// by name, not in layer order.
func (p *parser) checkManifest(m *Model, manifest any) error {
	if manifest == nil {
		return nil
	}
	groups, ok := manifest.([]any)
	if !ok {
		return fmt.Errorf("weightsManifest: want a list, got %s", describe(manifest))
	}
	declared, err := weightShapes(m.NN())
	if err != nil {
		return err
	}
	total := 0
	for gi, g := range groups {
		gm, ok := g.(map[string]any)
		if !ok {
			return fmt.Errorf("weightsManifest[%d]: want an object, got %s", gi, describe(g))
		}
		ws, ok := gm["weights"].([]any)
		if !ok {
			return fmt.Errorf("weightsManifest[%d].weights: want a list, got %s", gi, describe(gm["weights"]))
		}
		for wi, w := range ws {
			name, shape, err := manifestWeight(w)
			if err != nil {
				return fmt.Errorf("weightsManifest[%d].weights[%d]: %w", gi, wi, err)
			}
			n, _ := mulAll(shape...) // bounded by manifestWeight
			if total > maxElements-n {
				return fmt.Errorf("weightsManifest: more than 2^40 values")
			}
			total += n
			for nnName, s := range declared {
				if (name == nnName || strings.HasSuffix(name, "/"+nnName)) && !s.Equal(shape) {
					return fmt.Errorf("weightsManifest: %s has shape %v, the layer configs give %v", name, shape, s)
				}
			}
		}
	}
	if total != m.Params {
		return fmt.Errorf("weightsManifest lists %d weight values, the layer configs give %d params", total, m.Params)
	}
	return nil
}

func manifestWeight(w any) (string, tensor.Shape, error) {
	wm, ok := w.(map[string]any)
	if !ok {
		return "", nil, fmt.Errorf("want an object, got %s", describe(w))
	}
	name, ok := wm["name"].(string)
	if !ok {
		return "", nil, fmt.Errorf("name: want a string, got %s", describe(wm["name"]))
	}
	list, ok := wm["shape"].([]any)
	if !ok || len(list) > tensor.MaxRank {
		return "", nil, fmt.Errorf("%s: shape: want a list of at most %d sizes, got %s", name, tensor.MaxRank, describe(wm["shape"]))
	}
	shape := make(tensor.Shape, len(list))
	for i, d := range list {
		n, err := toInt(d)
		if err != nil || n < 0 || n > maxInt32 {
			return "", nil, fmt.Errorf("%s: shape[%d]: want a size, got %s", name, i, describe(d))
		}
		shape[i] = n
	}
	if err := checkSize(shape); err != nil {
		return "", nil, fmt.Errorf("%s: %w", name, err)
	}
	return name, shape, nil
}

// weightShapes returns the shape of every variable nn declares for m,
// by name ("<layer>/<weight>").
func weightShapes(m nn.Model) (map[string]tensor.Shape, error) {
	out := map[string]tensor.Shape{}
	c, err := buildOnce(m)
	if err != nil {
		return nil, fmt.Errorf("nn cannot build the model: %w", err)
	}
	for _, w := range c.Weights {
		out[w.Attr().Name] = w.Shape()
	}
	return out, nil
}

// buildOnce builds m at batch 1 for inspection and returns the context.
func buildOnce(m nn.Model) (*nn.Context, error) {
	var c *nn.Context
	err := graph.Catch(func() {
		g := graph.New()
		c = nn.NewContext(g, false, 0)
		var ins []*graph.Node
		for _, in := range m.Inputs() {
			ins = append(ins, g.Input(in.Name, in.Type(), append(tensor.Shape{1}, in.Shape...)))
		}
		m.Build(c, ins)
	})
	return c, err
}

// crossCheckFunctional builds the nn model and compares every tensor's
// shape and every layer's parameter count with Keras' arithmetic, as
// crossCheck does for a Sequential.
func (p *parser) crossCheckFunctional(m *Model, g *fnModel) error {
	if err := p.checkShapes(g); err != nil {
		return err
	}
	c, err := buildOnce(m.Functional)
	if err != nil {
		return fmt.Errorf("nn cannot build the model: %w", err)
	}
	byLayer := map[string]int{}
	total, trainable := 0, 0
	for _, w := range c.Weights {
		name := w.Attr().Name
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name = name[:i]
		}
		n := w.Shape().Size()
		byLayer[name] += n
		total += n
	}
	for _, w := range c.Trainable {
		trainable += w.Shape().Size()
	}
	for _, l := range g.layers {
		if got, want := byLayer[l.name], l.info().Params; got != want {
			return p.layerErr(l.index, l.nnName, fmt.Errorf("nn declares %d params for the layer, Keras' arithmetic gives %d (a bug in the keras reader)", got, want))
		}
	}
	if total != m.Params || trainable != m.TrainableParams {
		return fmt.Errorf("nn counts %d params (%d trainable), Keras' arithmetic %d (%d) (a bug in the keras reader)", total, trainable, m.Params, m.TrainableParams)
	}
	return nil
}

// checkShapes compares the shape nn gave each tensor of g (and of the
// models nested in it) with Keras' arithmetic.
func (p *parser) checkShapes(g *fnModel) error {
	for _, l := range g.layers {
		if l.nested != nil && l.nested.g != nil {
			if err := p.checkShapes(l.nested.g); err != nil {
				return err
			}
		}
		for k := range l.calls {
			for i, v := range g.results[callKey{l, k}] {
				if v.t.Shape != nil && !v.t.Shape.Equal(v.shape) {
					return p.layerErr(l.index, l.nnName, fmt.Errorf("call %d output %d: nn builds %v, Keras' arithmetic gives %v (a bug in the keras reader)",
						k+l.skip, i, v.t.Shape, v.shape))
				}
			}
		}
	}
	return nil
}
