package keras

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/internal/hdf5"
	"github.com/headroom-ml/headroom/tensor"
)

// A Keras 3 .keras archive (and tf.keras 2.13+'s) keeps the optimizer's
// variables beside the weights, at optimizer/vars/<i> of model.weights.h5,
// in the order the optimizer created them:
//
//   - vars/0: the iteration count (int64);
//   - vars/1: the learning rate (a float scalar; Keras 3 only);
//   - then the slots of model.trainable_variables, in that order: Adam's
//     and AdamW's momentum and velocity, interleaved per variable (m0, v0,
//     m1, v1, ...); Adamax's m and u, interleaved; RMSprop's velocities,
//     then its momentums (momentum > 0), then its average gradients
//     (centered), each a block over every variable.
//
// headroom keeps the same quantities under the variable's name and a slot
// ("dense/kernel/m"), with the same update formulas (Adam's v is the mean
// of g², RMSprop's rms the same), so the state loads as it is and training
// continues where Keras stopped, the bias correction counted from the
// file's iteration (a learning-rate schedule, which Keras also counts from
// it, starts at the run's first step). Not read: legacy .h5 files' optimizer_weights (their
// names differ by Keras version), SGD's momentum (Keras keeps it scaled
// by the learning rate), Adagrad, Nadam, amsgrad, a LossScaleOptimizer's
// wrapped state, and models with MultiHeadAttention (whose sub-layers'
// order in trainable_variables the file does not record). Then training
// starts the optimizer afresh, as Keras does when the state does not
// match, and says why.

// OptimizerState is the optimizer state a Keras file holds, by the
// headroom optimizer-state variable each value loads into
// ("<variable>/<slot>").
type OptimizerState struct {
	Class      string // the file's optimizer class ("Adam")
	Iterations int64  // the optimizer steps Keras took
	Slots      map[string]tensor.Tensor
}

// ReadOptimizerState reads the optimizer state of m's file. It returns
// (nil, why) when the file holds none headroom can map, why saying so
// ("" when the file holds no optimizer state at all), and an error for a
// file that cannot be read.
func ReadOptimizerState(m *Model) (*OptimizerState, string, error) {
	f := m.File
	if f == nil || f.h5 == nil {
		return nil, "", nil
	}
	if !f.keras3 {
		if root, err := f.h5.Root(); err == nil {
			if _, err := root.Group("optimizer_weights"); err == nil {
				return nil, "the optimizer state of a legacy .h5 file is not read", nil
			}
		}
		return nil, "", nil
	}
	og, err := f.wroot.Group("optimizer")
	if err != nil {
		return nil, "", nil
	}
	vars, err := og.Group("vars")
	if err != nil {
		return nil, "", nil
	}
	ds, err := orderedVars(vars)
	if err != nil {
		return nil, "", &Error{File: f.Path, Index: -1, Err: err}
	}
	st, why, err := mapOptimizerState(m, ds)
	if err != nil {
		return nil, "", &Error{File: f.Path, Index: -1, Err: err}
	}
	return st, why, nil
}

