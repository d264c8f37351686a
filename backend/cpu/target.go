package cpu

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// Target is the host backend: compile's Target and runtime's Backend over
// host memory. It owns the kernels' worker pool (kernels.Pool: its
// threads, its packing scratch), as a gonum BLAS implementation is a
// value: two backends in one process, a trainer's and a predictor's, each
// run on their own threads and pack into their own engine's scratch. The
// one thread setting sizes both the plan (fused chains split over it, the
// scratch reserved per thread) and the pool. Programs bound on one Target
// run one at a time (an engine's do); give engines that run at once a
// Target each.
type Target struct {
	threads int
	once    sync.Once
	pool    *kernels.Pool // made when a program is first bound
	choices *Choices      // nil: ChoicesFromEnv
	ran     atomic.Bool   // a program bound here has run: nothing more is timed
}

var _ runtime.Backend = (*Target)(nil)

// New returns the host backend with threads threads (<= 0: one). Its
// worker pool starts when a program is first bound (planning starts no
// thread); Close stops it.
func New(threads int) *Target { return &Target{threads: max(1, threads)} }

// serial runs the kernels that must not split (an elementwise step inside
// a part that already runs on a pool's thread, constant folding): a pool
// of one thread, which starts no goroutine and shares nothing mutable.
var serial = kernels.NewPool(1)

// Pool returns the backend's worker pool, starting it.
func (t *Target) Pool() *kernels.Pool {
	t.once.Do(func() { t.pool = kernels.NewPool(t.threads) })
	return t.pool
}

// Close stops the backend's worker threads. Programs bound on it must not
// run again.
func (t *Target) Close() {
	t.once.Do(func() {}) // a later Pool makes none
	if t.pool != nil {
		t.pool.Close()
	}
}

// Name returns "cpu".
func (t *Target) Name() string { return "cpu" }

// Threads returns the threads fused chains are planned for.
func (t *Target) Threads() int { return t.threads }

// Fuses reports true: the host runs every fusion (every op compile fuses
// has a chain step in the kernel table).
func (t *Target) Fuses(compile.Fusion) bool { return true }

// FusedChunk is the number of elements a fused instruction computes at a
// time: every intermediate of the chain lives in a register of this many
// elements (in the instruction's workspace), so a chain of k ops reads its
// inputs and writes its output once instead of k times.
const FusedChunk = 512

// ParallelMin is the smallest output, in elements, that a fused chain is
// split across threads for: below it the hand-off costs more than it saves.
const ParallelMin = 1 << 16

// ConvWorkspaceLimit bounds the im2col workspace of one convolution: the
// kernel lowers as many images at a time as fit (at least one).
const ConvWorkspaceLimit = 8 << 20

// Supports reports whether the host has a kernel for op on these dtypes:
// the kernel table's answer (see compile.Target.Supports).
func (t *Target) Supports(op graph.Op, dtype, in tensor.DType) bool {
	return binderOf(op, dtype, in) != nil
}

// Lower completes it for the host (a fused chain's chunk and threads) and
// returns the workspace its kernel needs: the kernel table's entry.
func (t *Target) Lower(it *compile.Instr) int64 {
	if f := ops[it.Op].lower; f != nil {
		return f(t, it)
	}
	return 0
}

// Scratch returns the bytes of packing buffers the float32 products of
// instrs need on the planned threads (kernels.Scratch): the most any one
// product or convolution packs per thread (the kernel table's entries),
// for each thread; and the area of the weights packed once for many
// products (packed.go).
func (t *Target) Scratch(instrs []compile.Instr) int64 {
	return t.productScratch(instrs) + packedBytes(instrs)
}

// productScratch returns the bytes of the products' packing buffers, one
// set per thread.
func (t *Target) productScratch(instrs []compile.Instr) int64 {
	per := 0
	for i := range instrs {
		it := &instrs[i]
		if f := ops[it.Op].scratch; f != nil && it.DType == tensor.Float32 {
			per = max(per, f(it))
		}
	}
	if per == 0 {
		return 0
	}
	return kernels.ScratchBytes(per, t.threads)
}

// Evaluate runs it over host buffers.
func (t *Target) Evaluate(it *compile.Instr, bufs [][]byte) error {
	var b Bound
	if err := bind(&b, it, bufs, nil, serial, nil); err != nil {
		return err
	}
	return b.Run()
}

