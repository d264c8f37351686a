package mem

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// DefaultChunkSize is the size of the regions an Allocator maps when
// AllocatorOptions.ChunkSize is 0.
const DefaultChunkSize = 64 << 20

// AllocatorOptions configures NewAllocator.
type AllocatorOptions struct {
	// ChunkSize is the size of the regions the allocator maps from its device
	// and carves buffers from, rounded up to PageSize (0: DefaultChunkSize).
	// A request larger than a chunk gets a dedicated region of exactly its
	// size rounded up to PageSize. When the device cannot map a whole chunk,
	// the allocator maps just the page-rounded request instead.
	ChunkSize int64
	// Site, when set, returns the file:line that asked for the memory (the
	// user's code, past the engine's machinery); the allocator records it
	// in the ledger for reports. Package runtime sets it.
	Site func() string
}

// Allocator hands out Buffers from chunks (Regions) mapped from one Device,
// charging each to a Ledger. It is a best-fit allocator with coalescing in
// the style of TensorFlow's BFC allocator (tensorflow/core/common_runtime/
// bfc_allocator.cc): free blocks are kept in size-class bins (bin i holds
// sizes in [64<<i, 64<<(i+1))), sorted by size then address; a request takes
// the smallest free block that holds it, searching its own bin and then
// larger ones, and splits off the remainder as a new free block; a freed
// block merges with its free neighbours at once. A chunk whose memory is
// entirely free is unmapped at once, returning it to the OS.
//
// Every buffer is Alignment-aligned and its Size is Align(requested): the
// exact amount charged to the ledger. An Allocator is safe for concurrent
// use.
type Allocator struct {
	dev       Device
	ledger    *Ledger
	chunkSize int64
	site      func() string

	mu         sync.Mutex
	bins       [numBins][]*block // free blocks of shared chunks, sorted by (size, address)
	chunks     []*chunk          // mapped chunks; chunk.index is the position here
	spare      *block            // recycled block nodes, linked through next
	mapped     int64             // sum of chunk sizes
	inUse      int64             // sum of live buffer sizes
	free       int64             // sum of binned free block sizes
	blocks     int               // blocks in all chunks
	freeBlocks int               // binned free blocks

	// largestFree mirrors the largest binned free block so the ledger's OOM
	// report can read it without taking mu (the ledger calls it under its
	// own lock, and Alloc may hold mu while the ledger is busy elsewhere).
	largestFree atomic.Int64
}

// NewAllocator returns an allocator over dev that charges ledger (nil: a new
// unlimited ledger named after the device). It installs the allocator's
// largest free block in the ledger's OOM reports (Ledger.SetLargestFree).
func NewAllocator(dev Device, ledger *Ledger, opt AllocatorOptions) *Allocator {
	if ledger == nil {
		ledger = NewLedger(dev.Name(), 0)
	}
	cs := opt.ChunkSize
	if cs <= 0 {
		cs = DefaultChunkSize
	}
	a := &Allocator{dev: dev, ledger: ledger, chunkSize: RoundPage(cs), site: opt.Site}
	ledger.SetLargestFree(a.largestFree.Load)
	return a
}

// Device returns the device the allocator maps from.
func (a *Allocator) Device() Device { return a.dev }

// Ledger returns the ledger the allocator charges.
func (a *Allocator) Ledger() *Ledger { return a.ledger }

// ChunkSize returns the size of the regions the allocator maps.
func (a *Allocator) ChunkSize() int64 { return a.chunkSize }

// Buffer is a live allocation from an Allocator. Its memory stays valid until
// it is passed to Allocator.Free.
type Buffer struct {
	a     *Allocator
	blk   *block // nil for a zero-size buffer and after Free
	bytes []byte
	ptr   uintptr
	size  int64
	cat   Category
	owner string
	live  bool // guarded by a.mu
}

// Bytes returns the buffer's memory, Size() bytes; nil when the device is not
// Host or the buffer is empty.
func (b *Buffer) Bytes() []byte { return b.bytes }

// Ptr returns the buffer's address (a device address on a non-host device);
// 0 for an empty buffer. It is a multiple of Alignment.
func (b *Buffer) Ptr() uintptr { return b.ptr }

// Size returns the buffer's size, Align of the requested size: the bytes
// charged to the ledger.
func (b *Buffer) Size() int64 { return b.size }

// Category returns the category the buffer is charged to.
func (b *Buffer) Category() Category { return b.cat }

// Owner returns the owner the buffer is charged to.
func (b *Buffer) Owner() string { return b.owner }

// Alloc returns a buffer of Align(size) bytes charged to (cat, owner). Its
// contents are undefined (reused memory is not cleared; see AllocZeroed).
//
// The ledger is charged before anything is mapped: if it refuses, the error
// is its *OOMError with LargestFree filled in. If the device cannot map the
// memory, the charge is released and the error is an *OOMError naming the
// device. A negative size or an invalid category is a programmer error and
// panics.
func (a *Allocator) Alloc(size int64, cat Category, owner string) (*Buffer, error) {
	return a.alloc(size, cat, owner, false)
}

// AllocZeroed is Alloc with the buffer's memory cleared. Memory the device
// has never handed out is zero already and is not written again, so a fresh
// chunk costs nothing to clear.
func (a *Allocator) AllocZeroed(size int64, cat Category, owner string) (*Buffer, error) {
	return a.alloc(size, cat, owner, true)
}

