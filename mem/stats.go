package mem

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Stats describes an Allocator's memory at one moment. Mapped - InUse - Free
// is the unused tail of dedicated regions (under one page each), which no
// other request may use, so that a dedicated region is unmapped as soon as
// its buffer is freed.
type Stats struct {
	Mapped      int64 // bytes mapped from the device, in all chunks
	InUse       int64 // bytes in live buffers: what the ledger is charged for them
	Free        int64 // bytes in free blocks that can serve a request
	LargestFree int64 // the largest such free block
	Chunks      int   // mapped regions
	Blocks      int   // blocks (free or live) tiling the chunks
	FreeBlocks  int   // free blocks that can serve a request
	// Fragmentation is 1 - LargestFree/Free: 0 when the free memory is one
	// block (or there is none), near 1 when it is scattered in small pieces.
	Fragmentation float64
}

// Stats returns the allocator's current statistics.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Stats{
		Mapped:      a.mapped,
		InUse:       a.inUse,
		Free:        a.free,
		LargestFree: a.largestFree.Load(),
		Chunks:      len(a.chunks),
		Blocks:      a.blocks,
		FreeBlocks:  a.freeBlocks,
	}
	if s.Free > 0 {
		s.Fragmentation = 1 - float64(s.LargestFree)/float64(s.Free)
	}
	return s
}

// CheckInvariants verifies the allocator's bookkeeping and returns an error
// describing every violation found (nil when consistent): the blocks of each
// chunk tile it exactly and are Alignment-aligned; no two live buffers
// overlap; no two free blocks are adjacent (free memory is fully coalesced);
// no chunk is entirely free (it would have been unmapped); the bins hold
// exactly the free blocks of shared chunks, each in its size class, in
// order; and the counters agree with all of it. It is meant for tests.
func (a *Allocator) CheckInvariants() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	bad := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}

	type span struct{ lo, hi uintptr }
	var live, regions []span
	var mapped, inUse, free int64
	var blocks, freeBlocks int
	for i, c := range a.chunks {
		if c.index != i {
			bad("chunk %d at %#x records index %d", i, c.region.Ptr, c.index)
		}
		if c.region.Ptr%Alignment != 0 || c.region.Size%PageSize != 0 {
			bad("chunk %d at %#x of %d bytes is misaligned", i, c.region.Ptr, c.region.Size)
		}
		regions = append(regions, span{c.region.Ptr, c.region.Ptr + uintptr(c.region.Size)})
		mapped += c.region.Size
		var off int64
		var prev *block
		nlive := 0
		for b := c.head; b != nil; b = b.next {
			blocks++
			switch {
			case b.c != c:
				bad("block at offset %d of chunk %d points at another chunk", b.off, i)
			case b.prev != prev:
				bad("block at offset %d of chunk %d has a wrong prev link", b.off, i)
			case b.off != off:
				bad("chunk %d: block at offset %d, want %d (blocks must tile the chunk)", i, b.off, off)
			case b.size <= 0 || b.size%Alignment != 0:
				bad("chunk %d: block at offset %d has size %d, not a positive multiple of %d", i, b.off, b.size, Alignment)
			}
			if b.free {
				if prev != nil && prev.free {
					bad("chunk %d: free blocks at offsets %d and %d are adjacent (not coalesced)", i, prev.off, b.off)
				}
				if b.binned == c.dedicated {
					bad("chunk %d: free block at offset %d binned=%v in a dedicated=%v chunk", i, b.off, b.binned, c.dedicated)
				}
				if b.binned {
					free += b.size
					freeBlocks++
				}
				if b.buf != nil {
					bad("chunk %d: free block at offset %d still names a buffer", i, b.off)
				}
			} else {
				nlive++
				inUse += b.size
				live = append(live, span{b.addr(), b.addr() + uintptr(b.size)})
				switch {
				case b.binned:
					bad("chunk %d: live block at offset %d is in a bin", i, b.off)
				case b.buf == nil || b.buf.blk != b || !b.buf.live:
					bad("chunk %d: live block at offset %d has no live buffer", i, b.off)
				case b.buf.size != b.size || b.buf.ptr != b.addr():
					bad("chunk %d: block at offset %d (%d bytes) disagrees with its buffer (%d bytes at %#x)", i, b.off, b.size, b.buf.size, b.buf.ptr)
				}
			}
			off += b.size
			prev = b
		}
		if off != c.region.Size {
			bad("chunk %d: blocks cover %d bytes of %d", i, off, c.region.Size)
		}
		if nlive == 0 {
			bad("chunk %d of %d bytes is entirely free but still mapped", i, c.region.Size)
		}
		if c.touched < 0 || c.touched > c.region.Size {
			bad("chunk %d: touched mark %d outside [0, %d]", i, c.touched, c.region.Size)
		}
	}

	for _, set := range [][]span{live, regions} {
		slices.SortFunc(set, func(x, y span) int { return cmp.Compare(x.lo, y.lo) })
		for i := 1; i < len(set); i++ {
			if set[i].lo < set[i-1].hi {
				bad("[%#x, %#x) overlaps [%#x, %#x)", set[i-1].lo, set[i-1].hi, set[i].lo, set[i].hi)
			}
		}
	}

	nbinned := 0
	var largest int64
	for i, bin := range a.bins {
		for j, b := range bin {
			nbinned++
			largest = max(largest, b.size)
			if !b.free || !b.binned || binFor(b.size) != i {
				bad("bin %d holds a block of %d bytes (free=%v binned=%v)", i, b.size, b.free, b.binned)
			}
			if j > 0 {
				p := bin[j-1]
				if p.size > b.size || (p.size == b.size && p.addr() >= b.addr()) {
					bad("bin %d out of order at %d", i, j)
				}
			}
		}
	}
	if nbinned != freeBlocks {
		bad("bins hold %d blocks, chunks have %d binnable free blocks", nbinned, freeBlocks)
	}
	if got := a.largestFree.Load(); got != largest {
		bad("largest free block recorded as %d, bins say %d", got, largest)
	}
	if mapped != a.mapped || inUse != a.inUse || free != a.free || blocks != a.blocks || freeBlocks != a.freeBlocks {
		bad("counters mapped=%d inUse=%d free=%d blocks=%d freeBlocks=%d, chunks say %d %d %d %d %d",
			a.mapped, a.inUse, a.free, a.blocks, a.freeBlocks, mapped, inUse, free, blocks, freeBlocks)
	}
	return errors.Join(errs...)
}
