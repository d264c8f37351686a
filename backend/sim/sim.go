// Package sim is a simulated device backend: a device of fixed capacity
// (mem.NewSimulated) whose memory the host may not touch, running the host's
// instructions and kernels (package backend/cpu) against device-addressed
// buffers, with every input, output and variable moved by an explicit copy
// in or out. It is the stand-in for a GPU in CI: every device path a GPU
// run takes (binding device buffers, staging inputs through host memory,
// copying outputs and checkpoints back, running out of device memory at
// reservation) is exercised here without hardware, and its results are the
// host's bit for bit.
//
// In the life of a step it sits where a CUDA backend would: compile asks it
// what it fuses and how much workspace each instruction needs (the host's
// answers), runtime reserves the plan on its device, and each run copies
// the inputs in, runs, and copies the outputs out.
package sim

import (
	"fmt"
	"sync/atomic"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/runtime"
)

// Target is a simulated device backend.
type Target struct {
	*cpu.Target // supported ops, lowering, fusion, workspace and folding are the host's
	dev         mem.Device

	copiesIn, copiesOut   atomic.Int64 // copies made
	bytesIn, bytesOut     atomic.Int64 // bytes copied
	bindings, boundInstrs atomic.Int64
}

var _ runtime.Backend = (*Target)(nil)

// New returns a simulated device named "sim" of capacity bytes, planning
// for threads threads as backend/cpu does. It panics if capacity <= 0.
func New(capacity int64, threads int) *Target {
	return &Target{Target: cpu.New(threads), dev: mem.NewSimulated("sim", capacity)}
}

// Name returns "sim".
func (t *Target) Name() string { return "sim" }

// Device returns the simulated device.
func (t *Target) Device() mem.Device { return t.dev }

// HostAddressable reports false: the runtime stages every input, output
// and variable through host memory and this backend's copies.
func (t *Target) HostAddressable() bool { return false }

// Bind binds p's instructions to its device buffers. The simulated device
// is host memory underneath, so the host's kernels run on it directly.
func (t *Target) Bind(p *compile.Program, bufs []runtime.Span, scratch runtime.Span, comm runtime.Collective) (runtime.Bound, error) {
	for i, s := range bufs {
		if s.Buf != nil && s.Buf.Bytes() == nil {
			return nil, fmt.Errorf("sim: buffer %d of %q is not on the simulated device", i, p.Name)
		}
	}
	b, err := t.Target.BindHost(p, bufs, scratch, comm)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	t.bindings.Add(1)
	t.boundInstrs.Add(int64(len(p.Instrs)))
	return b, nil
}

// CopyIn copies src from the host into dst on the device.
func (t *Target) CopyIn(dst runtime.Span, src []byte) error {
	d := dst.Bytes()
	if len(d) != len(src) {
		return fmt.Errorf("sim: copy in of %d bytes into a span of %d", len(src), len(d))
	}
	copy(d, src)
	t.copiesIn.Add(1)
	t.bytesIn.Add(int64(len(src)))
	return nil
}

// CopyOut copies src on the device into the host's dst.
func (t *Target) CopyOut(dst []byte, src runtime.Span) error {
	s := src.Bytes()
	if len(s) != len(dst) {
		return fmt.Errorf("sim: copy out of a span of %d bytes into %d", len(s), len(dst))
	}
	copy(dst, s)
	t.copiesOut.Add(1)
	t.bytesOut.Add(int64(len(dst)))
	return nil
}

// Stats is what a simulated device has done: copies each way, their
// bytes, and programs bound.
type Stats struct {
	CopiesIn, CopiesOut int64
	BytesIn, BytesOut   int64
	Bindings            int64
}

// Stats returns the device's counters so far.
func (t *Target) Stats() Stats {
	return Stats{CopiesIn: t.copiesIn.Load(), CopiesOut: t.copiesOut.Load(), BytesIn: t.bytesIn.Load(),
		BytesOut: t.bytesOut.Load(), Bindings: t.bindings.Load()}
}
