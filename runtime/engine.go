package runtime

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/internal/exec"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// Engine owns a device's memory for programs and their shared variables.
type Engine struct {
	alloc  *mem.Allocator
	ledger *mem.Ledger
	vars   map[string]*Variable
	order  []string
	comm   exec.Collective
}

// SetCollective makes programs loaded from now on run their all-reduce
// instructions over c (the processes of a data-parallel run).
func (e *Engine) SetCollective(c exec.Collective) { e.comm = c }

// Variable is persistent state in an Engine.
type Variable struct {
	Name  string
	Role  graph.Role
	DType tensor.DType
	Shape tensor.Shape
	buf   *mem.Buffer
	bytes []byte
}

// Tensor returns a view of the variable's current value.
func (v *Variable) Tensor() tensor.Tensor {
	t, err := tensor.FromBytes(v.DType, v.Shape, v.bytes)
	if err != nil {
		panic(err) // sizes were checked when the variable was made
	}
	return t
}

// New returns an engine over alloc, whose charges go to ledger.
func New(alloc *mem.Allocator, ledger *mem.Ledger) *Engine {
	return &Engine{alloc: alloc, ledger: ledger, vars: map[string]*Variable{}}
}

// NewCPU returns an engine on host memory with a ledger named "cpu" under
// budget bytes (<= 0: no budget).
func NewCPU(budget int64) *Engine {
	l := mem.NewLedger("cpu", budget)
	return New(mem.NewAllocator(mem.CPU(), l, mem.AllocatorOptions{}), l)
}

// Ledger returns the ledger every reservation is charged to.
func (e *Engine) Ledger() *mem.Ledger { return e.ledger }

// Allocator returns the engine's allocator.
func (e *Engine) Allocator() *mem.Allocator { return e.alloc }

// Variable returns the variable named name.
func (e *Engine) Variable(name string) (*Variable, bool) { v, ok := e.vars[name]; return v, ok }

// Variables returns every variable in the order they were created.
func (e *Engine) Variables() []*Variable {
	out := make([]*Variable, len(e.order))
	for i, n := range e.order {
		out[i] = e.vars[n]
	}
	return out
}

// CreateVariable reserves a zeroed variable, charged to the ledger with the
// category of its role. It fails if the name exists with another dtype or
// shape, and returns the existing one if it matches.
func (e *Engine) CreateVariable(name string, role graph.Role, dtype tensor.DType, shape tensor.Shape) (*Variable, error) {
	if v, ok := e.vars[name]; ok {
		if v.DType != dtype || !v.Shape.Equal(shape) || v.Role != role {
			return nil, fmt.Errorf("runtime: variable %q exists as %s %s%v, not %s %s%v", name, v.Role, v.DType, v.Shape, role, dtype, shape)
		}
		return v, nil
	}
	size := int64(shape.Size() * dtype.Size())
	v := &Variable{Name: name, Role: role, DType: dtype, Shape: shape.Clone()}
	if size > 0 {
		buf, err := e.alloc.AllocZeroed(mem.Align(size), compile.RoleCategory(role), name)
		if err != nil {
			return nil, err
		}
		v.buf, v.bytes = buf, buf.Bytes()[:size]
	}
	e.vars[name] = v
	e.order = append(e.order, name)
	return v, nil
}

// DeleteVariable frees a variable.
func (e *Engine) DeleteVariable(name string) {
	v, ok := e.vars[name]
	if !ok {
		return
	}
	if v.buf != nil {
		e.alloc.Free(v.buf)
	}
	delete(e.vars, name)
	for i, n := range e.order {
		if n == name {
			e.order = append(e.order[:i], e.order[i+1:]...)
			break
		}
	}
}

// Close frees every variable. Executables must be closed first.
func (e *Engine) Close() {
	for _, n := range append([]string(nil), e.order...) {
		e.DeleteVariable(n)
	}
}

