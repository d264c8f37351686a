package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// gpuRuntime is what a Target on a GPU holds to run programs: cuBLAS, the
// stream every step's work is queued on in order (kernels, products and
// the staged copies of inputs), and the kernels loaded so far, by name.
type gpuRuntime struct {
	gpu     *GPU
	blas    *BLAS
	stream  *Stream
	owned   bool // the GPU was opened by New: Close closes it
	mu      sync.Mutex
	kernels map[string]loadedKernel
}

// loadedKernel is a kernel's module and entry on the GPU.
type loadedKernel struct{ module, function uintptr }

var _ runtime.Backend = (*Target)(nil)

// New opens CUDA device ordinal (Open) and returns the backend on it:
// kernels written for the device's compute capability and the driver's
// PTX version, products on cuBLAS, one stream. In a binary built without
// -tags cuda it fails with ErrNotBuilt. Close releases it all.
func New(ordinal int) (*Target, error) {
	g, err := Open(ordinal)
	if err != nil {
		return nil, err
	}
	lib, err := loadBLAS()
	if err != nil {
		g.Close()
		return nil, err
	}
	t, err := onGPU(g, lib)
	if err != nil {
		g.Close()
		return nil, err
	}
	t.rt.owned = true
	return t, nil
}

// onGPU returns the backend on an open GPU with cuBLAS lib.
func onGPU(g *GPU, lib blas) (*Target, error) {
	v, r := g.drv.DriverGetVersion()
	if err := driverError(g.drv, g.name, "cuDriverGetVersion", r); err != nil {
		return nil, err
	}
	maj, minor := g.ComputeCapability()
	arch, err := ptx.ArchFor(v, maj, minor)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s (%s): %w", g.name, g.model, err)
	}
	b, err := g.newBLAS(lib)
	if err != nil {
		return nil, err
	}
	s, err := g.NewStream()
	if err != nil {
		b.Close()
		return nil, err
	}
	if err := b.SetStream(s); err != nil {
		s.Close()
		b.Close()
		return nil, err
	}
	rt := &gpuRuntime{gpu: g, blas: b, stream: s, kernels: map[string]loadedKernel{}}
	return &Target{arch: arch, cc: [2]int{maj, minor}, host: cpu.New(1), dev: g, gpu: g, rt: rt}, nil
}

// GPU returns the GPU the target runs on (nil when planning).
func (t *Target) GPU() *GPU { return t.gpu }

// AllocatorOptions are how the runtime reserves device memory on the GPU:
// in chunks of 2 MiB (the driver's granularity for cuMemAlloc), so that
// small weights share one allocation, and anything larger (the plan's
// arena, a large weight) is one cuMemAlloc of exactly its size rounded up
// to a page: never a pool that grows.
func (t *Target) AllocatorOptions() mem.AllocatorOptions {
	return mem.AllocatorOptions{ChunkSize: 2 << 20}
}

// StagingDevice is the host memory inputs, outputs and variables are
// staged through: the GPU's pinned memory (cuMemHostAlloc), charged to
// the host ledger, from which copies to the device run on the stream.
func (t *Target) StagingDevice() mem.Device {
	if t.gpu == nil {
		return nil
	}
	return t.gpu.Pinned()
}

// Close unloads the kernels, destroys the stream and cuBLAS's handle and,
// for a Target made by New, closes the GPU.
func (t *Target) Close() error {
	if t.closed || t.rt == nil {
		t.closed = true
		return nil
	}
	t.closed = true
	rt := t.rt
	var errs []error
	if err := rt.gpu.enter("cuModuleUnload"); err == nil {
		for _, k := range rt.kernels {
			if r := rt.gpu.drv.ModuleUnload(k.module); r != cudaSuccess {
				errs = append(errs, driverError(rt.gpu.drv, rt.gpu.name, "cuModuleUnload", r))
			}
		}
		rt.gpu.leave()
	}
	rt.kernels = nil
	errs = append(errs, rt.stream.Close(), rt.blas.Close())
	if rt.owned {
		errs = append(errs, rt.gpu.Close())
	}
	return errors.Join(errs...)
}

