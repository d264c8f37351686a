package cuda

import (
	"testing"
	"unsafe"

	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/backend/cuda/ptx/ptxtest"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// suiteDevice runs the kernel suite (package ptxtest) through a Target's
// driver: each buffer one cuMemAlloc, kernels loaded with cuModuleLoadData
// and launched with cuLaunchKernel on the target's stream, products on its
// cuBLAS. On the fake driver the launches run in the PTX interpreter; with
// -tags cuda on a GPU they run on the device.
type suiteDevice struct {
	t       *Target
	regions []mem.Region
}

var _ ptxtest.Device = (*suiteDevice)(nil)

func (d *suiteDevice) Arch() ptx.Arch { return d.t.arch }

func (d *suiteDevice) Alloc(name string, data []byte) (uint64, error) {
	g := d.t.gpu
	rg, err := g.Map(mem.RoundPage(int64(len(data))))
	if err != nil {
		return 0, err
	}
	d.regions = append(d.regions, rg)
	return uint64(rg.Ptr), g.CopyHtoD(rg.Ptr, data)
}

func (d *suiteDevice) Read(dst []byte, addr uint64) error {
	return d.t.gpu.CopyDtoH(dst, uintptr(addr))
}

func (d *suiteDevice) Launch(k *ptx.Kernel, grid int, args []uint64) error {
	rt := d.t.rt
	l, err := rt.load(k)
	if err != nil {
		return err
	}
	a := &launchArgs{Grid: [3]uint32{uint32(grid), 1, 1}, Block: [3]uint32{uint32(k.Block), 1, 1}, Values: args,
		Params: make([]unsafe.Pointer, len(args))}
	for i := range args {
		a.Params[i] = unsafe.Pointer(&a.Values[i])
	}
	g := rt.gpu
	if err := g.enter("cuLaunchKernel"); err != nil {
		return err
	}
	r := g.drv.LaunchKernel(l.function, a, rt.stream.h)
	g.leave()
	if err := driverError(g.drv, g.name, "cuLaunchKernel", r); err != nil {
		return err
	}
	return rt.stream.Synchronize()
}

func (d *suiteDevice) Gemm(m *ptx.Gemm, c, a, b uint64) error {
	rt := d.t.rt
	var err error
	if m.In == tensor.Float32 {
		err = rt.blas.MatMul(uintptr(c), uintptr(a), uintptr(b), m.M, m.N, m.K, m.TransA, m.TransB, m.Accumulate)
	} else {
		err = rt.blas.MatMulEx(m.In, uintptr(c), uintptr(a), uintptr(b), m.M, m.N, m.K, m.TransA, m.TransB, m.Accumulate)
	}
	if err != nil {
		return err
	}
	return rt.stream.Synchronize()
}

func (d *suiteDevice) Free() error {
	for _, rg := range d.regions {
		if err := d.t.gpu.Unmap(rg); err != nil {
			return err
		}
	}
	d.regions = nil
	return nil
}

// runSuite runs every case of the kernel suite on t.
func runSuite(t *testing.T, target *Target) {
	cs := ptxtest.Cases()
	dev := &suiteDevice{t: target}
	for i := range cs {
		c := &cs[i]
		t.Run(c.Name, func(t *testing.T) { ptxtest.Check(t, dev, c) })
	}
}

// The kernel suite through the backend's driver calls on the fake GPU:
// modules loaded from the rendered text, launches with their parameter
// pointers, products through the row-major to column-major mapping.
func TestKernelSuiteOnFakeGPU(t *testing.T) {
	target, f := fakeTarget(t, 1<<30)
	defer target.Close()
	runSuite(t, target)
	if f.launches == 0 {
		t.Error("nothing was launched")
	}
}
