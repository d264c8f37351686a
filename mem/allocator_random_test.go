package mem

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"unsafe"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6865616472)) }

// randSize returns a size between 1 and maxSize, log-uniformly distributed
// (as many 100-byte requests as 1-MiB ones), usually not a multiple of 64.
func randSize(rng *rand.Rand, maxSize int64) int64 {
	return max(1, int64(math.Exp(rng.Float64()*math.Log(float64(maxSize)))))
}

// tagged is a live buffer whose memory carries its own id: an 8-byte tag
// (id, line) at the start of every 64-byte line. Buffers are Alignment
// aligned and sized, so any overlap between two live buffers shares at least
// one line, and the later writer's tags show up in the earlier buffer.
type tagged struct {
	b  *Buffer
	id uint64
}

var nextTag atomic.Uint64

func newTagged(b *Buffer) tagged {
	x := tagged{b, nextTag.Add(1)}
	for line := int64(0); line < b.Size()/Alignment; line++ {
		*(*uint64)(unsafe.Pointer(&b.Bytes()[line*Alignment])) = x.id<<24 | uint64(line)
	}
	return x
}

// check returns an error if a tag of x's memory is not x's own.
func (x tagged) check() error {
	b := x.b
	for line := int64(0); line < b.Size()/Alignment; line++ {
		got := *(*uint64)(unsafe.Pointer(&b.Bytes()[line*Alignment]))
		if want := x.id<<24 | uint64(line); got != want {
			return fmt.Errorf("buffer %d (%d bytes at %#x): line %d holds tag %#x, want %#x (overwritten by buffer %d)",
				x.id, b.Size(), b.Ptr(), line, got, want, got>>24)
		}
	}
	return nil
}

// checkAgainstDevice verifies, from the device's list of mappings and the
// buffers' addresses alone, that live buffers do not overlap, that each lies
// in a mapped region, and that every mapped region holds a live buffer (an
// entirely free chunk must have been returned to the OS).
func checkAgainstDevice(dev *recordingDevice, live []tagged) error {
	type span struct{ lo, hi uintptr }
	bufs := make([]span, 0, len(live))
	for _, x := range live {
		if x.b.Size() > 0 {
			bufs = append(bufs, span{x.b.Ptr(), x.b.Ptr() + uintptr(x.b.Size())})
		}
	}
	dev.mu.Lock()
	regions := make([]span, 0, len(dev.regions))
	for p, n := range dev.regions {
		regions = append(regions, span{p, p + uintptr(n)})
	}
	dev.mu.Unlock()
	byStart := func(x, y span) int { return cmp.Compare(x.lo, y.lo) }
	slices.SortFunc(bufs, byStart)
	slices.SortFunc(regions, byStart)
	r := 0
	used := make([]bool, len(regions))
	for i, b := range bufs {
		if i > 0 && b.lo < bufs[i-1].hi {
			return fmt.Errorf("live buffers [%#x, %#x) and [%#x, %#x) overlap", bufs[i-1].lo, bufs[i-1].hi, b.lo, b.hi)
		}
		for r < len(regions) && regions[r].hi <= b.lo {
			r++
		}
		if r == len(regions) || b.lo < regions[r].lo || b.hi > regions[r].hi {
			return fmt.Errorf("live buffer [%#x, %#x) is not inside a mapped region", b.lo, b.hi)
		}
		used[r] = true
	}
	for i, u := range used {
		if !u {
			return fmt.Errorf("region [%#x, %#x) is mapped but holds no live buffer", regions[i].lo, regions[i].hi)
		}
	}
	return nil
}

// checkLastInChunk verifies, before b is freed, that when b is the last live
// buffer of its chunk all the chunk's other memory has coalesced into at
// most one free block on each side of it, so that freeing b leaves a single
// block spanning the chunk.
func checkLastInChunk(a *Allocator, b *Buffer) (last bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := b.blk.c
	var nlive, nfree int
	var free int64
	for blk := c.head; blk != nil; blk = blk.next {
		if blk.free {
			nfree++
			free += blk.size
		} else {
			nlive++
		}
	}
	if nlive != 1 {
		return false, nil
	}
	if want := c.region.Size - b.Size(); free != want {
		return true, fmt.Errorf("last buffer of a %d-byte chunk: %d free bytes around it, want %d", c.region.Size, free, want)
	}
	if (b.blk.prev != nil) != (b.blk.off > 0) || nfree > 2 {
		return true, fmt.Errorf("last buffer of a chunk at offset %d: %d free blocks, want them merged into at most one either side", b.blk.off, nfree)
	}
	return true, nil
}

