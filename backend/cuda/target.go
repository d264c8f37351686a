package cuda

import (
	"errors"
	"fmt"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// Target is the CUDA backend: compile's Target and runtime's Backend on
// one GPU. compile asks it what it runs (the ops the PTX renderer writes,
// package ptx), what it fuses (every fusion) and how much workspace each
// instruction's kernels and products need (their rendering's); the
// runtime reserves the plan on its GPU (the arena one cuMemAlloc of
// exactly its size) and Bind renders, loads and launches the kernels.
//
// A Target made by Planning has no GPU: it plans for a stated device
// (compute capability, driver, memory) and renders the kernels a run
// would load, but cannot bind a program.
type Target struct {
	arch   ptx.Arch
	cc     [2]int
	host   *cpu.Target // folds constants on the host
	dev    mem.Device  // the GPU, or a stand-in of the stated capacity
	gpu    *GPU        // nil when planning only
	rt     *gpuRuntime // the state of a Target on a GPU (nil when planning)
	closed bool
}

// Planning returns a Target with no GPU, for a device of compute
// capability major.minor with capacity bytes of memory run by a driver of
// CUDA version driver (1000·major + 10·minor): it plans and renders
// kernels as a run on such a device would, and its Device refuses to map.
func Planning(driver, major, minor int, capacity int64) (*Target, error) {
	arch, err := ptx.ArchFor(driver, major, minor)
	if err != nil {
		return nil, err
	}
	if capacity <= 0 {
		return nil, fmt.Errorf("cuda: a planned device of %d bytes", capacity)
	}
	return &Target{arch: arch, cc: [2]int{major, minor}, host: cpu.New(1), dev: &plannedDevice{capacity: capacity}}, nil
}

// Arch returns what the target's kernels are written for.
func (t *Target) Arch() ptx.Arch { return t.arch }

// Name returns "cuda".
func (t *Target) Name() string { return "cuda" }

// Supports reports whether the renderer writes kernels for op on these
// dtypes (ptx.Supports).
func (t *Target) Supports(op graph.Op, dtype, in tensor.DType) bool {
	return ptx.Supports(op, dtype, in)
}

// Fuses reports whether the renderer writes the fusion: every fused chain
// is one kernel, and the max pool's gradient takes the relu mask; the
// paired channel sums (FuseChannelSums), the padding folded into the
// convolutions' windows (FusePadIntoConv) and the moments in the
// convolution (FuseConvMoments) are not written yet, so those ops stay
// apart.
func (t *Target) Fuses(f compile.Fusion) bool {
	return f != compile.FuseChannelSums && f != compile.FusePadIntoConv && f != compile.FuseConvMoments
}

// Lower returns the workspace the instruction's kernels and products need
// (its rendering's). An instruction the renderer refuses needs none here:
// binding it fails, naming the op.
func (t *Target) Lower(it *compile.Instr) int64 {
	l, err := ptx.Render(t.arch, it, nil)
	if err != nil {
		return 0
	}
	return l.Workspace
}

// Scratch returns the persistent scratch instrs need on the GPU: cuBLAS's
// workspace when any instruction runs a product (BLASWorkspaceBytes), and
// an error record (ptx.ErrorRecordBytes) for each instruction that checks
// its data.
func (t *Target) Scratch(instrs []compile.Instr) int64 {
	records, products := scratchNeeds(t.arch, instrs)
	n := int64(records * ptx.ErrorRecordBytes)
	if products {
		n = alignUp(n, 256) + blasWorkspace(t.cc[0])
	}
	return n
}

// scratchNeeds returns how many instructions of instrs check their data
// and whether any runs a product on cuBLAS.
func scratchNeeds(arch ptx.Arch, instrs []compile.Instr) (records int, products bool) {
	for i := range instrs {
		l, err := ptx.Render(arch, &instrs[i], nil)
		if err != nil {
			continue
		}
		if l.Checks {
			records++
		}
		for _, s := range l.Steps {
			products = products || s.Gemm != nil
		}
	}
	return records, products
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// blasWorkspace is the cuBLAS workspace a device of compute capability
// major gets (see GPU.BLASWorkspaceBytes).
func blasWorkspace(major int) int64 {
	if major >= 9 {
		return 32<<20 + 256
	}
	return 4<<20 + 256
}

// Evaluate runs it on host memory (constant folding) with the host's
// kernels.
func (t *Target) Evaluate(it *compile.Instr, bufs [][]byte) error {
	c := *it
	if w := t.host.Lower(&c); w > 0 {
		c.Work = len(bufs)
		bufs = append(bufs, make([]byte, w))
	}
	return t.host.Evaluate(&c, bufs)
}

// Device returns the GPU (or, when planning, a device of the stated
// capacity that maps nothing).
func (t *Target) Device() mem.Device { return t.dev }

// HostAddressable reports false: inputs, outputs and variables are staged
// through host memory and copied.
func (t *Target) HostAddressable() bool { return false }

// ErrPlanningOnly is the error of binding a program on a Target made by
// Planning.
var ErrPlanningOnly = errors.New("cuda: a planning target has no GPU: it plans and renders kernels but runs nothing")

// plannedDevice stands for a GPU of a stated capacity when planning.
type plannedDevice struct{ capacity int64 }

func (d *plannedDevice) Name() string    { return "cuda:0" }
func (d *plannedDevice) Host() bool      { return false }
func (d *plannedDevice) Capacity() int64 { return d.capacity }
func (d *plannedDevice) Mapped() int64   { return 0 }
func (d *plannedDevice) Map(size int64) (mem.Region, error) {
	return mem.Region{}, ErrPlanningOnly
}
func (d *plannedDevice) Unmap(mem.Region) error { return ErrPlanningOnly }
