package cpu

import (
	"fmt"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// Target is the host backend: compile's Target and runtime's Backend over
// host memory.
type Target struct {
	threads int
}

var _ runtime.Backend = (*Target)(nil)

// New returns the host backend, planning fused chains for threads threads
// (<= 0: one). Set kernels.SetThreads to match: the kernels run on its
// worker pool.
func New(threads int) *Target { return &Target{threads: max(1, threads)} }

// NewEngine returns an engine on the host backend with a ledger named
// "cpu" under budget bytes (<= 0: no budget), planning for threads threads.
func NewEngine(threads int, budget int64) *runtime.Engine {
	return runtime.NewEngine(New(threads), budget)
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
// for each thread.
func (t *Target) Scratch(instrs []compile.Instr) int64 {
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
	if err := bind(&b, it, bufs, nil); err != nil {
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
	return BindHost(p, bufs, scratch, t.threads, comm)
}

// BindHost binds p's instructions to buffers whose bytes the host can
// address (Span.Bytes), on any device: backend/sim runs its programs so.
// Each instruction's kernel is chosen here, once. The products pack into
// scratch, split over threads (see Target.Scratch). An instruction the
// host has no kernel for is an error.
func BindHost(p *compile.Program, bufs []runtime.Span, scratch runtime.Span, threads int, comm runtime.Collective) (runtime.Bound, error) {
	views := make([][]byte, len(bufs))
	for i, s := range bufs {
		views[i] = s.Bytes()
	}
	r := &program{name: p.Name, bound: make([]Bound, len(p.Instrs))}
	for i := range p.Instrs {
		if err := bind(&r.bound[i], &p.Instrs[i], views, comm); err != nil {
			return nil, fmt.Errorf("binding %q: %w", p.Name, err)
		}
	}
	if b := scratch.Bytes(); len(b) > 0 && threads > 0 {
		if per := (len(b)/threads - 64) / 4; per > 0 {
			r.scratch = kernels.NewScratch(b, per, threads)
		}
	}
	link(r.bound)
	return r, nil
}

// CopyIn copies src into dst (host memory both).
func (t *Target) CopyIn(dst runtime.Span, src []byte) error { copy(dst.Bytes(), src); return nil }

// CopyOut copies src into dst (host memory both).
func (t *Target) CopyOut(dst []byte, src runtime.Span) error { copy(dst, src.Bytes()); return nil }
