package cuda

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/headroom-ml/headroom/mem"
)

// GPU is one CUDA device, through its primary context (the context the CUDA
// runtime and PyTorch use too). It is a mem.Device whose Map is one
// cuMemAlloc of exactly the requested size and whose Unmap is cuMemFree, so
// an Allocator over it takes from the driver exactly the chunks it maps, and
// a mem.Zeroer (cuMemsetD8). Regions are device memory: Host is false, Ptr is
// the device address and Bytes is nil.
//
// A GPU is safe for concurrent use. Every driver call makes the context
// current on the calling OS thread first (the driver's current context is
// per thread, and goroutines move between threads).
type GPU struct {
	drv    driver
	name   string // "cuda:0"
	dev    int32  // CUdevice
	ctx    uintptr
	model  string
	cc     [2]int
	total  int64
	closed atomic.Bool

	mu      sync.Mutex
	mapped  int64
	regions map[uint64]int64 // live mappings: device address -> size
	pinned  *Pinned          // made on first use
	blas    []*BLAS          // open handles, destroyed by Close
}

// Open opens the CUDA device with the given ordinal (0 is the first GPU, as
// in CUDA_VISIBLE_DEVICES order): it loads the driver library on first use,
// initializes it (cuInit) and retains the device's primary context. It
// fails with ErrNotBuilt in a binary built without -tags cuda, and with an
// error saying what is missing when there is no driver or no such device.
func Open(ordinal int) (*GPU, error) {
	d, err := loadDriver()
	if err != nil {
		return nil, err
	}
	return open(d, ordinal)
}

// Device is Open as a mem.Device, for code that only maps memory. The
// device is a *GPU: Close it when done.
func Device(ordinal int) (mem.Device, error) {
	g, err := Open(ordinal)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// DeviceCount returns the number of CUDA devices the driver sees.
func DeviceCount() (int, error) {
	d, err := loadDriver()
	if err != nil {
		return 0, err
	}
	n, r := d.DeviceGetCount()
	if err := driverError(d, "", "cuDeviceGetCount", r); err != nil {
		return 0, err
	}
	return n, nil
}

// DriverVersion returns the CUDA version the driver supports, as
// cuDriverGetVersion reports it: 1000·major + 10·minor (12080 is 12.8).
func DriverVersion() (int, error) {
	d, err := loadDriver()
	if err != nil {
		return 0, err
	}
	v, r := d.DriverGetVersion()
	if err := driverError(d, "", "cuDriverGetVersion", r); err != nil {
		return 0, err
	}
	return v, nil
}

// ParseDevice parses a device name as the command line takes it: "cuda"
// (device 0) or "cuda:N".
func ParseDevice(s string) (int, error) {
	if s == "cuda" {
		return 0, nil
	}
	rest, ok := strings.CutPrefix(s, "cuda:")
	n, err := strconv.Atoi(rest)
	if !ok || err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, fmt.Errorf("cuda: bad device %q (want cuda or cuda:N, N >= 0)", s)
	}
	return n, nil
}

func open(d driver, ordinal int) (*GPU, error) {
	n, r := d.DeviceGetCount()
	if err := driverError(d, "", "cuDeviceGetCount", r); err != nil {
		return nil, err
	}
	name := "cuda:" + strconv.Itoa(ordinal)
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: no device %s: the driver sees %d CUDA device(s)", name, n)
	}
	g := &GPU{drv: d, name: name, regions: map[uint64]int64{}}
	var err error
	g.dev, r = d.DeviceGet(ordinal)
	if err = driverError(d, name, "cuDeviceGet", r); err != nil {
		return nil, err
	}
	if g.model, r = d.DeviceGetName(g.dev); r != cudaSuccess {
		return nil, driverError(d, name, "cuDeviceGetName", r)
	}
	for i, attr := range []int32{attrComputeCapabilityMajor, attrComputeCapabilityMinor} {
		if g.cc[i], r = d.DeviceGetAttribute(attr, g.dev); r != cudaSuccess {
			return nil, driverError(d, name, "cuDeviceGetAttribute", r)
		}
	}
	if g.ctx, r = d.DevicePrimaryCtxRetain(g.dev); r != cudaSuccess {
		return nil, driverError(d, name, "cuDevicePrimaryCtxRetain", r)
	}
	_, total, err := g.MemInfo()
	if err != nil {
		d.DevicePrimaryCtxRelease(g.dev)
		return nil, err
	}
	g.total = total
	return g, nil
}

// enter makes g's context current on this OS thread and keeps the calling
// goroutine on the thread until leave.
func (g *GPU) enter(op string) error {
	if g.closed.Load() {
		return fmt.Errorf("cuda: %s on %s after Close", op, g.name)
	}
	runtime.LockOSThread()
	if r := g.drv.CtxSetCurrent(g.ctx); r != cudaSuccess {
		runtime.UnlockOSThread()
		return driverError(g.drv, g.name, "cuCtxSetCurrent", r)
	}
	return nil
}

