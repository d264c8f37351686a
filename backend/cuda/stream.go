package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/headroom-ml/headroom/mem"
)

// Pinned is page-locked host memory registered with a GPU's context
// (cuMemHostAlloc), as a mem.Device: Host is true and Regions have Bytes.
// Copies between it and the device run asynchronously on a Stream, which
// is what the input staging area needs: an Allocator over Pinned that
// charges the host ledger (category input) holds the double-buffered
// batches, so the staging bytes are on the same ledger as the rest of the
// host's memory. Capacity is 0 (the OS limits it).
type Pinned struct {
	g    *GPU
	name string

	mu      sync.Mutex
	mapped  int64
	regions map[uintptr][]byte
}

// Pinned returns the GPU's pinned host memory device, named "cuda:N/pinned".
func (g *GPU) Pinned() *Pinned {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pinned == nil {
		g.pinned = &Pinned{g: g, name: g.name + "/pinned", regions: map[uintptr][]byte{}}
	}
	return g.pinned
}

// pinnedIfMade returns the Pinned device if Pinned was called, else nil.
func (g *GPU) pinnedIfMade() *Pinned {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pinned
}

// Name returns "cuda:N/pinned".
func (p *Pinned) Name() string { return p.name }

// Host returns true: pinned memory is host memory.
func (p *Pinned) Host() bool { return true }

// Capacity returns 0: only the OS limits page-locked memory.
func (p *Pinned) Capacity() int64 { return 0 }

// Mapped returns the pinned bytes currently mapped.
func (p *Pinned) Mapped() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mapped
}

// Map allocates size bytes of page-locked host memory (cuMemHostAlloc),
// size a positive multiple of mem.PageSize. When the driver refuses for
// lack of memory it returns an *mem.OOMError naming the device.
func (p *Pinned) Map(size int64) (mem.Region, error) {
	if size <= 0 || size%mem.PageSize != 0 {
		return mem.Region{}, fmt.Errorf("cuda: map %d bytes on %s: size must be a positive multiple of %d", size, p.name, mem.PageSize)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.g
	if err := g.enter("cuMemHostAlloc"); err != nil {
		return mem.Region{}, err
	}
	ptr, r := g.drv.MemHostAlloc(uint64(size))
	g.leave()
	if r == cudaErrorOutOfMemory {
		return mem.Region{}, &mem.OOMError{Ledger: p.name, Category: mem.NumCategories, Owner: "cuMemHostAlloc",
			Request: size, Live: p.mapped, LargestFree: -1}
	}
	if err := driverError(g.drv, g.name, "cuMemHostAlloc", r); err != nil {
		return mem.Region{}, fmt.Errorf("cuda: map %d bytes of pinned host memory: %w", size, err)
	}
	b := unsafe.Slice((*byte)(ptr), size)
	addr := uintptr(ptr)
	p.regions[addr] = b
	p.mapped += size
	return mem.Region{Ptr: addr, Size: size, Bytes: b}, nil
}

// Unmap frees a Region obtained from Map (cuMemFreeHost).
func (p *Pinned) Unmap(rg mem.Region) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.regions[rg.Ptr]
	if !ok || int64(len(b)) != rg.Size {
		return fmt.Errorf("cuda: unmap of %d bytes at %#x on %s: not a mapping of this device", rg.Size, rg.Ptr, p.name)
	}
	g := p.g
	if err := g.enter("cuMemFreeHost"); err != nil {
		return err
	}
	r := g.drv.MemFreeHost(unsafe.Pointer(unsafe.SliceData(b)))
	g.leave()
	if err := driverError(g.drv, g.name, "cuMemFreeHost", r); err != nil {
		return err
	}
	delete(p.regions, rg.Ptr)
	p.mapped -= rg.Size
	return nil
}

// contains reports whether b lies inside one pinned mapping.
func (p *Pinned) contains(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	p.mu.Lock()
	defer p.mu.Unlock()
	for base, r := range p.regions {
		if addr >= base && addr-base+uintptr(len(b)) <= uintptr(len(r)) {
			return true
		}
	}
	return false
}

