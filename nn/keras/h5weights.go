package keras

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/internal/hdf5"
	"github.com/headroom-ml/headroom/tensor"
)

// The weights of a Keras file come in two layouts.
//
// Keras 1 and 2 (and Keras 3 writing a legacy .h5) list the layers in a
// layer_names attribute of model_weights (or of the root of a
// save_weights file); each layer's group lists its weights, in order, in
// a weight_names attribute, each a path inside the group
// ("dense_1/kernel:0", "sequential/gru/gru_cell/kernel", Keras 1's
// "dense_1_W:0"). A weight is matched to the headroom variable of that
// layer whose name ends as the weight's does (the "<cell>" level of a
// recurrent layer dropped), or whose name the weight's ends (a nested
// model's layers, whose model name Keras 2 leaves out).
//
// Keras 3 (and tf.keras 2.13+ in .keras archives) keep each layer's
// variables at layers/<snake_case(class)>[_N]/vars/<i>, N counting the
// layers of a class in a model's layer list (tf.keras 2.13 may skip
// numbers: groups are taken in the order of N), in the order Keras
// created them; a layer's sub-layers are groups beside vars (an RNN's
// cell, a wrapper's layer, forward_layer and backward_layer,
// MultiHeadAttention's query_dense, key_dense, value_dense, output_dense),
// visited in name order, and a nested model's layers are under its own
// layers group. Variables of one layer are matched in Keras' order of
// their names (kernel before bias, gamma, beta, moving_mean,
// moving_variance, ...).

// ReadFileWeights reads the weights of m's file (a .keras archive, a
// legacy .h5, or a weights-only .h5 read with its config) as float32
// tensors by the nn variable of m each loads into. Every variable of m
// gets exactly one value of its shape; a weight the file holds for no
// variable is an error. float16, bfloat16 and float64 weights are
// converted.
func ReadFileWeights(m *Model) (map[string]tensor.Tensor, error) {
	f := m.File
	if f == nil || f.h5 == nil {
		return nil, errors.New("keras: the model's file holds no weights")
	}
	out, err := f.readWeights(m)
	if err != nil {
		var ke *Error
		var he *hdf5.FormatError
		if !errors.As(err, &ke) && !errors.As(err, &he) {
			err = &Error{File: f.Path, Index: -1, Err: err}
		}
		return nil, err
	}
	return out, nil
}

// LoadFileWeights reads the weights of m's file (ReadFileWeights) and
// hands each to write, in the order of their names: with a trainer's
// SetWeight, the model is fine-tuned from them.
func LoadFileWeights(m *Model, write func(name string, w tensor.Tensor) error) error {
	ws, err := ReadFileWeights(m)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(ws))
	for n := range ws {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := write(n, ws[n]); err != nil {
			return &Error{File: m.File.Path, Index: -1, Err: err}
		}
	}
	return nil
}