// Arena is one reservation of arena memory that several programs can run
// in, one at a time (a training step, an evaluation step, a smaller last
// batch): the reservation is as large as the largest of them.
type Arena struct {
	engine *Engine
	buf    *mem.Buffer
	owner  string
	size   int64
	share  [mem.NumCategories]int64 // bytes shown by category in the ledger
}

// Size returns the arena's bytes.
func (a *Arena) Size() int64 { return a.size }

// ReserveArena reserves an arena of the total of share's bytes, shown in
// the ledger by category as share says (a plan's ArenaShare).
func (e *Engine) ReserveArena(owner string, share [mem.NumCategories]int64) (*Arena, error) {
	var size int64
	for _, b := range share {
		size += b
	}
	a := &Arena{engine: e, owner: owner, size: size}
	if size == 0 {
		return a, nil
	}
	buf, err := e.alloc.Alloc(size, mem.Workspace, owner)
	if err != nil {
		return nil, err
	}
	a.buf = buf
	for c, b := range share {
		if mem.Category(c) != mem.Workspace && b > 0 {
			e.ledger.Move(mem.Workspace, mem.Category(c), owner, b)
		}
	}
	a.share = share
	return a, nil
}

// Release frees the arena. Executables loaded into it must not run again.
func (a *Arena) Release() {
	if a.buf == nil {
		return
	}
	for c, b := range a.share {
		if mem.Category(c) != mem.Workspace && b > 0 {
			a.engine.ledger.Move(mem.Category(c), mem.Workspace, a.owner, b)
		}
	}
	a.engine.alloc.Free(a.buf)
	a.buf = nil
}

// Executable is a program with its memory reserved.
type Executable struct {
	Program   *compile.Program
	engine    *Engine
	arena     *Arena
	ownsArena bool
	owned     []*mem.Buffer
	created   []string // variables Load created
	bufs      [][]byte
	bound     []exec.Bound
	inputs    map[string]tensor.Tensor
	outputs   map[string]tensor.Tensor
}

// Load reserves p's memory on e, with an arena of its own. On failure it
// takes nothing and returns the allocator's error; an *mem.OOMError gains
// the plan's remedies.
func (e *Engine) Load(p *compile.Program) (*Executable, error) {
	return e.load(p, nil)
}

// LoadIn is Load into an arena reserved earlier, shared with other
// programs; p's arena must fit in it.
func (e *Engine) LoadIn(p *compile.Program, a *Arena) (*Executable, error) {
	if a == nil || a.engine != e {
		return nil, fmt.Errorf("runtime: program %q: arena of another engine", p.Name)
	}
	if p.Plan.ArenaBytes > a.size {
		return nil, fmt.Errorf("runtime: program %q needs an arena of %d B; the shared one has %d B", p.Name, p.Plan.ArenaBytes, a.size)
	}
	return e.load(p, a)
}