// Device returns the host (mem.CPU).
func (t *Target) Device() mem.Device { return mem.CPU() }

// HostAddressable reports true.
func (t *Target) HostAddressable() bool { return true }

// Bind binds every instruction of p to its kernel and typed views of its
// buffers.
func (t *Target) Bind(p *compile.Program, bufs []runtime.Span, scratch runtime.Span, comm runtime.Collective) (runtime.Bound, error) {
	return t.BindHost(p, bufs, scratch, comm)
}

// BindHost binds p's instructions to buffers whose bytes the host can
// address (Span.Bytes), on any device: backend/sim runs its programs so.
// Each instruction's kernel is chosen here, once. The products pack into
// scratch, split over threads (see Target.Scratch). An instruction the
// host has no kernel for is an error.
func (t *Target) BindHost(p *compile.Program, bufs []runtime.Span, scratch runtime.Span, comm runtime.Collective) (runtime.Bound, error) {
	views := make([][]byte, len(bufs))
	for i, s := range bufs {
		views[i] = s.Bytes()
	}
	choices, err := t.Choices()
	if err != nil {
		return nil, err
	}
	if err := choices.load(); err != nil {
		return nil, err
	}
	pool, threads := t.Pool(), t.threads
	r := &program{name: p.Name, bound: make([]Bound, len(p.Instrs)), pool: pool, ran: &t.ran}
	// the packing area of the shared weights is the scratch's tail, where
	// the scratch has room for it (Scratch reserved it)
	sb := scratch.Bytes()
	var groups []*packGroup
	var area []byte
	grouped := map[int]bool{}
	if gs, floats := packGroups(p.Instrs); floats > 0 && packing(choices) && threads > 0 {
		need := int64(floats)*4 + 64
		if int64(len(sb)) >= t.productScratch(p.Instrs)+need {
			groups, area, sb = gs, sb[int64(len(sb))-need:], sb[:int64(len(sb))-need]
			for _, g := range groups {
				for _, i := range g.members {
					grouped[i] = true
				}
			}
		}
	}
	var todo []*pending
	for i := range p.Instrs {
		if err := bind(&r.bound[i], &p.Instrs[i], views, comm, pool, choices); err != nil {
			return nil, fmt.Errorf("binding %q: %w", p.Name, err)
		}
		if pd := r.bound[i].pending; pd != nil && !grouped[i] {
			todo = append(todo, pd)
		}
		r.bound[i].pending = nil
	}
	bindPacked(r.bound, groups, area)
	if b := sb; len(b) > 0 && threads > 0 {
		if per := (len(b)/threads - 64) / 4; per > 0 {
			r.scratch = kernels.NewScratch(b, per, threads)
		}
	}
	link(r.bound)
	// Choices are made before step 1. A program bound after one of this
	// backend's has run is a re-plan in the middle of a run (the live
	// budget's shrink, a step retried in pieces), which must answer in
	// milliseconds, not wait on another process's lock and time its
	// shapes: a shape neither the table nor the file had keeps the rule
	// (pick set it), and the next run that binds it first times it.
	if len(todo) > 0 && !t.ran.Load() {
		if r.scratch != nil {
			pool.SetScratch(r.scratch)
		}
		if err := choices.measure(p, todo); err != nil {
			return nil, fmt.Errorf("binding %q: %w", p.Name, err)
		}
	}
	return r, nil
}

// Choices returns how the backend picks convolution algorithms: what
// SetChoices set, else the process's (ChoicesFromEnv).
func (t *Target) Choices() (*Choices, error) {
	if t.choices != nil {
		return t.choices, nil
	}
	return ChoicesFromEnv()
}

// SetChoices sets how the backend picks convolution algorithms for the
// programs bound from now on.
func (t *Target) SetChoices(c *Choices) { t.choices = c }

// CopyIn copies src into dst (host memory both).
func (t *Target) CopyIn(dst runtime.Span, src []byte) error { copy(dst.Bytes(), src); return nil }

// CopyOut copies src into dst (host memory both).
func (t *Target) CopyOut(dst []byte, src runtime.Span) error { copy(dst, src.Bytes()); return nil }