func (f *File) readWeights(m *Model) (map[string]tensor.Tensor, error) {
	if f.layoutErr != nil {
		return nil, f.layoutErr
	}
	declared, err := weightShapes(m.NN())
	if err != nil {
		return nil, err
	}
	src, err := modelOf(f.Config)
	if err != nil {
		return nil, err
	}
	w := &weightReader{f: f, declared: declared, out: map[string]tensor.Tensor{}}
	if f.keras3 {
		err = w.container(f.wroot, layerList(src), "")
	} else {
		err = w.legacy()
	}
	if err != nil {
		return nil, err
	}
	var missing []string
	for name := range declared {
		if _, ok := w.out[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("the file has no weight for %s", strings.Join(missing, ", "))
	}
	return w.out, nil
}

// modelOf returns the model config object of a file's config JSON.
func modelOf(config []byte) (map[string]any, error) {
	src, err := configOf(config)
	if err != nil {
		return nil, err
	}
	return src.model, nil
}

// configLayer is one layer of a model's layer list, as the weights need
// it: class, name, module and, for a nested model, its own list.
type configLayer struct {
	class, name, module string
	raw                 map[string]any
}

// layerList returns the layers of a model config (a Keras 1 or 2.0
// Sequential's config may be the list itself).
func layerList(model map[string]any) []configLayer {
	var list []any
	switch c := model["config"].(type) {
	case []any:
		list = c
	case map[string]any:
		list, _ = c["layers"].([]any)
	}
	var out []configLayer
	for i, raw := range list {
		lm, _ := raw.(map[string]any)
		l := configLayer{raw: lm}
		l.class, _ = lm["class_name"].(string)
		l.module, _ = lm["module"].(string)
		if n, ok := lm["name"].(string); ok && n != "" {
			l.name = n
		} else if c, ok := lm["config"].(map[string]any); ok {
			l.name, _ = c["name"].(string)
		}
		if l.name == "" {
			l.name = fmt.Sprintf("%s_%d", snake(l.class), i)
		}
		out = append(out, l)
	}
	return out
}

type weightReader struct {
	f        *File
	declared map[string]tensor.Shape
	out      map[string]tensor.Tensor
}

// put stores dataset d as variable name, converted to float32.
func (w *weightReader) put(name string, d *hdf5.Dataset) error {
	shape, ok := w.declared[name]
	if !ok {
		return fmt.Errorf("weight %s loads into no variable of the model", d.Path())
	}
	if _, dup := w.out[name]; dup {
		return fmt.Errorf("two weights load into %s (the second: %s)", name, d.Path())
	}
	got := make(tensor.Shape, len(d.Shape))
	for i, x := range d.Shape {
		got[i] = int(x)
	}
	if !got.Equal(shape) {
		return fmt.Errorf("weight %s has shape %v, variable %s %v", d.Path(), got, name, shape)
	}
	v, err := d.Float32s()
	if err != nil {
		return err
	}
	t := tensor.New(tensor.Float32, shape.Clone())
	copy(t.Float32s(), v)
	w.out[name] = t
	return nil
}

// legacy reads the layer_names / weight_names layout.
func (w *weightReader) legacy() error {
	layers, err := chunkedAttr(w.f.wroot, "layer_names")
	if err != nil {
		return err
	}
	for _, layer := range layers {
		g, err := w.f.wroot.Group(layer)
		if err != nil {
			return fmt.Errorf("layer_names lists %s: %w", layer, err)
		}
		names, err := chunkedAttr(g, "weight_names")
		if err != nil {
			return err
		}
		for _, n := range names {
			d, err := g.Dataset(n)
			if err != nil {
				return fmt.Errorf("layer %s: weight_names lists %s: %w", layer, n, err)
			}
			target, err := w.match(layer, n)
			if err != nil {
				return fmt.Errorf("layer %s: %w", layer, err)
			}
			if err := w.put(target, d); err != nil {
				return fmt.Errorf("layer %s: %w", layer, err)
			}
		}
	}
	return nil
}

// keras1Names are Keras 1's weight suffixes ("dense_1_W") and the names
// Keras 2 gave them.
var keras1Names = map[string]string{"W": "kernel", "b": "bias", "running_mean": "moving_mean", "running_std": "moving_variance",
	"gamma": "gamma", "beta": "beta"}

// match returns the variable of layer that weight (a weight_names entry)
// loads into.
func (w *weightReader) match(layer, weight string) (string, error) {
	parts := strings.Split(strings.TrimSuffix(weight, ":0"), "/")
	if len(parts) == 1 && strings.HasPrefix(parts[0], layer+"_") { // Keras 1: "<layer>_W"
		leaf := strings.TrimPrefix(parts[0], layer+"_")
		if n, ok := keras1Names[leaf]; ok {
			parts[0] = n
		}
	}
	var kept []string
	for _, p := range parts {
		if !strings.HasSuffix(p, "_cell") { // an RNN's cell: headroom names its weights after the layer
			kept = append(kept, p)
		}
	}
	best, bestLen, ties := "", 0, 0
	for name := range w.declared {
		if name != layer && !strings.HasPrefix(name, layer+"/") {
			continue
		}
		rel := strings.Split(strings.TrimPrefix(name, layer+"/"), "/")
		n := commonSuffix(rel, kept)
		if n == 0 || (n < len(rel) && n < len(kept)) {
			continue // neither ends the other
		}
		switch {
		case n > bestLen:
			best, bestLen, ties = name, n, 1
		case n == bestLen:
			ties++
		}
	}
	switch {
	case ties == 0:
		return "", fmt.Errorf("weight %s loads into no variable of the model", weight)
	case ties > 1:
		return "", fmt.Errorf("weight %s could load into more than one variable", weight)
	}
	return best, nil
}

// commonSuffix returns how many trailing elements a and b share.
func commonSuffix(a, b []string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

var (
	snakeWord  = regexp.MustCompile(`(.)([A-Z][a-z]+)`)
	snakeCamel = regexp.MustCompile(`([a-z])([A-Z])`)
	nonWord    = regexp.MustCompile(`\W+`)
	groupName  = regexp.MustCompile(`^(.*?)(?:_(\d+))?$`)
)

// kerasSnake is Keras' naming.to_snake_case, which names the groups of
// the Keras 3 layout ("Conv2D" -> "conv2d", "ReLU" -> "re_lu").
func kerasSnake(name string) string {
	name = nonWord.ReplaceAllString(name, "")
	name = snakeWord.ReplaceAllString(name, "${1}_${2}")
	name = snakeCamel.ReplaceAllString(name, "${1}_${2}")
	return strings.ToLower(name)
}

// container maps the layers of one model's list onto the groups of its
// layers container in g (Keras 3 layout); prefix is the nn name prefix
// of the model's layers ("" at the top, "outer/" below).
func (w *weightReader) container(g *hdf5.Group, layers []configLayer, prefix string) error {
	var c *hdf5.Group
	for _, name := range []string{"layers", "_layer_checkpoint_dependencies"} {
		if sub, err := g.Group(name); err == nil {
			c = sub
			break
		}
	}
	if c == nil {
		return nil // no layer of this model has weights
	}
	links, err := c.Links()
	if err != nil {
		return err
	}
	// the groups of each class, in the order of their suffix
	type numbered struct {
		name string
		n    int
	}
	byClass := map[string][]numbered{}
	for _, l := range links {
		m := groupName.FindStringSubmatch(l.Name)
		n := 0
		if m[2] != "" {
			n, _ = strconv.Atoi(m[2])
		}
		byClass[m[1]] = append(byClass[m[1]], numbered{l.Name, n})
		if m[2] != "" { // "dense_1" may also be a class's own snake name
			byClass[l.Name] = append(byClass[l.Name], numbered{l.Name, 0})
		}
	}
	for k := range byClass {
		sort.SliceStable(byClass[k], func(i, j int) bool { return byClass[k][i].n < byClass[k][j].n })
	}
	used := map[string]bool{}
	for _, l := range layers {
		if strings.HasPrefix(l.module, "keras.src.ops") || l.class == "InputLayer" {
			continue // operations and inputs hold no weights
		}
		key := kerasSnake(l.class)
		var group string
		for _, cand := range byClass[key] {
			if !used[cand.name] {
				group = cand.name
				break
			}
		}
		own := w.owns(prefix + l.name)
		if group == "" {
			if own {
				return fmt.Errorf("layer %s (%s) has no group %s[_N] left under %s", prefix+l.name, l.class, key, c.Path())
			}
			continue
		}
		used[group] = true
		lg, err := c.Group(group)
		if err != nil {
			return err
		}
		if isModel(l.class) {
			if err := w.container(lg, layerList(l.raw), prefix+l.name+"/"); err != nil {
				return err
			}
			continue
		}
		if err := w.layer(lg, prefix+l.name); err != nil {
			return fmt.Errorf("layer %s (%s, group %s): %w", prefix+l.name, l.class, lg.Path(), err)
		}
	}
	// a group of weights no layer took
	for _, l := range links {
		if used[l.Name] {
			continue
		}
		g, err := c.Group(l.Name)
		if err != nil {
			continue
		}
		n := 0
		if err := g.Walk(func(*hdf5.Dataset) error { n++; return nil }); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("the weights in %s belong to no layer of the config", g.Path())
		}
	}
	return nil
}

// owns reports whether the model declares variables of layer name.
func (w *weightReader) owns(name string) bool {
	for v := range w.declared {
		if strings.HasPrefix(v, name+"/") {
			return true
		}
	}
	return false
}

// subLayer names the nn prefix of a Keras 3 sub-layer group: "" for the
// layer itself.
var subLayer = map[string]string{"cell": "", "layer": "", "query_dense": "query", "key_dense": "key",
	"value_dense": "value", "output_dense": "attention_output"}

// weightOrder is the order Keras creates a layer's variables in, by name.
var weightOrder = []string{"kernel", "depthwise_kernel", "pointwise_kernel", "recurrent_kernel", "bias",
	"gamma", "beta", "moving_mean", "moving_variance", "embeddings", "alpha", "mean", "variance", "count"}

// layer maps a layer's group (vars and sub-layer groups) onto the nn
// variables under prefix.
func (w *weightReader) layer(g *hdf5.Group, prefix string) error {
	sets := map[string][]*hdf5.Dataset{} // by nn prefix, in Keras' order
	var order []string
	var collect func(g *hdf5.Group, target string, depth int) error
	collect = func(g *hdf5.Group, target string, depth int) error {
		if depth > 8 {
			return fmt.Errorf("sub-layers nested deeper than 8 at %s", g.Path())
		}
		links, err := g.Links()
		if err != nil {
			return err
		}
		if vars, err := g.Group("vars"); err == nil {
			vl, err := vars.Links()
			if err != nil {
				return err
			}
			sort.SliceStable(vl, func(i, j int) bool { return numeric(vl[i].Name) < numeric(vl[j].Name) })
			for _, l := range vl {
				d, err := vars.Dataset(l.Name)
				if err != nil {
					return err
				}
				if _, ok := sets[target]; !ok {
					order = append(order, target)
				}
				sets[target] = append(sets[target], d)
			}
		}
		// sub-layers in name order, private ("_") ones last, as Keras walks them
		sort.SliceStable(links, func(i, j int) bool {
			pi, pj := strings.HasPrefix(links[i].Name, "_"), strings.HasPrefix(links[j].Name, "_")
			if pi != pj {
				return pj
			}
			return links[i].Name < links[j].Name
		})
		for _, l := range links {
			if l.Name == "vars" {
				continue
			}
			sub, err := g.Group(l.Name)
			if err != nil {
				continue // a dataset beside vars: not Keras' layout
			}
			t, ok := subLayer[l.Name]
			switch {
			case ok && t == "":
				t = target
			case ok:
				t = target + "/" + t
			case l.Name == "forward_layer" || l.Name == "backward_layer":
				t = w.direction(target, strings.TrimSuffix(l.Name, "_layer"))
			default:
				t = target + "/" + l.Name
			}
			if err := collect(sub, t, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := collect(g, prefix, 0); err != nil {
		return err
	}
	for _, target := range order {
		ds := sets[target]
		vars := w.direct(target)
		if len(vars) != len(ds) {
			return fmt.Errorf("%d weights for the %d variables of %s (%s)", len(ds), len(vars), target, strings.Join(vars, ", "))
		}
		for i, d := range ds {
			if err := w.put(vars[i], d); err != nil {
				return err
			}
		}
	}
	return nil
}

// direction returns the nn prefix of a Bidirectional layer's forward or
// backward layer ("<layer>/forward_<rnn>").
func (w *weightReader) direction(target, dir string) string {
	for v := range w.declared {
		rest, ok := strings.CutPrefix(v, target+"/"+dir+"_")
		if ok {
			inner, _, _ := strings.Cut(rest, "/")
			return target + "/" + dir + "_" + inner
		}
	}
	return target + "/" + dir
}

// direct returns the variables named prefix/<leaf>, in Keras' order.
func (w *weightReader) direct(prefix string) []string {
	var out []string
	for v := range w.declared {
		if leaf, ok := strings.CutPrefix(v, prefix+"/"); ok && !strings.Contains(leaf, "/") {
			out = append(out, v)
		}
	}
	rank := func(v string) int {
		leaf := v[strings.LastIndexByte(v, '/')+1:]
		for i, n := range weightOrder {
			if n == leaf {
				return i
			}
		}
		return len(weightOrder)
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := rank(out[i]), rank(out[j])
		if ri != rj {
			return ri < rj
		}
		return out[i] < out[j]
	})
	return out
}

func numeric(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 1 << 30
	}
	return n
}
