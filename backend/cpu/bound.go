package cpu

import (
	"fmt"
	"time"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// collective runs a reduce-scatter or an all-gather; with a single
// process (no Comm) the block is the whole and the gather a copy.
func (b *Bound) collective() error {
	if b.Comm == nil || b.Comm.Size() == 1 {
		copy(b.out, b.in[0])
		return nil
	}
	var err error
	if b.Op == graph.OpReduceScatter {
		err = b.Comm.ReduceScatterSum(b.in[0], b.out, b.DType)
	} else {
		err = b.Comm.AllGather(b.in[0], b.out)
	}
	if err != nil {
		return b.failed(err, "%s over %d processes", b.Op, b.Comm.Size())
	}
	return nil
}

// Bound is an Instr bound to the bytes of its buffers, ready to run.
type Bound struct {
	// Comm runs all-reduce instructions; nil means a single process.
	Comm runtime.Collective

	*compile.Instr
	out   []byte
	in    [8][]byte
	more  [][]byte // a multi-output op's further outputs (nil where not live)
	work  []byte
	parts any // concat: [][]T for the element size

	leafViews [][]byte // fused: every leaf's bytes
	leafSlot  []int    // fused: workspace slot of each non-full leaf

	// all_reduce_start: the all-reduce in flight (nil when none);
	// all_reduce_wait: its start (see link)
	req   runtime.Request
	start *Bound
	// all_reduce_wait: over every run, how long its all-reduces took (where
	// the Request reports it) and how long this instruction waited for them
	took, waited time.Duration

	castParts int // a cast split over the kernels' threads: into this many
	splits    int // gelu and its gradient, split over the kernels' threads: into this many

	geom kernels.ConvGeom // convolution and pooling: the instruction's Geom
}

// tookWaiter is a Request that reports how long its collective took
// (dist's MPI requests do).
type tookWaiter interface {
	WaitTook() (time.Duration, error)
}

// allReduceTimes sums, over the all_reduce_wait instructions of bound and
// every run so far, how long their all-reduces took from start to
// completion (where the communicator reports it) and how long the step
// waited for them: the difference is the time the all-reduces were hidden
// behind computation.
func allReduceTimes(bound []Bound) (took, waited time.Duration) {
	for i := range bound {
		took += bound[i].took
		waited += bound[i].waited
	}
	return took, waited
}

// link connects every all_reduce_wait of bound (a program's instructions,
// in order) to its all_reduce_start.
func link(bound []Bound) {
	for i := range bound {
		if bound[i].Op == graph.OpAllReduceWait {
			bound[i].start = &bound[bound[i].Pair]
		}
	}
}

// abandon completes every all-reduce still in flight in bound, after a step
// failed between a start and its wait: the processes stay in step and no
// buffer is written behind the caller's back. It returns the first error.
func abandon(bound []Bound) error {
	var first error
	for i := range bound {
		if r := bound[i].req; r != nil {
			bound[i].req = nil
			if err := r.Wait(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// bind binds in to bufs, the bytes of every buffer of the program.
func bind(in *compile.Instr, bufs [][]byte) Bound {
	b := Bound{Instr: in, out: bufs[in.Out], geom: kernels.ConvGeom(in.Geom)}
	if in.Work >= 0 && in.Work < len(bufs) {
		b.work = bufs[in.Work]
	}
	if len(in.In) <= len(b.in) {
		for i, id := range in.In {
			b.in[i] = bufs[id]
		}
	}
	if len(in.Parts) > 0 {
		b.more = make([][]byte, len(in.Parts))
		for i, id := range in.Parts {
			if id >= 0 && id < len(bufs) {
				b.more[i] = bufs[id]
			}
		}
	}
	if in.Op == graph.OpFused {
		b.leafViews = make([][]byte, len(in.In))
		b.leafSlot = make([]int, len(in.In))
		slot := 0
		for i, id := range in.In {
			b.leafViews[i] = bufs[id]
			if inWorkspace(in.Fused.Leaves[i].Kind) {
				b.leafSlot[i] = slot
				slot++
			}
		}
	}
	if in.Op == graph.OpConcat {
		parts := make([][]byte, len(in.In))
		for i, id := range in.In {
			parts[i] = bufs[id]
		}
		switch in.DType.Size() {
		case 1:
			b.parts = views[uint8](parts)
		case 2:
			b.parts = views[uint16](parts)
		case 4:
			b.parts = views[uint32](parts)
		case 8:
			b.parts = views[uint64](parts)
		}
	}
	return b
}

func views[T any](parts [][]byte) [][]T {
	out := make([][]T, len(parts))
	for i, p := range parts {
		out[i] = asAny[T](p)
	}
	return out
}

func (b *Bound) fail(format string, args ...any) error {
	return &runtime.RunError{Op: b.Op, Owner: b.Owner, Site: b.Site, Msg: fmt.Sprintf(format, args...)}
}

// failed returns a *runtime.RunError that wraps err, a collective's error.
func (b *Bound) failed(err error, format string, args ...any) error {
	return &runtime.RunError{Op: b.Op, Owner: b.Owner, Site: b.Site, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Run executes the instruction. It does not allocate unless it fails.
func (b *Bound) Run() error {
	if f := moreKernels[b.Op]; f != nil {
		return f(b)
	}
	switch b.Op {
	case graph.OpCast:
		return b.cast()
	case graph.OpAllReduce:
		if len(b.out) > 0 && &b.out[0] != &b.in[0][0] {
			copy(b.out, b.in[0])
		}
		if b.Comm == nil || b.Comm.Size() == 1 {
			return nil
		}
		if err := b.Comm.AllReduceSum(b.out, b.DType); err != nil {
			return b.failed(err, "all-reduce over %d processes", b.Comm.Size())
		}
		return nil
	case graph.OpReduceScatter, graph.OpAllGather:
		return b.collective()
	case graph.OpAllReduceStart:
		if len(b.out) > 0 && &b.out[0] != &b.in[0][0] {
			copy(b.out, b.in[0])
		}
		if b.Comm == nil || b.Comm.Size() == 1 {
			return nil
		}
		if b.req != nil {
			return b.fail("the previous all-reduce of this buffer is still in flight")
		}
		req, err := b.Comm.Start(b.out, b.DType)
		if err != nil {
			return b.failed(err, "starting the all-reduce over %d processes", b.Comm.Size())
		}
		b.req = req
		return nil
	case graph.OpAllReduceWait:
		s := b.start
		if s == nil {
			return b.fail("not linked to its all_reduce_start (link)")
		}
		if s.req == nil {
			return nil // one process: the start copied
		}
		r := s.req
		s.req = nil
		t0 := time.Now()
		var err error
		if tw, ok := r.(tookWaiter); ok {
			var took time.Duration
			took, err = tw.WaitTook()
			b.took += took
		} else {
			err = r.Wait()
		}
		b.waited += time.Since(t0)
		if err != nil {
			return b.failed(err, "all-reduce over %d processes", b.Comm.Size())
		}
		return nil
	case graph.OpEqual, graph.OpNotEqual, graph.OpLess, graph.OpLessEqual, graph.OpGreater, graph.OpGreaterEqual:
		return b.compare()
	case graph.OpTranspose, graph.OpBroadcastTo, graph.OpConcat, graph.OpSlice, graph.OpUnslice,
		graph.OpGather, graph.OpWhere, graph.OpAssign:
		switch b.DType.Size() {
		case 1:
			return move[uint8](b)
		case 2:
			return move[uint16](b)
		case 4:
			return move[uint32](b)
		case 8:
			return move[uint64](b)
		}
	}
	if b.Op == graph.OpFused {
		b.fusedParallel()
		return nil
	}
	if b.elementwiseSplits() {
		split(b, elementwisePart)
		return nil
	}
	switch b.DType {
	case tensor.Float32:
		return compute[float32](b)
	case tensor.Float64:
		return compute[float64](b)
	}
	return b.fail("no kernel for %s on %s", b.Op, b.DType)
}

// moreKernels runs the ops of families kept in files of their own; such a
// file sets its entries when the package initializes.
var moreKernels [graph.NumOps]func(b *Bound) error

// moreWorkspace gives the workspace bytes (Target.Lower) and moreScratch
// the per-thread packing floats (Target.Scratch) of such ops.
var (
	moreWorkspace [graph.NumOps]func(t *Target, it *compile.Instr) int64
	moreScratch   [graph.NumOps]func(it *compile.Instr) int
)

// binaryOp maps an arithmetic op to its kernel operator.
func binaryOp(op graph.Op) kernels.BinaryOp { return binaryOps[op] }

// compareOp maps a comparison to its kernel operator.
func compareOp(op graph.Op) kernels.CompareOp { return compareOps[op] }

var binaryOps = [graph.NumOps]kernels.BinaryOp{
	graph.OpAdd: kernels.Add, graph.OpSub: kernels.Sub, graph.OpMul: kernels.Mul,
	graph.OpDiv: kernels.Div, graph.OpMaximum: kernels.Max, graph.OpMinimum: kernels.Min,
}

var compareOps = [graph.NumOps]kernels.CompareOp{
	graph.OpEqual: kernels.Equal, graph.OpNotEqual: kernels.NotEqual, graph.OpLess: kernels.Less,
	graph.OpLessEqual: kernels.LessEqual, graph.OpGreater: kernels.Greater, graph.OpGreaterEqual: kernels.GreaterEqual,
}
