package train

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train/checkpoint"
)

// Sharded checkpoints. Under ZeRO every process holds a block of some
// tensors (shards.go); rather than gathering them to rank 0, each process
// writes its part of the checkpoint, at once with the others
// (checkpoint.SavePart): its block of each such tensor, named
// "<tensor>#<rank>", and every n-th of the whole tensors (the variables the
// processes hold alike), so the parts are about the same size. Once every
// process has written its part, rank 0 writes the index
// (checkpoint.SaveIndex), which commits the checkpoint; its metadata says,
// under keyBlocks, which tensors are split and how: a resumed run of any
// number of processes (one included) reads the blocks it needs and
// reassembles or re-splits them (readSharded).

// keyBlocks is the index metadata naming the split tensors: a JSON object
// of tensor name -> {"shape": whole shape, "ranks": blocks}.
const keyBlocks = "zero_blocks"

// splitTensor is how a sharded checkpoint splits one tensor.
type splitTensor struct {
	Shape tensor.Shape `json:"shape"`
	Ranks int          `json:"ranks"`
}

// blockName is the name of block r of tensor name in a sharded checkpoint.
func blockName(name string, r int) string { return name + "#" + strconv.Itoa(r) }

// parseBlockName splits a block's name into the tensor's and the block.
func parseBlockName(s string) (string, int, bool) {
	i := strings.LastIndexByte(s, '#')
	if i < 0 {
		return s, 0, false
	}
	r, err := strconv.Atoi(s[i+1:])
	return s[:i], r, err == nil && r >= 0
}

// saveSharded writes this process's part of the sharded checkpoint of the
// run's step and, on rank 0, once every process has written its part, the
// index. Every process must call it.
func (t *Trainer) saveSharded(dir string, keep int, meta map[string]string) (string, error) {
	n, rank := t.cfg.ranks(), t.cfg.Comm.Rank()
	var mine []checkpoint.Entry
	weights := map[string]string{}
	split := map[string]splitTensor{}
	for i, v := range t.engine.Variables() {
		whole, sharded := t.wholeShape(v)
		owner := i % n
		if sharded {
			split[v.Name] = splitTensor{Shape: whole, Ranks: n}
			for r := range n {
				weights[blockName(v.Name, r)] = checkpoint.PartPath(dir, t.step, r, n)
			}
			owner = rank
		} else {
			weights[v.Name] = checkpoint.PartPath(dir, t.step, owner, n)
		}
		if owner != rank {
			continue
		}
		x, err := hostValue(v)
		if err != nil {
			return "", err
		}
		name := v.Name
		if sharded {
			name = blockName(v.Name, rank)
		}
		mine = append(mine, checkpoint.Entry{Name: name, Tensor: x})
	}
	b, err := json.Marshal(split)
	if err != nil {
		return "", err
	}
	meta[keyBlocks] = string(b)
	_, werr := checkpoint.SavePart(dir, t.step, rank, n, mine, meta)
	if err := t.allWrote(werr); err != nil {
		return "", err
	}
	if rank != 0 {
		return "", nil
	}
	path, err := checkpoint.SaveIndex(dir, t.step, weights, meta, keep)
	if err != nil {
		return path, fmt.Errorf("train: %w", err)
	}
	return path, nil
}

