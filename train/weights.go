package train

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// initWeights draws every variable's initial value from the model seed
// (the initializers New's model description found).
func (t *Trainer) initWeights() error {
	for _, w := range t.spec.Weights {
		v, ok := t.engine.Variable(w.Name)
		if !ok || w.Init == nil {
			continue
		}
		if _, ok := t.wholeShape(v); ok { // every process draws the whole weight and keeps its block
			x := tensor.New(w.DType, w.Shape)
			nn.InitTensor(w.Init, t.cfg.Seed, w.Name, x)
			if err := t.setBlock(v, x.Bytes()); err != nil {
				return err
			}
			continue
		}
		err := update(v, func(x tensor.Tensor) error { nn.InitTensor(w.Init, t.cfg.Seed, w.Name, x); return nil })
		if err != nil {
			return err
		}
	}
	return nil // optimizer state starts at zero, as the engine made it
}

// Weight returns the current value of the model variable name, on the
// host (a copy on a device backend): a PredictConfig's Weights can read a
// trainer's weights so. Under ZeRO stage 3 it gathers the whole weight from
// every process, which must all call it, in the same order.
func (t *Trainer) Weight(name string) (tensor.Tensor, bool) {
	v, ok := t.engine.Variable(name)
	if !ok {
		return tensor.Tensor{}, false
	}
	x, err := t.wholeValue(v)
	return x, err == nil
}

// update runs f on a host tensor holding v's value and writes the result
// back: v's own memory on the host, a copy through the backend's copies on
// a device.
func update(v *runtime.Variable, f func(x tensor.Tensor) error) error {
	x, err := hostValue(v)
	if err != nil {
		return err
	}
	if err := f(x); err != nil {
		return err
	}
	if v.Engine().Backend().HostAddressable() {
		return nil
	}
	return v.Write(x.Bytes())
}

// hostValue returns v's value on the host: a view of its memory on a
// host-addressable backend, else a copy out of the device.
func hostValue(v *runtime.Variable) (tensor.Tensor, error) {
	if v.Engine().Backend().HostAddressable() {
		return v.Tensor(), nil
	}
	x := tensor.New(v.DType, v.Shape)
	if err := v.Read(x.Bytes()); err != nil {
		return tensor.Tensor{}, fmt.Errorf("train: reading %s from the device: %w", v.Name, err)
	}
	return x, nil
}

// broadcastWeights gives every process rank 0's variables (a
// data-parallel run starts, and resumes, from one set of weights).
func (t *Trainer) broadcastWeights() error {
	if t.cfg.ranks() == 1 {
		return nil
	}
	for _, v := range t.engine.Variables() {
		if _, sharded := t.wholeShape(v); sharded {
			continue // each process keeps its own block
		}
		err := update(v, func(x tensor.Tensor) error { return t.cfg.Comm.Broadcast(x.Bytes(), 0) })
		if err != nil {
			return fmt.Errorf("train: broadcasting %s from rank 0: %w", v.Name, err)
		}
	}
	return nil
}

// SetWeight writes w into the model variable name (a weight from a file
// of another framework, before training starts). The variable must exist
// with w's dtype and shape.
func (t *Trainer) SetWeight(name string, w tensor.Tensor) error {
	v, ok := t.engine.Variable(name)
	if !ok {
		return fmt.Errorf("the model has no variable %s", name)
	}
	if whole, ok := t.wholeShape(v); ok && v.DType == w.DType() && whole.Equal(w.Shape()) {
		return t.setBlock(v, w.Bytes()) // this process's block of the whole weight
	}
	if v.DType != w.DType() || !v.Shape.Equal(w.Shape()) {
		return fmt.Errorf("variable %s is %s%v, the weight %s%v", name, v.DType, v.Shape, w.DType(), w.Shape())
	}
	if err := v.Write(w.Bytes()); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// ContinueOptimizer loads optimizer state from another framework's file
// before training starts: slots maps "<variable>/<slot>" (the optimizer's
// state variables: Adam's "m" and "v", RMSprop's "rms", ...) to values,
// and steps is how many optimizer steps produced them, which the bias
// correction counts on from (the learning rate schedule does not: it
// starts at this run's step 1). Every slot must name a state variable of
// the run's optimizer, with its shape, and every state variable must get
// one: otherwise nothing is written and the error says which.
func (t *Trainer) ContinueOptimizer(slots map[string]tensor.Tensor, steps int64) error {
	if steps < 0 {
		return fmt.Errorf("optimizer steps %d: want 0 or more", steps)
	}
	want := 0
	for _, v := range t.engine.Variables() {
		if v.Role != graph.RoleOptState {
			continue
		}
		want++
		w, ok := slots[v.Name]
		if !ok {
			return fmt.Errorf("the optimizer state has no value for %s", v.Name)
		}
		if v.DType != w.DType() || !v.Shape.Equal(w.Shape()) {
			return fmt.Errorf("optimizer state %s is %s%v, the value %s%v", v.Name, v.DType, v.Shape, w.DType(), w.Shape())
		}
	}
	if want != len(slots) {
		return fmt.Errorf("%d optimizer state values for the %d state variables of %s", len(slots), want, t.cfg.Optimizer.Name())
	}
	for name, w := range slots {
		v, _ := t.engine.Variable(name)
		if err := v.Write(w.Bytes()); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	t.optSteps = steps
	return nil
}