func (a *Allocator) alloc(size int64, cat Category, owner string, zero bool) (*Buffer, error) {
	if size < 0 {
		panic(fmt.Sprintf("mem: Alloc of %d bytes for %s (%s)", size, owner, cat))
	}
	if cat >= NumCategories {
		panic(fmt.Sprintf("mem: Alloc for %s with invalid %s", owner, cat))
	}
	var zeroer Zeroer
	if zero && !a.dev.Host() {
		var ok bool
		if zeroer, ok = a.dev.(Zeroer); !ok {
			return nil, fmt.Errorf("mem: AllocZeroed for %s (%s) on %s: the device cannot clear memory", owner, cat, a.dev.Name())
		}
	}
	n := Align(size)
	if err := a.ledger.Charge(cat, owner, n); err != nil {
		var oom *OOMError
		if errors.As(err, &oom) && oom.LargestFree < 0 {
			oom.LargestFree = a.largestFree.Load()
		}
		return nil, err
	}
	if a.site != nil {
		a.ledger.SetSite(cat, owner, a.site())
	}
	b := &Buffer{a: a, size: n, cat: cat, owner: owner, live: true}
	if n == 0 {
		return b, nil
	}

	a.mu.Lock()
	blk, err := a.takeLocked(n)
	if err != nil {
		a.mu.Unlock()
		a.ledger.Release(cat, owner, n)
		return nil, a.deviceError(err, cat, owner, n)
	}
	blk.buf = b
	b.blk = blk
	c := blk.c
	b.ptr = c.region.Ptr + uintptr(blk.off)
	end := blk.off + n
	if c.region.Bytes != nil {
		b.bytes = c.region.Bytes[blk.off:end:end]
	}
	// [blk.off, dirtyEnd) may hold bytes of earlier buffers; past c.touched
	// the memory is as the device mapped it: zero.
	dirtyEnd := min(end, c.touched)
	c.touched = max(c.touched, end)
	region, off := c.region, blk.off
	a.mu.Unlock()

	if zero && dirtyEnd > off {
		if zeroer != nil {
			if err := zeroer.Zero(region, off, dirtyEnd-off); err != nil {
				a.Free(b)
				return nil, fmt.Errorf("mem: AllocZeroed of %s for %s (%s) on %s: %w", FormatBytes(n), owner, cat, a.dev.Name(), err)
			}
		} else {
			clear(b.bytes[:dirtyEnd-off])
		}
	}
	return b, nil
}

// deviceError turns the device's refusal to map into the error Alloc
// returns: an *OOMError naming the device and what is held, or a wrapped
// error for a failure that is not about capacity. It must be called without
// a.mu held.
func (a *Allocator) deviceError(err error, cat Category, owner string, n int64) error {
	var dev *OOMError
	if !errors.As(err, &dev) {
		return fmt.Errorf("mem: allocating %s for %s (%s) on %s: %w", FormatBytes(n), owner, cat, a.dev.Name(), err)
	}
	return &OOMError{
		Ledger:      a.dev.Name(),
		Category:    cat,
		Owner:       owner,
		Request:     n,
		Budget:      a.dev.Capacity(),
		Live:        a.dev.Mapped(),
		LargestFree: a.largestFree.Load(),
		Totals:      a.ledger.Totals(),
		Top:         a.ledger.Top(10),
	}
}

// Free returns b's memory to the allocator and releases its charge. Free
// blocks merge with their free neighbours, and a chunk left entirely free is
// unmapped at once. Freeing a buffer twice, a nil buffer or one from another
// allocator is a programmer error and panics, as does a device that refuses
// to unmap a region it mapped.
func (a *Allocator) Free(b *Buffer) {
	if b == nil {
		panic("mem: Free of a nil buffer")
	}
	if b.a != a {
		panic(fmt.Sprintf("mem: Free of a buffer of %s (%s) that this allocator (%s) did not allocate", b.owner, b.cat, a.dev.Name()))
	}
	a.mu.Lock()
	if !b.live {
		a.mu.Unlock()
		panic(fmt.Sprintf("mem: double free of a %s buffer of %s (%s)", FormatBytes(b.size), b.owner, b.cat))
	}
	b.live = false
	if blk := b.blk; blk != nil {
		b.blk, b.bytes = nil, nil
		if err := a.releaseLocked(blk); err != nil {
			a.mu.Unlock()
			panic(err.Error())
		}
	}
	a.mu.Unlock()
	a.ledger.Release(b.cat, b.owner, b.size)
}

// Trim gives the pages of every free block back to the OS where the device
// can (PageReleaser: the host's mmap'd memory), and returns the bytes it
// released. Chunks left wholly free are unmapped when freed already; Trim
// is for the free space inside chunks that still hold live buffers, so
// that memory a plan gave up (a smaller arena after a re-plan) leaves the
// process's resident set, and its container's accounting, at once.
func (a *Allocator) Trim() int64 {
	pr, ok := a.dev.(PageReleaser)
	if !ok {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	for _, c := range a.chunks {
		for b := c.head; b != nil; b = b.next {
			if b.free && pr.ReleasePages(c.region, b.off, b.size) == nil {
				n += b.size
			}
		}
	}
	return n
}
