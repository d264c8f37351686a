package mem

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// numBins is the number of size-class bins: bin i holds free blocks of
// [64<<i, 64<<(i+1)) bytes, and the last bin everything from 64 MiB up.
const numBins = 21

// chunk is one Region mapped from the device, tiled by a doubly linked list
// of blocks in address order.
type chunk struct {
	region    Region
	head      *block // the block at offset 0
	dedicated bool   // mapped for one request larger than a chunk; its tail is never binned
	index     int    // position in Allocator.chunks
	touched   int64  // [touched, size) has never been handed out: still zero from the device
}

// block is a run of bytes in a chunk, either free or one live Buffer's.
type block struct {
	c          *chunk
	off, size  int64
	prev, next *block // address neighbours within the chunk
	free       bool
	binned     bool    // in a.bins (free blocks of shared chunks)
	buf        *Buffer // the live buffer, when !free
}

func (b *block) addr() uintptr { return b.c.region.Ptr + uintptr(b.off) }

// binFor returns the bin of a block of n bytes (n >= Alignment).
func binFor(n int64) int {
	return min(bits.Len64(uint64(n/Alignment))-1, numBins-1)
}

// searchBin returns the position in bin of the first block ordered at or
// after (size, addr): blocks are sorted by size, then address.
func searchBin(bin []*block, size int64, addr uintptr) int {
	lo, hi := 0, len(bin)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		b := bin[m]
		if b.size < size || (b.size == size && b.addr() < addr) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (a *Allocator) binLocked(b *block) {
	i := binFor(b.size)
	a.bins[i] = slices.Insert(a.bins[i], searchBin(a.bins[i], b.size, b.addr()), b)
	b.binned = true
	a.free += b.size
	a.freeBlocks++
}

func (a *Allocator) unbinLocked(b *block) {
	if !b.binned {
		return
	}
	i := binFor(b.size)
	j := searchBin(a.bins[i], b.size, b.addr())
	if j >= len(a.bins[i]) || a.bins[i][j] != b {
		panic(fmt.Sprintf("mem: internal error: free block of %d bytes at %#x missing from bin %d", b.size, b.addr(), i))
	}
	a.bins[i] = slices.Delete(a.bins[i], j, j+1)
	b.binned = false
	a.free -= b.size
	a.freeBlocks--
}

// bestFitLocked returns the smallest binned free block of at least n bytes
// (the lowest address among equals), or nil.
func (a *Allocator) bestFitLocked(n int64) *block {
	for i := binFor(n); i < numBins; i++ {
		bin := a.bins[i]
		if j := searchBin(bin, n, 0); j < len(bin) {
			return bin[j]
		}
	}
	return nil
}

// updateLargestFreeLocked refreshes a.largestFree from the bins: the last
// block of the highest non-empty bin.
func (a *Allocator) updateLargestFreeLocked() {
	var n int64
	for i := numBins - 1; i >= 0; i-- {
		if bin := a.bins[i]; len(bin) > 0 {
			n = bin[len(bin)-1].size
			break
		}
	}
	a.largestFree.Store(n)
}

func (a *Allocator) newBlock() *block {
	b := a.spare
	if b == nil {
		return &block{}
	}
	a.spare = b.next
	*b = block{}
	return b
}

func (a *Allocator) recycle(b *block) {
	*b = block{next: a.spare}
	a.spare = b
}

// takeLocked returns an unbinned block of exactly n bytes (a multiple of
// Alignment), marked in use, mapping a new chunk when no free block fits.
func (a *Allocator) takeLocked(n int64) (*block, error) {
	blk := a.bestFitLocked(n)
	if blk != nil {
		a.unbinLocked(blk)
	} else {
		c, err := a.growLocked(n)
		if err != nil {
			return nil, err
		}
		blk = c.head
	}
	if blk.size > n { // split off the remainder as a free block
		rest := a.newBlock()
		rest.c, rest.off, rest.size, rest.free = blk.c, blk.off+n, blk.size-n, true
		rest.prev, rest.next = blk, blk.next
		if blk.next != nil {
			blk.next.prev = rest
		}
		blk.next = rest
		blk.size = n
		a.blocks++
		if !blk.c.dedicated {
			a.binLocked(rest)
		}
	}
	blk.free = false
	a.inUse += n
	a.updateLargestFreeLocked()
	return blk, nil
}

// growLocked maps a chunk that can hold n bytes: a shared chunk of
// a.chunkSize, or a dedicated one of RoundPage(n) when n is larger. When the
// device refuses a whole shared chunk for lack of room it maps RoundPage(n)
// instead, as TensorFlow's BFC allocator retries smaller regions. The chunk
// is one free, unbinned block.
func (a *Allocator) growLocked(n int64) (*chunk, error) {
	size, dedicated := a.chunkSize, n > a.chunkSize
	if dedicated {
		size = RoundPage(n)
	}
	r, err := a.dev.Map(size)
	var oom *OOMError
	if err != nil && !dedicated && RoundPage(n) < size && errors.As(err, &oom) {
		size = RoundPage(n)
		r, err = a.dev.Map(size)
	}
	if err != nil {
		return nil, err
	}
	if r.Size != size || r.Ptr%Alignment != 0 {
		_ = a.dev.Unmap(r)
		return nil, fmt.Errorf("mem: %s mapped %d bytes at %#x for a request of %d (want %d bytes, %d-aligned)", a.dev.Name(), r.Size, r.Ptr, size, size, Alignment)
	}
	c := &chunk{region: r, dedicated: dedicated, index: len(a.chunks)}
	blk := a.newBlock()
	blk.c, blk.size, blk.free = c, size, true
	c.head = blk
	a.chunks = append(a.chunks, c)
	a.mapped += size
	a.blocks++
	return c, nil
}

// releaseLocked frees a live block: it merges with free neighbours, and the
// chunk is unmapped when the merged block covers it.
func (a *Allocator) releaseLocked(blk *block) error {
	blk.free, blk.buf = true, nil
	a.inUse -= blk.size
	if p := blk.prev; p != nil && p.free {
		a.unbinLocked(p)
		a.absorbNext(p)
		blk = p
	}
	if nx := blk.next; nx != nil && nx.free {
		a.unbinLocked(nx)
		a.absorbNext(blk)
	}
	c := blk.c
	if blk.off == 0 && blk.size == c.region.Size {
		if err := a.dev.Unmap(c.region); err != nil {
			return fmt.Errorf("mem: returning a %s chunk to %s: %w", FormatBytes(c.region.Size), a.dev.Name(), err)
		}
		last := a.chunks[len(a.chunks)-1]
		a.chunks[c.index], last.index = last, c.index
		a.chunks[len(a.chunks)-1] = nil
		a.chunks = a.chunks[:len(a.chunks)-1]
		a.mapped -= c.region.Size
		a.blocks--
		a.recycle(blk)
	} else if !c.dedicated {
		a.binLocked(blk)
	}
	a.updateLargestFreeLocked()
	return nil
}

// absorbNext merges b.next into b; both are free and unbinned.
func (a *Allocator) absorbNext(b *block) {
	nx := b.next
	b.size += nx.size
	b.next = nx.next
	if nx.next != nil {
		nx.next.prev = b
	}
	a.recycle(nx)
	a.blocks--
}