// Stream is a CUDA stream: work queued on it runs in order, and
// concurrently with other streams and with the host.
type Stream struct {
	g *GPU
	h uintptr
}

// NewStream creates a stream that does not synchronize with the legacy
// default stream (cuStreamCreate with CU_STREAM_NON_BLOCKING).
func (g *GPU) NewStream() (*Stream, error) {
	if err := g.enter("cuStreamCreate"); err != nil {
		return nil, err
	}
	h, r := g.drv.StreamCreate()
	g.leave()
	if err := driverError(g.drv, g.name, "cuStreamCreate", r); err != nil {
		return nil, err
	}
	return &Stream{g: g, h: h}, nil
}

// Synchronize waits until all work queued on s is done.
func (s *Stream) Synchronize() error {
	g := s.g
	if err := g.enter("cuStreamSynchronize"); err != nil {
		return err
	}
	r := g.drv.StreamSynchronize(s.h)
	g.leave()
	return driverError(g.drv, g.name, "cuStreamSynchronize", r)
}

// Close destroys the stream once its queued work is done.
func (s *Stream) Close() error {
	g := s.g
	if err := g.enter("cuStreamDestroy_v2"); err != nil {
		return err
	}
	r := g.drv.StreamDestroy(s.h)
	g.leave()
	return driverError(g.drv, g.name, "cuStreamDestroy_v2", r)
}

// CopyHtoDAsync queues a copy of src to device address dst on s
// (cuMemcpyHtoDAsync_v2) and returns at once. src must lie in the GPU's
// Pinned memory (a copy from pageable Go memory could read it after the
// caller reuses it), and must not be written until s is synchronized.
func (g *GPU) CopyHtoDAsync(dst uintptr, src []byte, s *Stream) error {
	if s == nil || s.g != g {
		return fmt.Errorf("cuda: cuMemcpyHtoDAsync_v2 on %s: the stream is not one of this device", g.name)
	}
	if p := g.pinnedIfMade(); p == nil || !p.contains(src) {
		return fmt.Errorf("cuda: cuMemcpyHtoDAsync_v2 on %s: the %d-byte source is not in the device's pinned host memory", g.name, len(src))
	}
	if len(src) == 0 {
		return nil
	}
	if err := g.check("cuMemcpyHtoDAsync_v2", dst, int64(len(src))); err != nil {
		return err
	}
	if err := g.enter("cuMemcpyHtoDAsync_v2"); err != nil {
		return err
	}
	r := g.drv.MemcpyHtoDAsync(uint64(dst), unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)), s.h)
	g.leave()
	return driverError(g.drv, g.name, "cuMemcpyHtoDAsync_v2", r)
}

// CopyDtoHAsync queues a copy of len(dst) bytes from device address src to
// dst on s (cuMemcpyDtoHAsync_v2) and returns at once; dst must lie in the
// GPU's Pinned memory and holds the bytes once s is synchronized.
func (g *GPU) CopyDtoHAsync(dst []byte, src uintptr, s *Stream) error {
	if s == nil || s.g != g {
		return fmt.Errorf("cuda: cuMemcpyDtoHAsync_v2 on %s: the stream is not one of this device", g.name)
	}
	if p := g.pinnedIfMade(); p == nil || !p.contains(dst) {
		return fmt.Errorf("cuda: cuMemcpyDtoHAsync_v2 on %s: the %d-byte destination is not in the device's pinned host memory", g.name, len(dst))
	}
	if len(dst) == 0 {
		return nil
	}
	if err := g.check("cuMemcpyDtoHAsync_v2", src, int64(len(dst))); err != nil {
		return err
	}
	if err := g.enter("cuMemcpyDtoHAsync_v2"); err != nil {
		return err
	}
	r := g.drv.MemcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(dst)), uint64(src), uint64(len(dst)), s.h)
	g.leave()
	return driverError(g.drv, g.name, "cuMemcpyDtoHAsync_v2", r)
}