// TestAllocatorRandomized runs long random sequences of Alloc and Free
// (sizes from 1 byte to 6 MiB over 1-MiB chunks, so some requests get
// dedicated regions) and checks after every operation the allocator's
// invariants, against the device that no live buffers overlap and no free
// chunk stays mapped, and the byte tags of every buffer before it is freed.
func TestAllocatorRandomized(t *testing.T) {
	const (
		ops       = 20000
		chunkSize = 1 << 20
		maxSize   = 6 << 20
		maxLive   = 96 << 20
	)
	seeds := []uint64{1, 2, 3}
	if raceEnabled {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			dev := newRecordingDevice(t, NewSimulated("sim", 1<<30))
			l := NewLedger("sim", 0)
			a := NewAllocator(dev, l, AllocatorOptions{ChunkSize: chunkSize})
			rng := newRand(seed)
			var live []tagged
			var liveBytes, peak int64
			var maxFrag float64
			var lastFrees, dedicated int
			for op := 0; op < ops; op++ {
				if len(live) > 0 && (liveBytes > maxLive || rng.IntN(100) < 45) {
					j := rng.IntN(len(live))
					x := live[j]
					if err := x.check(); err != nil {
						t.Fatalf("op %d: %v", op, err)
					}
					last, err := checkLastInChunk(a, x.b)
					if err != nil {
						t.Fatalf("op %d: %v", op, err)
					}
					if last {
						lastFrees++
					}
					a.Free(x.b)
					liveBytes -= x.b.Size()
					live[j] = live[len(live)-1]
					live = live[:len(live)-1]
				} else {
					size := randSize(rng, maxSize)
					switch rng.IntN(50) { // edges around the chunk size
					case 0:
						size = chunkSize
					case 1:
						size = chunkSize + 1
					}
					if Align(size) > chunkSize {
						dedicated++
					}
					b, err := a.Alloc(size, Category(rng.IntN(int(NumCategories))), "op")
					if err != nil {
						t.Fatalf("op %d: Alloc(%d): %v", op, size, err)
					}
					live = append(live, newTagged(b))
					liveBytes += b.Size()
					peak = max(peak, liveBytes)
				}

				if err := a.CheckInvariants(); err != nil {
					t.Fatalf("op %d: %v", op, err)
				}
				if err := checkAgainstDevice(dev, live); err != nil {
					t.Fatalf("op %d: %v", op, err)
				}
				s := a.Stats()
				if s.InUse != liveBytes || l.Live() != liveBytes || s.Mapped != dev.Mapped() {
					t.Fatalf("op %d: InUse %d, ledger Live %d, Mapped %d; want %d, %d, device's %d",
						op, s.InUse, l.Live(), s.Mapped, liveBytes, liveBytes, dev.Mapped())
				}
				if s.Fragmentation < 0 || s.Fragmentation > 1 || (s.FreeBlocks <= 1 && s.Fragmentation != 0) {
					t.Fatalf("op %d: Fragmentation %v with %d free blocks, want in [0, 1] and 0 for one block", op, s.Fragmentation, s.FreeBlocks)
				}
				maxFrag = max(maxFrag, s.Fragmentation)
			}
			s := a.Stats()
			t.Logf("seed %d: %d ops, %d live buffers (%s in %s mapped, %d chunks, %d free blocks), peak %s; fragmentation now %.3f, max %.3f; %d dedicated requests, %d chunks emptied and unmapped",
				seed, ops, len(live), FormatBytes(s.InUse), FormatBytes(s.Mapped), s.Chunks, s.FreeBlocks, FormatBytes(peak), s.Fragmentation, maxFrag, dedicated, lastFrees)
			if lastFrees == 0 || dedicated == 0 {
				t.Errorf("the sequence emptied %d chunks and made %d dedicated requests; want both > 0", lastFrees, dedicated)
			}
			for _, x := range live {
				if err := x.check(); err != nil {
					t.Fatal(err)
				}
				a.Free(x.b)
			}
			mustCheck(t, a)
			if s := a.Stats(); s.Mapped != 0 || s.Chunks != 0 || s.Blocks != 0 || dev.Mapped() != 0 || l.Live() != 0 {
				t.Errorf("after freeing everything: %+v, device Mapped %d, ledger Live %d; want all 0", s, dev.Mapped(), l.Live())
			}
			if l.Peak() != peak {
				t.Errorf("ledger Peak %d, want %d", l.Peak(), peak)
			}
		})
	}
}
