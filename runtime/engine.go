package runtime

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/internal/site"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// Engine owns a device's memory for programs and their shared variables.
type Engine struct {
	backend Backend
	alloc   *mem.Allocator
	ledger  *mem.Ledger
	host    *mem.Allocator // staging on the host (device backends only)
	vars    map[string]*Variable
	order   []string
	comm    Collective
	scratch *mem.Buffer   // the backend's persistent scratch (see ReserveScratch)
	loaded  []*Executable // executables bound to scratch, to rebind if it grows
}

// NewEngine returns an engine on backend b's device with a ledger named
// after the device under budget bytes (<= 0: no budget): the one way to
// make an engine. Options change how its memory is taken (OnAllocator).
func NewEngine(b Backend, budget int64, opts ...EngineOption) *Engine {
	e := &Engine{backend: b, vars: map[string]*Variable{}}
	for _, o := range opts {
		o(e)
	}
	if e.alloc == nil {
		l := mem.NewLedger(b.Device().Name(), budget)
		opt := mem.AllocatorOptions{Site: CallerSite}
		if c, ok := b.(Chunked); ok {
			opt.ChunkSize = c.AllocatorOptions().ChunkSize
		}
		e.alloc = mem.NewAllocator(b.Device(), l, opt)
	}
	e.ledger = e.alloc.Ledger()
	if s, ok := b.(Staged); ok && e.host == nil && !b.HostAddressable() {
		if dev := s.StagingDevice(); dev != nil {
			e.host = mem.NewAllocator(dev, mem.NewLedger("host", 0), mem.AllocatorOptions{Site: CallerSite})
		}
	}
	return e
}

// Chunked is a Backend that says how its device's memory is to be
// reserved (a GPU's: in chunks of the driver's granularity, anything
// larger in one allocation of its own size).
type Chunked interface {
	AllocatorOptions() mem.AllocatorOptions
}

// Staged is a Backend whose inputs, outputs and variables are staged
// through host memory of its own (a GPU's pinned memory, which its copies
// need to run asynchronously); the engine's host allocator maps it,
// charging the host ledger.
type Staged interface {
	StagingDevice() mem.Device
}

// EngineOption sets how an engine takes its memory.
type EngineOption func(*Engine)

// OnAllocator makes the engine reserve from alloc (memory of the backend's
// device; its ledger, with its budget, is the engine's) instead of an
// allocator of its own: a test's allocator with small chunks, or an
// allocator shared by engines on one device.
func OnAllocator(alloc *mem.Allocator) EngineOption { return func(e *Engine) { e.alloc = alloc } }

// SetCollective makes programs loaded from now on run their collective
// instructions over c (the processes of a data-parallel run).
func (e *Engine) SetCollective(c Collective) { e.comm = c }

// SetHost makes the engine stage inputs, outputs and variables of a device
// that is not host-addressable through host memory from alloc (by default
// a host allocator with a ledger of its own, named "host"). It must be
// called before the first Load.
func (e *Engine) SetHost(alloc *mem.Allocator) { e.host = alloc }

// Backend returns the backend the engine runs on.
func (e *Engine) Backend() Backend { return e.backend }

// Ledger returns the ledger every reservation on the device is charged to.
func (e *Engine) Ledger() *mem.Ledger { return e.ledger }

// HostLedger returns the ledger host staging is charged to: the device's
// own when the backend is host-addressable (nothing is staged).
func (e *Engine) HostLedger() *mem.Ledger {
	if e.backend.HostAddressable() {
		return e.ledger
	}
	return e.hostAlloc().Ledger()
}

func (e *Engine) hostAlloc() *mem.Allocator {
	if e.host == nil {
		e.host = mem.NewAllocator(mem.CPU(), mem.NewLedger("host", 0), mem.AllocatorOptions{Site: CallerSite})
	}
	return e.host
}

// CallerSite returns file:line of the first caller outside headroom's
// memory machinery (mem, runtime, the backends, step, train): who asked for
// the memory. Engines' allocators record it in their ledgers for reports.
func CallerSite() string {
	return site.Caller(1, func(fn string) bool {
		return site.InPackages(fn, "mem", "runtime", "train", "step", "backend/cpu", "backend/sim", "backend/cuda")
	})
}

// Allocator returns the engine's allocator.
func (e *Engine) Allocator() *mem.Allocator { return e.alloc }