func (e *Engine) load(p *compile.Program, shared *Arena) (_ *Executable, err error) {
	x := &Executable{Program: p, engine: e, bufs: make([][]byte, len(p.Plan.Buffers)),
		inputs: map[string]tensor.Tensor{}, outputs: map[string]tensor.Tensor{}, arena: shared}
	defer func() {
		if err != nil {
			x.release()
			var oom *mem.OOMError
			if errors.As(err, &oom) && len(oom.Remedies) == 0 {
				oom.Remedies = p.Plan.OOM(p.Name, max(oom.Budget, 1)).Remedies
			}
		}
	}()
	for _, s := range p.Variables {
		n := s.Node
		_, existed := e.vars[s.Name]
		v, err := e.CreateVariable(s.Name, n.Attr().Role, n.DType(), n.Shape())
		if err != nil {
			return nil, err
		}
		if !existed {
			x.created = append(x.created, s.Name)
		}
		x.bufs[s.Buffer] = v.bytes
	}
	if shared == nil {
		if x.arena, err = e.ReserveArena("arena:"+p.Name, p.Plan.ArenaShare); err != nil {
			return nil, err
		}
		x.ownsArena = true
	}
	for i := range p.Plan.Buffers {
		b := &p.Plan.Buffers[i]
		size := int64(b.Shape.Size() * b.DType.Size())
		switch b.Kind {
		case compile.KindVariable:
			continue
		case compile.KindArena:
			if size > 0 {
				x.bufs[i] = x.arena.buf.Bytes()[b.Offset : b.Offset+size]
			}
			continue
		}
		if b.Bytes == 0 {
			continue
		}
		name := b.Owner
		if b.Name != "" {
			name = b.Name
		}
		buf, err := e.alloc.AllocZeroed(b.Bytes, b.Category, name)
		if err != nil {
			return nil, err
		}
		x.owned = append(x.owned, buf)
		x.bufs[i] = buf.Bytes()[:size]
		if b.Kind == compile.KindConstant {
			copy(x.bufs[i], b.Value().Bytes())
		}
	}
	for _, s := range p.Inputs {
		x.inputs[s.Name] = x.view(s)
	}
	for _, s := range p.Outputs {
		x.outputs[s.Name] = x.view(s)
	}
	x.bound = make([]exec.Bound, len(p.Instrs))
	for i := range p.Instrs {
		x.bound[i] = exec.Bind(&p.Instrs[i], x.bufs)
		x.bound[i].Comm = e.comm
	}
	exec.Link(x.bound)
	return x, nil
}

func (x *Executable) view(s compile.Slot) tensor.Tensor {
	t, err := tensor.FromBytes(s.Node.DType(), s.Node.Shape(), x.bufs[s.Buffer])
	if err != nil {
		panic(err) // the plan sized the buffer
	}
	return t
}

// Input returns the buffer to fill with the named input before Run.
func (x *Executable) Input(name string) (tensor.Tensor, error) {
	t, ok := x.inputs[name]
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("runtime: program %q has no input %q (it has %v)", x.Program.Name, name, sortedKeys(x.inputs))
	}
	return t, nil
}

// Output returns the named output; it holds the last step's value.
func (x *Executable) Output(name string) (tensor.Tensor, error) {
	t, ok := x.outputs[name]
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("runtime: program %q has no output %q (it has %v)", x.Program.Name, name, sortedKeys(x.outputs))
	}
	return t, nil
}

func sortedKeys(m map[string]tensor.Tensor) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Run executes one step. It allocates nothing unless the step fails on bad
// data (a label or index out of range), which returns an error naming the op.
func (x *Executable) Run() error {
	for i := range x.bound {
		if err := x.bound[i].Run(); err != nil {
			// all-reduces in flight complete before the step returns: their
			// buffers are the arena's, and the other processes wait for them
			if aerr := exec.Abandon(x.bound); aerr != nil {
				err = fmt.Errorf("%w (and completing the all-reduces in flight: %v)", err, aerr)
			}
			return fmt.Errorf("runtime: program %q: %w", x.Program.Name, err)
		}
	}
	return nil
}

// AllReduceTimes returns, over every run so far, how long the step's
// started all-reduces took and how long it waited for them (see
// exec.AllReduceTimes).
func (x *Executable) AllReduceTimes() (took, waited time.Duration) {
	return exec.AllReduceTimes(x.bound)
}

// Close releases the executable's reservations (not the shared variables it
// created; Engine.Close or DeleteVariable frees those).
func (x *Executable) Close() {
	x.created = nil
	x.release()
}

func (x *Executable) release() {
	e := x.engine
	for _, b := range x.owned {
		e.alloc.Free(b)
	}
	x.owned = nil
	if x.arena != nil && x.ownsArena {
		x.arena.Release()
	}
	x.arena = nil
	for _, n := range x.created {
		e.DeleteVariable(n)
	}
	x.created = nil
	x.bound = nil
}
