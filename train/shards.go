package train

import (
	"fmt"
	"strings"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// The variables of a run with a ZeRO stage that hold one process's block
// of a tensor (step.BlockSize elements of it, flattened, zero-padded past
// its end): the optimizer state of every trained weight (stages 1 to 3),
// its gradient accumulator (stages 2 and 3) and, in stage 3, the weight
// itself. Checkpoints and saved models hold the whole tensors, gathered
// from every process, so that any number of processes (one included) can
// resume from them; a resumed process takes its block of each.

// wholeShape returns the shape of the whole tensor when v holds only this
// process's block of it.
func (t *Trainer) wholeShape(v *runtime.Variable) (tensor.Shape, bool) {
	stage := t.cfg.zeroStage()
	if stage == 0 || t.spec == nil {
		return nil, false
	}
	if w, ok := t.weightSpec(v.Name); ok {
		return w.Shape, w.Sharded && v.Role == graph.RoleParam
	}
	i := strings.LastIndexByte(v.Name, '/')
	if i < 0 {
		return nil, false
	}
	w, ok := t.weightSpec(v.Name[:i])
	if !ok || !w.Trainable {
		return nil, false
	}
	switch v.Role {
	case graph.RoleOptState:
		return w.Shape, true
	case graph.RoleGrad:
		return w.Shape, stage >= 2
	}
	return nil, false
}

// weightSpec returns the model's variable name as step.Describe found it.
func (t *Trainer) weightSpec(name string) (step.WeightSpec, bool) {
	for _, w := range t.spec.Weights {
		if w.Name == name {
			return w, true
		}
	}
	return step.WeightSpec{}, false
}

// wholeValue returns v's value on the host: the whole tensor, gathered
// from every process, when v holds a block of it (every process must call
// it then, in the same order).
func (t *Trainer) wholeValue(v *runtime.Variable) (tensor.Tensor, error) {
	x, err := hostValue(v)
	if err != nil {
		return tensor.Tensor{}, err
	}
	shape, ok := t.wholeShape(v)
	if !ok {
		return x, nil
	}
	full := make([]byte, len(x.Bytes())*t.cfg.ranks())
	if err := t.cfg.Comm.AllGather(x.Bytes(), full); err != nil {
		return tensor.Tensor{}, fmt.Errorf("train: rank %d: gathering %s: %w", t.cfg.Comm.Rank(), v.Name, err)
	}
	return tensor.FromBytes(v.DType, shape, full[:shape.Size()*v.DType.Size()])
}

// setBlock writes this process's block of whole (the whole tensor's
// bytes) into v, zero past the tensor's end.
func (t *Trainer) setBlock(v *runtime.Variable, whole []byte) error {
	block := v.Shape.Size() * v.DType.Size()
	lo := min(t.cfg.Comm.Rank()*block, len(whole))
	return update(v, func(x tensor.Tensor) error {
		clear(x.Bytes())
		copy(x.Bytes(), whole[lo:min(lo+block, len(whole))])
		return nil
	})
}