// Variable is persistent state in an Engine.
type Variable struct {
	Name   string
	Role   graph.Role
	DType  tensor.DType
	Shape  tensor.Shape
	engine *Engine
	buf    *mem.Buffer
	size   int64
}

// Engine returns the engine that holds the variable.
func (v *Variable) Engine() *Engine { return v.engine }

// Span returns the variable's memory on the device.
func (v *Variable) Span() Span { return Span{Buf: v.buf, Len: v.size} }

// Tensor returns a view of the variable's current value in host memory. It
// panics on a backend that is not host-addressable: use Read and Write.
func (v *Variable) Tensor() tensor.Tensor {
	if !v.engine.backend.HostAddressable() {
		panic(fmt.Sprintf("runtime: variable %q lives on %s, which the host cannot address: use Read and Write", v.Name, v.engine.backend.Name()))
	}
	t, err := tensor.FromBytes(v.DType, v.Shape, v.Span().Bytes())
	if err != nil {
		panic(err) // sizes were checked when the variable was made
	}
	return t
}

// Read copies the variable's value into dst (its size in bytes) on the
// host: a device-to-host copy on a device backend.
func (v *Variable) Read(dst []byte) error {
	if int64(len(dst)) != v.size {
		return fmt.Errorf("runtime: reading variable %q: %d bytes into %d", v.Name, v.size, len(dst))
	}
	if v.size == 0 {
		return nil
	}
	return v.engine.backend.CopyOut(dst, v.Span())
}

// Write sets the variable's value from src (its size in bytes): a
// host-to-device copy on a device backend.
func (v *Variable) Write(src []byte) error {
	if int64(len(src)) != v.size {
		return fmt.Errorf("runtime: writing variable %q: %d bytes from %d", v.Name, v.size, len(src))
	}
	if v.size == 0 {
		return nil
	}
	return v.engine.backend.CopyIn(v.Span(), src)
}

// Bytes returns the size of the variable's value.
func (v *Variable) Bytes() int64 { return v.size }