// load returns the kernel on the GPU, loading its module on first use.
func (rt *gpuRuntime) load(k *ptx.Kernel) (loadedKernel, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if l, ok := rt.kernels[k.Name]; ok {
		return l, nil
	}
	g := rt.gpu
	if err := g.enter("cuModuleLoadData"); err != nil {
		return loadedKernel{}, err
	}
	defer g.leave()
	m, r := g.drv.ModuleLoadData(k.Text)
	if err := driverError(g.drv, g.name, "cuModuleLoadData", r); err != nil {
		return loadedKernel{}, fmt.Errorf("cuda: loading kernel %s: %w", k.Name, err)
	}
	f, r := g.drv.ModuleGetFunction(m, k.Name)
	if err := driverError(g.drv, g.name, "cuModuleGetFunction", r); err != nil {
		g.drv.ModuleUnload(m)
		return loadedKernel{}, fmt.Errorf("cuda: kernel %s: %w", k.Name, err)
	}
	l := loadedKernel{module: m, function: f}
	rt.kernels[k.Name] = l
	return l, nil
}

// step is one bound step: a launch (function and its arguments, made
// once) or a product.
type step struct {
	instr  int
	kernel string
	fn     uintptr
	args   launchArgs
	gemm   *boundGemm
}

// boundGemm is a product on device addresses.
type boundGemm struct {
	dst, a, b      uintptr
	m, n, k        int
	transA, transB bool
	accumulate     bool
	in             tensor.DType
}

// check is an instruction that reports bad data in its error record.
type check struct {
	it  *compile.Instr
	off int64 // the record's offset in the scratch
}

// bound is a program bound to its buffers on the GPU.
type bound struct {
	rt      *gpuRuntime
	name    string
	instrs  []compile.Instr
	steps   []step
	checks  []check
	records uintptr // the error records in the scratch
	host    []byte  // their copy on the host
}