func (g *GPU) leave() { runtime.UnlockOSThread() }

// Name returns "cuda:N".
func (g *GPU) Name() string { return g.name }

// Host returns false: device memory is not addressable by the CPU.
func (g *GPU) Host() bool { return false }

// Capacity returns the device's total memory as cuMemGetInfo reports it
// when the GPU was opened. What this process can map is less: the CUDA
// context, cuBLAS and other processes hold some (see MemInfo).
func (g *GPU) Capacity() int64 { return g.total }

// Model returns the device's name, e.g. "NVIDIA H100 80GB HBM3".
func (g *GPU) Model() string { return g.model }

// ComputeCapability returns the device's compute capability, e.g. 9, 0.
func (g *GPU) ComputeCapability() (major, minor int) { return g.cc[0], g.cc[1] }

// Mapped returns the bytes mapped through g and not yet unmapped.
func (g *GPU) Mapped() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mapped
}

// DriverBytes returns what the live mappings take from the driver's free
// count (cuMemGetInfo): each cuMemAlloc rounded up to 2 MiB, the driver's
// granularity.
func (g *GPU) DriverBytes() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var n int64
	for _, size := range g.regions {
		n += (size + 2<<20 - 1) &^ (2<<20 - 1)
	}
	return n
}

// MemInfo returns the device's free and total memory (cuMemGetInfo_v2): free
// counts what every process on the device has left.
func (g *GPU) MemInfo() (free, total int64, err error) {
	if err := g.enter("cuMemGetInfo_v2"); err != nil {
		return 0, 0, err
	}
	f, t, r := g.drv.MemGetInfo()
	g.leave()
	if err := driverError(g.drv, g.name, "cuMemGetInfo_v2", r); err != nil {
		return 0, 0, err
	}
	return int64(f), int64(t), nil
}

// Map allocates size bytes of device memory with one cuMemAlloc_v2 of
// exactly size (a positive multiple of mem.PageSize); the address is
// 256-byte aligned. When the driver is out of memory it returns an
// *mem.OOMError whose Ledger is the device name.
func (g *GPU) Map(size int64) (mem.Region, error) {
	if size <= 0 || size%mem.PageSize != 0 {
		return mem.Region{}, fmt.Errorf("cuda: map %d bytes on %s: size must be a positive multiple of %d", size, g.name, mem.PageSize)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.enter("cuMemAlloc_v2"); err != nil {
		return mem.Region{}, err
	}
	p, r := g.drv.MemAlloc(uint64(size))
	var free uint64
	if r == cudaErrorOutOfMemory {
		free, _, _ = g.drv.MemGetInfo()
	}
	g.leave()
	if r == cudaErrorOutOfMemory {
		return mem.Region{}, &mem.OOMError{
			Ledger: g.name, Category: mem.NumCategories, Owner: "cuMemAlloc_v2", Request: size,
			Budget: g.total, Live: g.mapped, LargestFree: -1,
			Remedies: []string{fmt.Sprintf("the driver reports %s free of %s on %s; this process has mapped %s through headroom (the rest is the CUDA context, libraries and other processes)",
				mem.FormatBytes(int64(free)), mem.FormatBytes(g.total), g.name, mem.FormatBytes(g.mapped))},
		}
	}
	if err := driverError(g.drv, g.name, "cuMemAlloc_v2", r); err != nil {
		return mem.Region{}, fmt.Errorf("cuda: map %d bytes: %w", size, err)
	}
	g.regions[p] = size
	g.mapped += size
	return mem.Region{Ptr: uintptr(p), Size: size}, nil
}

// Unmap frees a Region obtained from Map (cuMemFree_v2).
func (g *GPU) Unmap(rg mem.Region) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := uint64(rg.Ptr)
	if size, ok := g.regions[p]; !ok || size != rg.Size {
		return fmt.Errorf("cuda: unmap of %d bytes at %#x on %s: not a mapping of this device", rg.Size, rg.Ptr, g.name)
	}
	if err := g.enter("cuMemFree_v2"); err != nil {
		return err
	}
	r := g.drv.MemFree(p)
	g.leave()
	if err := driverError(g.drv, g.name, "cuMemFree_v2", r); err != nil {
		return fmt.Errorf("cuda: unmap of %d bytes at %#x: %w", rg.Size, rg.Ptr, err)
	}
	delete(g.regions, p)
	g.mapped -= rg.Size
	return nil
}