// orderedVars returns the datasets vars/0 ... vars/n-1.
func orderedVars(g *hdf5.Group) ([]*hdf5.Dataset, error) {
	links, err := g.Links()
	if err != nil {
		return nil, err
	}
	out := make([]*hdf5.Dataset, len(links))
	for _, l := range links {
		i, err := strconv.Atoi(l.Name)
		if err != nil || i < 0 || i >= len(links) || out[i] != nil {
			return nil, fmt.Errorf("%s: %q is not one of vars/0 ... vars/%d", g.Path(), l.Name, len(links)-1)
		}
		if out[i], err = g.Dataset(l.Name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// slotLayout returns the slots a Keras optimizer class keeps per variable
// under headroom's names, and whether they are interleaved per variable
// (else one block per slot); why when headroom does not map the class.
func slotLayout(t *Training) (slots []string, interleaved bool, why string) {
	if t == nil || t.Optimizer == "" {
		return nil, false, "the file names no optimizer"
	}
	class := t.Optimizer
	if i := strings.LastIndexAny(class, ">."); i >= 0 {
		class = class[i+1:]
	}
	on := func(k string) bool { v, _ := t.optimizer[k].(bool); return v }
	num := func(k string) float64 { v, _ := t.optimizer[k].(float64); return v }
	switch strings.ToLower(class) {
	case "adam", "adamw":
		if on("amsgrad") {
			return nil, false, "amsgrad's state is not read"
		}
		return []string{"m", "v"}, true, ""
	case "adamax":
		return []string{"m", "u"}, true, ""
	case "rmsprop":
		slots = []string{"rms"}
		if num("momentum") > 0 {
			slots = append(slots, "momentum")
		}
		if on("centered") {
			slots = append(slots, "mean_grad")
		}
		return slots, false, ""
	}
	return nil, false, fmt.Sprintf("the state of %s is not read", t.Optimizer)
}

// mapOptimizerState maps the optimizer's variables ds onto the slots of
// m's trainable variables, checking every shape; (nil, why) where they do
// not map.
func mapOptimizerState(m *Model, ds []*hdf5.Dataset) (*OptimizerState, string, error) {
	slots, interleaved, why := slotLayout(m.Training)
	if why != "" {
		return nil, why, nil
	}
	for _, l := range m.Layers {
		if l.Class == "MultiHeadAttention" {
			return nil, "the optimizer state of a model with MultiHeadAttention is not read", nil
		}
	}
	trainable, err := trainableOrder(m)
	if err != nil {
		return nil, "", err
	}
	if len(ds) == 0 || len(ds[0].Shape) != 0 {
		return nil, "optimizer/vars/0 is not the iteration count", nil
	}
	it, err := ds[0].Int64s()
	if err != nil || len(it) != 1 || it[0] < 0 {
		return nil, "optimizer/vars/0 is not the iteration count", nil
	}
	rest := ds[1:]
	if len(rest) > 0 && len(rest[0].Shape) == 0 { // Keras 3's learning rate
		rest = rest[1:]
	}
	if len(rest) != len(slots)*len(trainable) {
		return nil, fmt.Sprintf("the file holds %d optimizer slots, %s of %d trainable variables makes %d",
			len(rest), strings.Join(slots, ", "), len(trainable), len(slots)*len(trainable)), nil
	}
	st := &OptimizerState{Class: m.Training.Optimizer, Iterations: it[0], Slots: map[string]tensor.Tensor{}}
	for i, d := range rest {
		v, s := i/len(slots), i%len(slots)
		if !interleaved {
			v, s = i%len(trainable), i/len(trainable)
		}
		w := trainable[v]
		if !shapeIs(d.Shape, w.shape) {
			return nil, fmt.Sprintf("%s has shape %v where %s's %s (%v) was expected", d.Path(), d.Shape, w.name, slots[s], w.shape), nil
		}
		vals, err := d.Float32s()
		if err != nil {
			return nil, "", err
		}
		t := tensor.New(tensor.Float32, w.shape.Clone())
		copy(t.Float32s(), vals)
		st.Slots[w.name+"/"+slots[s]] = t
	}
	return st, "", nil
}

type namedShape struct {
	name  string
	shape tensor.Shape
}

// trainableOrder returns m's trainable variables in Keras'
// trainable_variables order: the order the file's weights were read in
// (layers in config order, each layer's variables as Keras created them),
// the non-trainable ones left out.
func trainableOrder(m *Model) ([]namedShape, error) {
	w, err := m.File.weightReader(m)
	if err != nil {
		return nil, err
	}
	c, err := buildOnce(m.NN())
	if err != nil {
		return nil, err
	}
	isTrainable := map[string]bool{}
	for _, n := range c.Trainable {
		isTrainable[n.Attr().Name] = true
	}
	var out []namedShape
	for _, name := range w.order {
		if isTrainable[name] {
			out = append(out, namedShape{name, w.declared[name]})
		}
	}
	if len(out) != len(isTrainable) {
		var missing []string
		for n := range isTrainable {
			missing = append(missing, n)
		}
		sort.Strings(missing)
		return nil, fmt.Errorf("the file's weights cover %d of the %d trainable variables (%s)", len(out), len(isTrainable), strings.Join(missing, ", "))
	}
	return out, nil
}

func shapeIs(got []int64, want tensor.Shape) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if int(got[i]) != want[i] {
			return false
		}
	}
	return true
}