// Bind renders every instruction of p, loads its kernels (each once per
// Target) and binds the launches and products to the buffers: each
// argument is an address fixed here, so a run only queues work.
func (t *Target) Bind(p *compile.Program, bufs []runtime.Span, scratch runtime.Span, comm runtime.Collective) (runtime.Bound, error) {
	if t.rt == nil {
		return nil, ErrPlanningOnly
	}
	if comm != nil {
		return nil, fmt.Errorf("cuda: binding %q: data-parallel collectives (NCCL) are not built for the GPU backend yet", p.Name)
	}
	records, products := scratchNeeds(t.arch, p.Instrs)
	need := int64(records * ptx.ErrorRecordBytes)
	blasAt := alignUp(need, 256)
	if products {
		need = blasAt + blasWorkspace(t.cc[0])
	}
	if scratch.Len < need {
		return nil, fmt.Errorf("cuda: binding %q: a scratch of %d bytes, the kernels need %d", p.Name, scratch.Len, need)
	}
	b := &bound{rt: t.rt, name: p.Name, instrs: p.Instrs, records: scratch.Ptr(), host: make([]byte, records*ptx.ErrorRecordBytes)}
	if products {
		if err := t.rt.blas.setWorkspaceAt(scratch.Ptr()+uintptr(blasAt), uint64(blasWorkspace(t.cc[0]))); err != nil {
			return nil, err
		}
	}
	for i := range p.Instrs {
		if err := t.bindInstr(b, p, i, bufs); err != nil {
			return nil, fmt.Errorf("cuda: binding %q: %w", p.Name, err)
		}
	}
	if records > 0 {
		if err := t.gpu.Zero(mem.Region{Ptr: b.records, Size: int64(len(b.host))}, 0, int64(len(b.host))); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// bindInstr renders instruction i and appends its steps to b.
func (t *Target) bindInstr(b *bound, p *compile.Program, i int, bufs []runtime.Span) error {
	it := &p.Instrs[i]
	inN := make([]int, len(it.In))
	for k, id := range it.In {
		inN[k] = p.Plan.Buffers[id].Shape.Size()
	}
	l, err := ptx.Render(t.arch, it, inN)
	if err != nil {
		return err
	}
	var rec int64 = -1
	if l.Checks {
		rec = int64(len(b.checks) * ptx.ErrorRecordBytes)
		b.checks = append(b.checks, check{it: it, off: rec})
	}
	span := func(a ptx.Arg) (runtime.Span, error) {
		switch a.Role {
		case ptx.RoleOut:
			return bufs[it.Out], nil
		case ptx.RoleIn:
			return bufs[it.In[a.Index]], nil
		case ptx.RolePart:
			return bufs[it.Parts[a.Index]], nil
		case ptx.RoleWork:
			if it.Work < 0 {
				return runtime.Span{}, fmt.Errorf("%s (%s) has no workspace; its kernels need %d bytes", it.Op, it.Owner, l.Workspace)
			}
			return bufs[it.Work], nil
		}
		return runtime.Span{Buf: nil}, nil
	}
	addr := func(a ptx.Arg) (uintptr, error) {
		if a.Role == ptx.RoleError {
			return b.records + uintptr(rec) + uintptr(a.Offset), nil
		}
		s, err := span(a)
		if err != nil {
			return 0, err
		}
		if a.Offset < 0 || a.Offset > s.Len {
			return 0, fmt.Errorf("%s (%s): argument %s lies outside its buffer of %d bytes", it.Op, it.Owner, a, s.Len)
		}
		return s.Ptr() + uintptr(a.Offset), nil
	}
	for _, s := range l.Steps {
		if s.Gemm != nil {
			g := s.Gemm
			st := step{instr: i, gemm: &boundGemm{m: g.M, n: g.N, k: g.K, transA: g.TransA, transB: g.TransB, accumulate: g.Accumulate, in: g.In}}
			var err error
			for _, x := range []struct {
				dst *uintptr
				arg ptx.Arg
			}{{&st.gemm.dst, g.C}, {&st.gemm.a, g.A}, {&st.gemm.b, g.B}} {
				if *x.dst, err = addr(x.arg); err != nil {
					return err
				}
			}
			b.steps = append(b.steps, st)
			continue
		}
		k, err := t.rt.load(s.Kernel)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", it.Op, it.Owner, err)
		}
		st := step{instr: i, kernel: s.Kernel.Name, fn: k.function}
		st.args = launchArgs{Grid: [3]uint32{uint32(s.Grid), 1, 1}, Block: [3]uint32{uint32(s.Kernel.Block), 1, 1},
			Values: make([]uint64, len(s.Args)), Params: make([]unsafe.Pointer, len(s.Args))}
		for k, a := range s.Args {
			v, err := addr(a)
			if err != nil {
				return err
			}
			st.args.Values[k] = uint64(v)
		}
		for j := range st.args.Values { // each points into the step's own Values
			st.args.Params[j] = unsafe.Pointer(&st.args.Values[j])
		}
		b.steps = append(b.steps, st)
	}
	return nil
}

// Run queues every step on the stream in order, waits for them, and reads
// the error records of the instructions that check their data. It
// allocates nothing on a GPU.
func (b *bound) Run() error {
	rt := b.rt
	g := rt.gpu
	for k := range b.steps {
		s := &b.steps[k]
		if s.gemm != nil {
			m := s.gemm
			var err error
			if m.in == tensor.Float32 {
				err = rt.blas.MatMul(m.dst, m.a, m.b, m.m, m.n, m.k, m.transA, m.transB, m.accumulate)
			} else {
				err = rt.blas.MatMulEx(m.in, m.dst, m.a, m.b, m.m, m.n, m.k, m.transA, m.transB, m.accumulate)
			}
			if err != nil {
				return b.fail(s.instr, err)
			}
			continue
		}
		if err := g.enter("cuLaunchKernel"); err != nil {
			return err
		}
		r := g.drv.LaunchKernel(s.fn, &s.args, rt.stream.h)
		g.leave()
		if err := driverError(g.drv, g.name, "cuLaunchKernel", r); err != nil {
			return b.fail(s.instr, fmt.Errorf("kernel %s: %w", s.kernel, err))
		}
	}
	if err := rt.stream.Synchronize(); err != nil {
		return fmt.Errorf("cuda: running %q: %w", b.name, err)
	}
	if len(b.checks) == 0 {
		return nil
	}
	if err := g.CopyDtoH(b.host, b.records); err != nil {
		return err
	}
	for _, c := range b.checks {
		rec := b.host[c.off : c.off+ptx.ErrorRecordBytes]
		if binary.LittleEndian.Uint32(rec) == 0 {
			continue
		}
		pos, val := int32(binary.LittleEndian.Uint32(rec[4:])), int32(binary.LittleEndian.Uint32(rec[8:]))
		clear(b.host)
		if err := g.Zero(mem.Region{Ptr: b.records, Size: int64(len(b.host))}, 0, int64(len(b.host))); err != nil {
			return err
		}
		return &runtime.RunError{Op: c.it.Op, Owner: c.it.Owner, Site: c.it.Site, Msg: badData(c.it, pos, val)}
	}
	return nil
}

// badData says what an instruction's error record reports, as the host's
// kernels say it.
func badData(it *compile.Instr, pos, val int32) string {
	switch it.Op {
	case graph.OpSoftmaxCrossEntropy, graph.OpSoftmaxCrossEntropyGrad:
		return fmt.Sprintf("label %d of example %d is outside [0, %d)", val, pos, it.Matrix.Cols)
	case graph.OpCacheWrite:
		return fmt.Sprintf("position %d: %d rows do not fit a cache of %d", pos, val, it.Shape[1])
	}
	return fmt.Sprintf("index %d at position %d is out of range", val, pos)
}

// fail wraps a step's error with its instruction.
func (b *bound) fail(i int, err error) error {
	it := &b.instrs[i]
	return fmt.Errorf("cuda: running %q: %s (%s, built at %s): %w", b.name, it.Op, it.Owner, it.Site, err)
}

// AllReduceTimes returns zeros: a GPU program has no collectives yet.
func (b *bound) AllReduceTimes() (took, waited time.Duration) { return 0, 0 }

// Close lets go of the program (its kernels stay loaded on the Target).
func (b *bound) Close() { b.steps, b.checks = nil, nil }

// CopyIn copies src from the host into dst on the GPU: queued on the
// stream when src is pinned (the staging area), so that it runs in order
// with the step's kernels, else at once.
func (t *Target) CopyIn(dst runtime.Span, src []byte) error {
	if t.gpu == nil {
		return ErrPlanningOnly
	}
	if int64(len(src)) != dst.Len {
		return fmt.Errorf("cuda: copy in of %d bytes into a span of %d", len(src), dst.Len)
	}
	if p := t.gpu.pinnedIfMade(); p != nil && p.contains(src) {
		return t.gpu.CopyHtoDAsync(dst.Ptr(), src, t.rt.stream)
	}
	return t.gpu.CopyHtoD(dst.Ptr(), src)
}

// CopyOut copies src on the GPU into the host's dst, after the work
// queued on the stream.
func (t *Target) CopyOut(dst []byte, src runtime.Span) error {
	if t.gpu == nil {
		return ErrPlanningOnly
	}
	if int64(len(dst)) != src.Len {
		return fmt.Errorf("cuda: copy out of a span of %d bytes into %d", src.Len, len(dst))
	}
	if err := t.rt.stream.Synchronize(); err != nil {
		return err
	}
	return t.gpu.CopyDtoH(dst, src.Ptr())
}