// Trim gives the pages of the engine's free memory back to the OS (see
// mem.Allocator.Trim) and returns the bytes released: after a session
// closes, so that a container sees the memory a smaller plan gave up.
func (e *Engine) Trim() int64 {
	n := e.alloc.Trim()
	if e.host != nil && e.host != e.alloc {
		n += e.host.Trim()
	}
	return n
}

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
	v := &Variable{Name: name, Role: role, DType: dtype, Shape: shape.Clone(), engine: e, size: size}
	if size > 0 {
		buf, err := e.alloc.AllocZeroed(mem.Align(size), compile.RoleCategory(role), name)
		if err != nil {
			return nil, err
		}
		v.buf = buf
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

// Close frees every variable and the scratch. Executables must be closed
// first.
func (e *Engine) Close() {
	for _, n := range append([]string(nil), e.order...) {
		e.DeleteVariable(n)
	}
	if e.scratch != nil {
		e.alloc.Free(e.scratch)
		e.scratch = nil
	}
}

// ReserveScratch reserves the backend's persistent scratch of bytes (a
// plan's Scratch; the largest of the programs the engine will run), shared
// by every program loaded on the engine. Load reserves it when needed; a
// caller reserves it first so that all its memory is taken up front.
func (e *Engine) ReserveScratch(bytes int64) error {
	bytes = mem.Align(bytes)
	if bytes <= 0 || (e.scratch != nil && e.scratch.Size() >= bytes) {
		return nil
	}
	buf, err := e.alloc.Alloc(bytes, mem.Workspace, "scratch:"+e.backend.Name())
	if err != nil {
		return err
	}
	old := e.scratch
	e.scratch = buf
	for _, x := range e.loaded { // rebind what runs on the old scratch
		if err := x.bind(); err != nil {
			e.scratch = old
			e.alloc.Free(buf)
			return err
		}
	}
	if old != nil {
		e.alloc.Free(old)
	}
	return nil
}

// ReleaseScratch frees the scratch. No executable may be loaded.
func (e *Engine) ReleaseScratch() error {
	if len(e.loaded) > 0 {
		return fmt.Errorf("runtime: releasing the scratch under %d loaded programs", len(e.loaded))
	}
	if e.scratch != nil {
		e.alloc.Free(e.scratch)
		e.scratch = nil
	}
	return nil
}

// ScratchBytes returns the bytes of scratch reserved.
func (e *Engine) ScratchBytes() int64 {
	if e.scratch == nil {
		return 0
	}
	return e.scratch.Size()
}

func (e *Engine) scratchSpan() Span {
	if e.scratch == nil {
		return Span{}
	}
	return Span{Buf: e.scratch, Len: e.scratch.Size()}
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

// staged is an input or output of a program on a device the host cannot
// address: a host buffer copied in before each run or out after it.
type staged struct {
	host   []byte
	device Span
}

// Executable is a program with its memory reserved.
type Executable struct {
	Program   *compile.Program
	engine    *Engine
	arena     *Arena
	ownsArena bool
	owned     []*mem.Buffer
	hostOwned []*mem.Buffer
	created   []string // variables Load created
	spans     []Span
	bound     Bound
	inputs    map[string]tensor.Tensor
	outputs   map[string]tensor.Tensor
	stageIn   []staged
	stageOut  []staged
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
	x := &Executable{Program: p, engine: e, spans: make([]Span, len(p.Plan.Buffers)),
		inputs: map[string]tensor.Tensor{}, outputs: map[string]tensor.Tensor{}, arena: shared}
	hadScratch := e.scratch != nil
	defer func() {
		if err != nil {
			x.release()
			if !hadScratch && len(e.loaded) == 0 {
				e.ReleaseScratch() // the scratch this Load reserved
			}
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
		x.spans[s.Buffer] = v.Span()
	}
	if shared == nil {
		if x.arena, err = e.ReserveArena("arena:"+p.Name, p.Plan.ArenaShare); err != nil {
			return nil, err
		}
		x.ownsArena = true
	}
	if err := e.ReserveScratch(p.Plan.Scratch); err != nil {
		return nil, err
	}
	for i := range p.Plan.Buffers {
		b := &p.Plan.Buffers[i]
		size := int64(b.Shape.Size() * b.DType.Size())
		switch b.Kind {
		case compile.KindVariable, compile.KindScratch:
			continue
		case compile.KindArena:
			if size > 0 {
				x.spans[i] = Span{Buf: x.arena.buf, Offset: b.Offset, Len: size}
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
		x.spans[i] = Span{Buf: buf, Len: size}
		if b.Kind == compile.KindConstant {
			if err := e.backend.CopyIn(x.spans[i], b.Value().Bytes()); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range p.Inputs {
		t, err := x.hostView(s, true)
		if err != nil {
			return nil, err
		}
		x.inputs[s.Name] = t
	}
	for _, s := range p.Outputs {
		t, err := x.hostView(s, false)
		if err != nil {
			return nil, err
		}
		x.outputs[s.Name] = t
	}
	if err := x.bind(); err != nil {
		return nil, err
	}
	e.loaded = append(e.loaded, x)
	return x, nil
}

// bind binds the program to its spans and the engine's scratch.
func (x *Executable) bind() error {
	b, err := x.engine.backend.Bind(x.Program, x.spans, x.engine.scratchSpan(), x.engine.comm)
	if err != nil {
		return fmt.Errorf("runtime: binding program %q on %s: %w", x.Program.Name, x.engine.backend.Name(), err)
	}
	if x.bound != nil {
		x.bound.Close()
	}
	x.bound = b
	return nil
}

// hostView returns the host tensor of slot s: its buffer itself on a
// host-addressable backend, else a host staging buffer (charged to the
// host ledger as input) copied in before each run (in) or out after it.
func (x *Executable) hostView(s compile.Slot, in bool) (tensor.Tensor, error) {
	dev := x.spans[s.Buffer]
	var bytes []byte
	if x.engine.backend.HostAddressable() {
		bytes = dev.Bytes()
	} else if dev.Len > 0 {
		buf, err := x.engine.hostAlloc().AllocZeroed(mem.Align(dev.Len), mem.Input, "staging:"+x.Program.Name+"/"+s.Name)
		if err != nil {
			return tensor.Tensor{}, err
		}
		x.hostOwned = append(x.hostOwned, buf)
		bytes = buf.Bytes()[:dev.Len]
		st := staged{host: bytes, device: dev}
		if in {
			x.stageIn = append(x.stageIn, st)
		} else {
			x.stageOut = append(x.stageOut, st)
		}
	}
	t, err := tensor.FromBytes(s.Node.DType(), s.Node.Shape(), bytes)
	if err != nil {
		panic(err) // the plan sized the buffer
	}
	return t, nil
}

// Input returns the host buffer to fill with the named input before Run.
func (x *Executable) Input(name string) (tensor.Tensor, error) {
	t, ok := x.inputs[name]
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("runtime: program %q has no input %q (it has %v)", x.Program.Name, name, sortedKeys(x.inputs))
	}
	return t, nil
}

// SetScalar sets the named scalar input (a hyper-parameter such as the
// optimizer's opt/lr) to v, if the program has it. Optimizers' Feed
// methods take it as their setter.
func (x *Executable) SetScalar(name string, v float64) {
	if t, ok := x.inputs[name]; ok && t.Len() == 1 {
		t.SetFloat64At(0, v)
	}
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

// Run executes one step: on a device backend it copies the inputs in
// first and the outputs out after. It allocates nothing unless the step
// fails on bad data (a label or index out of range), which returns an
// error naming the op.
func (x *Executable) Run() error {
	if x.bound == nil {
		return fmt.Errorf("runtime: program %q is closed", x.Program.Name)
	}
	for _, s := range x.stageIn {
		if err := x.engine.backend.CopyIn(s.device, s.host); err != nil {
			return fmt.Errorf("runtime: program %q: copying inputs in: %w", x.Program.Name, err)
		}
	}
	if err := x.bound.Run(); err != nil {
		return fmt.Errorf("runtime: program %q: %w", x.Program.Name, err)
	}
	for _, s := range x.stageOut {
		if err := x.engine.backend.CopyOut(s.host, s.device); err != nil {
			return fmt.Errorf("runtime: program %q: copying outputs out: %w", x.Program.Name, err)
		}
	}
	return nil
}

// InstrTimer is a Bound that can time its instructions one by one (the
// host backend's): RunTimed runs a step as Run does and adds each
// instruction's time to d[i]; Kernel names the kernel instruction i runs
// where the backend chose among several ("" elsewhere).
type InstrTimer interface {
	RunTimed(d []time.Duration) error
	Kernel(i int) string
}

// RunTimed runs one step as Run does, adding each instruction's time to
// d[i] (len(d) == len(x.Program.Instrs)), and returns the kernel names
// (InstrTimer.Kernel) by instruction. Backends that cannot time
// instructions one by one return an error.
func (x *Executable) RunTimed(d []time.Duration) ([]string, error) {
	t, ok := x.bound.(InstrTimer)
	if !ok {
		return nil, fmt.Errorf("runtime: program %q: the backend does not time instructions one by one", x.Program.Name)
	}
	for _, s := range x.stageIn {
		if err := x.engine.backend.CopyIn(s.device, s.host); err != nil {
			return nil, fmt.Errorf("runtime: program %q: copying inputs in: %w", x.Program.Name, err)
		}
	}
	if err := t.RunTimed(d); err != nil {
		return nil, fmt.Errorf("runtime: program %q: %w", x.Program.Name, err)
	}
	names := make([]string, len(d))
	for i := range names {
		names[i] = t.Kernel(i)
	}
	return names, nil
}

// AllReduceTimes returns, over every run so far, how long the step's
// started all-reduces took and how long it waited for them (the
// difference ran behind computation).
func (x *Executable) AllReduceTimes() (took, waited time.Duration) {
	if x.bound == nil {
		return 0, 0
	}
	return x.bound.AllReduceTimes()
}

// Close releases the executable's reservations (not the shared variables it
// created; Engine.Close or DeleteVariable frees those).
func (x *Executable) Close() {
	x.created = nil
	x.release()
}

func (x *Executable) release() {
	e := x.engine
	for i, l := range e.loaded {
		if l == x {
			e.loaded = append(e.loaded[:i], e.loaded[i+1:]...)
			break
		}
	}
	for _, b := range x.owned {
		e.alloc.Free(b)
	}
	x.owned = nil
	for _, b := range x.hostOwned {
		e.hostAlloc().Free(b)
	}
	x.hostOwned, x.stageIn, x.stageOut = nil, nil, nil
	if x.arena != nil && x.ownsArena {
		x.arena.Release()
	}
	x.arena = nil
	for _, n := range x.created {
		e.DeleteVariable(n)
	}
	x.created = nil
	if x.bound != nil {
		x.bound.Close()
		x.bound = nil
	}
}
