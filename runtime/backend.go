package runtime

import (
	"fmt"
	"time"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// Backend runs compiled programs on one kind of device: the seam below
// which everything device-specific lives (package backend/cpu for the host,
// backend/sim for a simulated device, a CUDA backend for GPUs). It is a
// compile.Target (what compile asks while planning) that can also bind a
// program to memory reserved on its device and move bytes between the host
// and that memory. The runtime reserves every byte; a backend never
// allocates device memory of its own.
type Backend interface {
	compile.Target
	// Device is where the backend's buffers live.
	Device() mem.Device
	// HostAddressable reports whether the host may read and write the
	// device's buffers in place (Span.Bytes). When it does not, the runtime
	// stages inputs, outputs and variables through host buffers and
	// CopyIn/CopyOut.
	HostAddressable() bool
	// Bind binds p's instructions to its buffers: bufs[i] is buffer i of
	// p.Plan (a zero Span where the buffer has no bytes), scratch is the
	// engine's persistent scratch (at least p.Plan.Scratch bytes), comm runs
	// the collectives (nil: one process).
	Bind(p *compile.Program, bufs []Span, scratch Span, comm Collective) (Bound, error)
	// CopyIn copies src from the host into dst; CopyOut copies src to the
	// host's dst. Lengths match.
	CopyIn(dst Span, src []byte) error
	CopyOut(dst []byte, src Span) error
}

// Bound is a program bound to its memory on a backend, ready to run.
type Bound interface {
	// Run executes one step. It allocates nothing unless it fails on bad
	// data (a label or index out of range), which is an error naming the op.
	Run() error
	// AllReduceTimes returns, over every run so far, how long the step's
	// started all-reduces took and how long it waited for them.
	AllReduceTimes() (took, waited time.Duration)
	// Close lets go of the memory the program was bound to (the runtime
	// frees it after): it must not run again.
	Close()
}

// Span is a range of a buffer on a backend's device.
type Span struct {
	Buf    *mem.Buffer
	Offset int64
	Len    int64
}

// Bytes returns the span as host memory, or nil when it is empty or its
// device is not host-addressable.
func (s Span) Bytes() []byte {
	if s.Buf == nil || s.Len == 0 || s.Buf.Bytes() == nil {
		return nil
	}
	return s.Buf.Bytes()[s.Offset : s.Offset+s.Len]
}

// Ptr returns the span's device address (0 when empty).
func (s Span) Ptr() uintptr {
	if s.Buf == nil {
		return 0
	}
	return s.Buf.Ptr() + uintptr(s.Offset)
}

// Collective is what a data-parallel program needs of the processes of the
// run (dist.Comm provides it).
type Collective interface {
	Rank() int
	Size() int
	// AllReduceSum sums buf's float32 or float64 elements over every
	// process, in place.
	AllReduceSum(buf []byte, dtype tensor.DType) error
	// ReduceScatterSum sums send over every process; recv gets this
	// process's block (send is Size()·len(recv) bytes).
	ReduceScatterSum(send, recv []byte, dtype tensor.DType) error
	// AllGather concatenates every process's send into recv, in rank order.
	AllGather(send, recv []byte) error
	// Start begins summing buf over every process, in place, and returns
	// at once; the request's Wait completes it. buf is not touched until
	// then.
	Start(buf []byte, dtype tensor.DType) (Request, error)
	// StartReduceScatter and StartAllGather begin ReduceScatterSum and
	// AllGather and return at once; the request's Wait completes them.
	// Neither buffer is touched until then.
	StartReduceScatter(send, recv []byte, dtype tensor.DType) (Request, error)
	StartAllGather(send, recv []byte) (Request, error)
}

// Request is a collective in flight (dist.Request is the same type).
type Request = interface{ Wait() error }

// RunError is a data error found while running an instruction (a label or
// an index out of range), or a collective that failed (Err holds its
// error: errors.As finds, say, a *dist.TimeoutError through it).
type RunError struct {
	Op    graph.Op
	Owner string
	Site  string
	Msg   string
	Err   error
}

func (e *RunError) Error() string {
	s := fmt.Sprintf("%s (%s", e.Op, e.Owner)
	if e.Site != "" {
		s += ", built at " + e.Site
	}
	s += "): " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the collective's error, if any.
func (e *RunError) Unwrap() error { return e.Err }