// Zero clears n bytes at offset off of a Region from Map (cuMemsetD8_v2);
// it makes g a mem.Zeroer, so Allocator.AllocZeroed works on it.
func (g *GPU) Zero(rg mem.Region, off, n int64) error {
	if off < 0 || n < 0 || off+n > rg.Size {
		return fmt.Errorf("cuda: zero [%d, %d) of a %d-byte region on %s: out of range", off, off+n, rg.Size, g.name)
	}
	if err := g.check("cuMemsetD8_v2", rg.Ptr+uintptr(off), n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if err := g.enter("cuMemsetD8_v2"); err != nil {
		return err
	}
	r := g.drv.MemsetD8(uint64(rg.Ptr)+uint64(off), 0, uint64(n))
	g.leave()
	return driverError(g.drv, g.name, "cuMemsetD8_v2", r)
}

// check returns an error unless [p, p+n) lies inside one live mapping of g.
// It keeps a wrong size or address from writing over other buffers.
func (g *GPU) check(op string, p uintptr, n int64) error {
	if g.inside(p, n) {
		return nil
	}
	return fmt.Errorf("cuda: %s of %d bytes at %#x on %s: not inside memory mapped by this device", op, n, p, g.name)
}

// inside reports whether [p, p+n) lies inside one live mapping of g.
func (g *GPU) inside(p uintptr, n int64) bool {
	if n < 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for base, size := range g.regions {
		if off := uint64(p) - base; uint64(p) >= base && off <= uint64(size) && uint64(n) <= uint64(size)-off {
			return true
		}
	}
	return false
}

// CopyHtoD copies src to device address dst (cuMemcpyHtoD_v2) and returns
// when the copy is done. [dst, dst+len(src)) must lie in one mapping of g.
func (g *GPU) CopyHtoD(dst uintptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := g.check("cuMemcpyHtoD_v2", dst, int64(len(src))); err != nil {
		return err
	}
	if err := g.enter("cuMemcpyHtoD_v2"); err != nil {
		return err
	}
	r := g.drv.MemcpyHtoD(uint64(dst), unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)))
	g.leave()
	return driverError(g.drv, g.name, "cuMemcpyHtoD_v2", r)
}

// CopyDtoH copies len(dst) bytes from device address src to dst
// (cuMemcpyDtoH_v2) and returns when the copy is done.
func (g *GPU) CopyDtoH(dst []byte, src uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	if err := g.check("cuMemcpyDtoH_v2", src, int64(len(dst))); err != nil {
		return err
	}
	if err := g.enter("cuMemcpyDtoH_v2"); err != nil {
		return err
	}
	r := g.drv.MemcpyDtoH(unsafe.Pointer(unsafe.SliceData(dst)), uint64(src), uint64(len(dst)))
	g.leave()
	return driverError(g.drv, g.name, "cuMemcpyDtoH_v2", r)
}

// CopyDtoD copies n bytes between device addresses (cuMemcpyDtoD_v2).
func (g *GPU) CopyDtoD(dst, src uintptr, n int64) error {
	if n == 0 {
		return nil
	}
	if err := g.check("cuMemcpyDtoD_v2", dst, n); err != nil {
		return err
	}
	if err := g.check("cuMemcpyDtoD_v2", src, n); err != nil {
		return err
	}
	if err := g.enter("cuMemcpyDtoD_v2"); err != nil {
		return err
	}
	r := g.drv.MemcpyDtoD(uint64(dst), uint64(src), uint64(n))
	g.leave()
	return driverError(g.drv, g.name, "cuMemcpyDtoD_v2", r)
}

// Synchronize waits for all work on the device's context (cuCtxSynchronize).
func (g *GPU) Synchronize() error {
	if err := g.enter("cuCtxSynchronize"); err != nil {
		return err
	}
	r := g.drv.CtxSynchronize()
	g.leave()
	return driverError(g.drv, g.name, "cuCtxSynchronize", r)
}

// Close releases the primary context and destroys the cuBLAS handles made
// by NewBLAS. Every region of g and of its Pinned device must have been
// unmapped; otherwise Close fails and releases nothing.
func (g *GPU) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Load() {
		return nil
	}
	if g.mapped != 0 {
		return fmt.Errorf("cuda: close %s: %s in %d region(s) still mapped", g.name, mem.FormatBytes(g.mapped), len(g.regions))
	}
	if g.pinned != nil {
		if n := g.pinned.Mapped(); n != 0 {
			return fmt.Errorf("cuda: close %s: %s of pinned host memory still mapped", g.name, mem.FormatBytes(n))
		}
	}
	for _, b := range g.blas {
		if err := b.destroy(); err != nil {
			return err
		}
	}
	g.blas = nil
	if err := g.enter("cuDevicePrimaryCtxRelease_v2"); err != nil {
		return err
	}
	r := g.drv.DevicePrimaryCtxRelease(g.dev)
	g.leave()
	if err := driverError(g.drv, g.name, "cuDevicePrimaryCtxRelease_v2", r); err != nil {
		return err
	}
	g.closed.Store(true)
	return nil
}
