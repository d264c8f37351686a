package mem

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// PageSize is the granularity of device mappings: Device.Map takes a
// multiple of it. It is the smallest page size of the platforms headroom
// runs on; where the OS page is larger (os.Getpagesize), the kernel rounds a
// mapping up and mmap still returns page-aligned memory, so accounting in
// units of PageSize stays exact.
const PageSize = 4096

// RoundPage rounds n up to a multiple of PageSize.
func RoundPage(n int64) int64 { return (n + PageSize - 1) &^ (PageSize - 1) }

// Device is where memory lives. Implementations are safe for concurrent use.
type Device interface {
	// Name identifies the device in reports: "cpu", "sim", "cuda:0".
	Name() string
	// Host reports whether Regions are addressable by the CPU as []byte.
	Host() bool
	// Capacity is the total bytes the device can hold; 0 means limited only
	// by the OS.
	Capacity() int64
	// Map maps size bytes, a positive multiple of PageSize. When the
	// capacity would be exceeded it returns an *OOMError whose Ledger is the
	// device name.
	Map(size int64) (Region, error)
	// Unmap returns a Region obtained from Map.
	Unmap(r Region) error
	// Mapped returns the bytes currently mapped.
	Mapped() int64
}

// Zeroer is implemented by devices that are not Host but can clear memory
// (a CUDA memset); Allocator.AllocZeroed needs it on such devices.
type Zeroer interface {
	Zero(r Region, off, n int64) error
}

// Region is one mapping from a Device. Ptr is its address (a device address
// when the device is not Host); Bytes is the memory as a slice, nil when the
// device is not Host.
type Region struct {
	Ptr   uintptr
	Size  int64
	Bytes []byte
}

// mmapDevice maps anonymous private memory from the OS. It backs both the
// CPU device and simulated devices (which add a capacity).
type mmapDevice struct {
	name     string
	capacity int64 // 0: only the OS limits it

	mu      sync.Mutex
	mapped  int64
	regions map[uintptr][]byte // live mappings by address, as mmap returned them
}

var (
	cpuOnce sync.Once
	cpuDev  *mmapDevice
)

// CPU returns the host device: anonymous private memory mapped from the OS
// (mmap), outside the Go heap, returned to the OS by Unmap (munmap). All
// callers share one instance. Its Capacity is 0 (limited by the OS); a
// mapping the OS refuses (ENOMEM) is an *OOMError.
func CPU() Device {
	cpuOnce.Do(func() { cpuDev = newMmapDevice("cpu", 0) })
	return cpuDev
}

// NewSimulated returns a device with a fixed capacity in bytes and no
// hardware. It is backed by host memory (mmap) so tests can read and write
// its buffers, and its Host reports true; Map refuses a mapping that would
// pass the capacity with an *OOMError. Every device-memory path (reservation,
// OOM, fit-to-budget) is tested on it. It panics if capacity <= 0.
func NewSimulated(name string, capacity int64) Device {
	if capacity <= 0 {
		panic(fmt.Sprintf("mem: NewSimulated(%q, %d): capacity must be positive", name, capacity))
	}
	return newMmapDevice(name, capacity)
}

func newMmapDevice(name string, capacity int64) *mmapDevice {
	return &mmapDevice{name: name, capacity: capacity, regions: make(map[uintptr][]byte)}
}

func (d *mmapDevice) Name() string    { return d.name }
func (d *mmapDevice) Host() bool      { return true }
func (d *mmapDevice) Capacity() int64 { return d.capacity }

func (d *mmapDevice) Mapped() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mapped
}

func (d *mmapDevice) Map(size int64) (Region, error) {
	if size <= 0 || size%PageSize != 0 {
		return Region{}, fmt.Errorf("mem: map %d bytes on %s: size must be a positive multiple of %d", size, d.name, PageSize)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capacity > 0 && d.mapped+size > d.capacity {
		return Region{}, d.oomLocked(size)
	}
	b, err := mapAnon(size)
	if err != nil {
		if errors.Is(err, errNoMem) {
			return Region{}, d.oomLocked(size)
		}
		return Region{}, fmt.Errorf("mem: map %d bytes on %s: %w", size, d.name, err)
	}
	ptr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	d.regions[ptr] = b
	d.mapped += size
	return Region{Ptr: ptr, Size: size, Bytes: b}, nil
}

func (d *mmapDevice) Unmap(r Region) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.regions[r.Ptr]
	if !ok || int64(len(b)) != r.Size {
		return fmt.Errorf("mem: unmap of %d bytes at %#x on %s: not a mapping of this device", r.Size, r.Ptr, d.name)
	}
	if err := unmapAnon(b); err != nil {
		return fmt.Errorf("mem: unmap of %d bytes at %#x on %s: %w", r.Size, r.Ptr, d.name, err)
	}
	delete(d.regions, r.Ptr)
	d.mapped -= r.Size
	return nil
}

// ReleasePages gives the whole pages of [off, off+n) of r back to the OS
// (they stay mapped and read as zero when touched again), so that the
// process's resident memory, and its container's accounting, drop at once.
func (d *mmapDevice) ReleasePages(r Region, off, n int64) error {
	lo, hi := RoundPage(off), (off+n)&^(PageSize-1)
	if hi <= lo || r.Bytes == nil {
		return nil
	}
	return releasePages(r.Bytes[lo:hi])
}

// PageReleaser is a Device that can give the pages of free memory back to
// the OS without unmapping it (Allocator.Trim uses it).
type PageReleaser interface {
	ReleasePages(r Region, off, n int64) error
}

func (d *mmapDevice) oomLocked(size int64) *OOMError {
	return &OOMError{
		Ledger:      d.name,
		Request:     size,
		Budget:      d.capacity,
		Live:        d.mapped,
		LargestFree: -1,
	}
}