// allWrote tells every process whether each wrote its part (werr: this
// one's error) and returns an error naming the ranks that did not: then no
// process commits the checkpoint.
func (t *Trainer) allWrote(werr error) error {
	n := t.cfg.ranks()
	mine, all := []byte{0}, make([]byte, n)
	if werr != nil {
		mine[0] = 1
	}
	if err := t.cfg.Comm.AllGather(mine, all); err != nil {
		return fmt.Errorf("train: rank %d: agreeing that every process wrote its part of the checkpoint: %w", t.cfg.Comm.Rank(), err)
	}
	var failed []string
	for r, b := range all {
		if b != 0 {
			failed = append(failed, strconv.Itoa(r))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	msg := fmt.Sprintf("train: the checkpoint of step %d was not committed: rank(s) %s could not write their part", t.step, strings.Join(failed, ", "))
	if werr != nil {
		return fmt.Errorf("%s (rank %d: %w)", msg, t.cfg.Comm.Rank(), werr)
	}
	return fmt.Errorf("%s", msg)
}

// readSharded reads the sharded checkpoint whose index is at path into
// the variables: whole tensors as they are (this process's block of one it
// holds a block of), and the blocks of split tensors reassembled into this
// process's own split of them, whatever the number of processes that
// wrote them.
func (t *Trainer) readSharded(path string) error {
	x, err := checkpoint.ReadIndex(path)
	if err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	split := map[string]splitTensor{}
	if s := x.Metadata[keyBlocks]; s != "" {
		if err := json.Unmarshal([]byte(s), &split); err != nil {
			return fmt.Errorf("train: resume: %s: metadata %s: %w", path, keyBlocks, err)
		}
	}
	r := &resharder{t: t, path: path, split: split, filled: map[string]int{}}
	for _, v := range t.engine.Variables() {
		if _, ok := t.wholeShape(v); ok || split[v.Name].Ranks > 0 { // zeros past the tensor's end; the blocks fill the rest
			if err := update(v, func(x tensor.Tensor) error { clear(x.Bytes()); return nil }); err != nil {
				return err
			}
		}
	}
	if _, err := checkpoint.LoadInto(path, r.dst); err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	if err := r.flush(); err != nil {
		return err
	}
	for _, v := range t.engine.Variables() {
		if want := r.want(v); r.filled[v.Name] != want {
			return fmt.Errorf("train: resume: %s holds %d of the %d elements of %q this process needs", path, r.filled[v.Name], want, v.Name)
		}
	}
	return nil
}

// resharder reads a sharded checkpoint's tensors into a run's variables,
// through one tensor-sized buffer at a time.
type resharder struct {
	t       *Trainer
	path    string
	split   map[string]splitTensor
	pending func() error   // places the tensor read last
	filled  map[string]int // elements of each variable read
}

// flush places the tensor read last, if any.
func (r *resharder) flush() error {
	f := r.pending
	r.pending = nil
	if f == nil {
		return nil
	}
	return f()
}

// want returns the elements of the whole tensor v holds (of its block:
// those before the tensor's end).
func (r *resharder) want(v *runtime.Variable) int {
	whole, ok := r.t.wholeShape(v)
	if !ok {
		return v.Shape.Size()
	}
	n, s := whole.Size(), v.Shape.Size()
	lo := r.t.cfg.Comm.Rank() * s
	return max(0, min(n, lo+s)-lo)
}

// dst is checkpoint.LoadInto's destination for tensor name (the tensor
// before it, read by now, is placed first).
func (r *resharder) dst(name string, dt tensor.DType, shape tensor.Shape) ([]byte, error) {
	if err := r.flush(); err != nil {
		return nil, err
	}
	base, b, isBlock := parseBlockName(name)
	sp, isSplit := r.split[base]
	v, ok := r.t.engine.Variable(base)
	if !ok || (isBlock != isSplit) {
		return nil, nil // a tensor this run does not have
	}
	if dt != v.DType {
		return nil, fmt.Errorf("train: resume: %s holds %q as %s, the model needs %s", r.path, name, dt, v.DType)
	}
	whole, mineSplit := r.t.wholeShape(v)
	if !mineSplit {
		whole = v.Shape
	}
	if !isBlock { // a whole tensor
		if !shape.Equal(whole) {
			return nil, fmt.Errorf("train: resume: %s holds %q as %v, the model needs %v", r.path, name, shape, whole)
		}
		if !mineSplit && v.Engine().Backend().HostAddressable() { // straight into the variable
			r.filled[v.Name] += v.Shape.Size()
			return v.Tensor().Bytes(), nil
		}
		buf := make([]byte, shape.Size()*dt.Size())
		r.pending = func() error { return r.place(v, whole, mineSplit, 0, buf) }
		return buf, nil
	}
	if !sp.Shape.Equal(whole) || b >= sp.Ranks || shape.Size() != step.BlockSize(whole.Size(), sp.Ranks) {
		return nil, fmt.Errorf("train: resume: %s holds %q as block %d of %d of %v, the model needs %v", r.path, name, b, sp.Ranks, sp.Shape, whole)
	}
	buf := make([]byte, shape.Size()*dt.Size())
	r.pending = func() error { return r.place(v, whole, mineSplit, b*shape.Size(), buf) }
	return buf, nil
}

// place copies the elements [at, at+len) of the whole tensor (whole) that
// src holds (those before its end) into v: all of them when v is whole,
// the part inside this process's block when v is a block (mineSplit).
func (r *resharder) place(v *runtime.Variable, whole tensor.Shape, mineSplit bool, at int, src []byte) error {
	es := v.DType.Size()
	lo, hi := at, min(at+len(src)/es, whole.Size()) // what src holds of the tensor
	base := 0                                       // v's first element, in the whole tensor
	if mineSplit {
		base = r.t.cfg.Comm.Rank() * v.Shape.Size()
	}
	lo, hi = max(lo, base), min(hi, base+v.Shape.Size())
	if lo >= hi {
		return nil
	}
	r.filled[v.Name] += hi - lo
	return update(v, func(x tensor.Tensor) error {
		copy(x.Bytes()[(lo-base)*es:(hi-base)*es], src[(lo-at)*es:(hi-at)*es])
		return nil
	})
}
