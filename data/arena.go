package data

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// Block is a byte buffer from a pipeline's arena, charged to the pipeline's
// ledger (category input) while it is live or waiting on a free list. Blocks
// are reference counted: Get returns one reference; Retain adds one; Release
// drops one and the last Release returns the buffer to its free list for the
// next element. A Block's bytes are 64-byte aligned.
type Block struct {
	buf    []byte // the whole size class
	n      int    // bytes asked for
	refs   atomic.Int32
	pool   *pool
	pinned bool // a stage's own buffer, held until the stage closes
}

// Bytes returns the block's bytes (the length asked for).
func (b *Block) Bytes() []byte { return b.buf[:b.n:b.n] }

// Retain adds a reference. It is a no-op on a nil Block.
func (b *Block) Retain() {
	if b != nil {
		b.refs.Add(1)
	}
}

// Release drops a reference; the last one recycles the buffer. It is a no-op
// on a nil Block. Releasing more often than retaining is a programmer error
// and panics.
func (b *Block) Release() {
	if b == nil {
		return
	}
	switch r := b.refs.Add(-1); {
	case r == 0:
		b.pool.put(b)
	case r < 0:
		panic("data: Block released more often than retained")
	}
}

// arena hands out Blocks from free lists per (owner, size class). It charges
// the pipeline's ledger when it grows (a new buffer) and releases the charge
// when it drops a free buffer, so the ledger's live bytes are the bytes the
// pipeline holds, in use or free. A Get that the budget refuses first drops
// free buffers of other classes and owners, then waits for a Release
// (backpressure).
type arena struct {
	ledger *mem.Ledger
	budget int64

	mu        sync.Mutex
	cond      *sync.Cond
	waiters   int
	charged   int64 // bytes charged by the arena: free + outstanding
	freeBytes int64
	out       int64 // outstanding blocks
	pinned    int64 // bytes of outstanding pinned blocks
	pinnedN   int64 // outstanding pinned blocks
	maxReq    int64 // largest size class asked for
	pools     map[string]*pool
	closed    bool

	// isShort caches short()'s answer for readers that ask per element;
	// unlock refreshes it after every change.
	isShort atomic.Bool
}

// unlock refreshes isShort and releases mu.
func (a *arena) unlock() {
	a.isShort.Store(a.budget > 0 && a.budget-a.charged+a.freeBytes < 2*a.maxReq)
	a.mu.Unlock()
}

type pool struct {
	a     *arena
	owner string
	free  map[int64][]*Block
}

func newArena(l *mem.Ledger, budget int64) *arena {
	a := &arena{ledger: l, budget: budget, pools: make(map[string]*pool)}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// pool returns the free lists of one owner (a stage name).
func (a *arena) pool(owner string) *pool {
	a.mu.Lock()
	defer a.unlock()
	p := a.pools[owner]
	if p == nil {
		p = &pool{a: a, owner: owner, free: make(map[int64][]*Block)}
		a.pools[owner] = p
	}
	return p
}

// sizeClass rounds n up so that classes are 1/16 of a power of two apart
// (at most 6.25% waste above 1 KiB) and multiples of mem.Alignment.
func sizeClass(n int) int64 {
	if n <= mem.Alignment {
		return mem.Alignment
	}
	k := bits.Len64(uint64(n - 1)) // 2^(k-1) < n <= 2^k
	g := int64(1) << max(k-4, 6)
	return (int64(n) + g - 1) &^ (g - 1)
}

// get returns a block of n bytes with one reference, waiting while the
// budget has no room, until ctx ends. A request that cannot fit beside the
// stages' pinned buffers, or that finds no element's memory outstanding to
// wait for, fails with an error wrapping *mem.OOMError.
func (p *pool) get(ctx context.Context, n int) (*Block, error) {
	return p.getBlock(ctx, n, false)
}

// getPinned is get for a stage's own buffer (a read buffer), which comes
// back only when the stage closes: waiting for it is never useful.
func (p *pool) getPinned(ctx context.Context, n int) (*Block, error) {
	return p.getBlock(ctx, n, true)
}

func (p *pool) getBlock(ctx context.Context, n int, pinned bool) (*Block, error) {
	a := p.a
	c := sizeClass(n)
	a.mu.Lock()
	if c > a.maxReq {
		a.maxReq = c
	}
	var stop func() bool
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		if l := p.free[c]; len(l) > 0 {
			b := l[len(l)-1]
			l[len(l)-1] = nil
			p.free[c] = l[:len(l)-1]
			a.freeBytes -= c
			a.outLocked(b, pinned)
			a.unlock()
			b.n = n
			b.refs.Store(1)
			return b, nil
		}
		err := a.ledger.Charge(mem.Input, p.owner, c)
		if err == nil {
			a.charged += c
			b := p.alloc(c, n)
			a.outLocked(b, pinned)
			a.unlock()
			return b, nil
		}
		var oom *mem.OOMError
		if !errors.As(err, &oom) {
			a.unlock()
			return nil, err
		}
		if a.reclaimLocked(c) {
			continue
		}
		if (a.budget > 0 && c+a.pinned > a.budget) || a.out == a.pinnedN {
			a.unlock()
			return nil, fmt.Errorf("data: %s needs a %s buffer: %w", p.owner, mem.FormatBytes(c), err)
		}
		if e := ctx.Err(); e != nil {
			a.unlock()
			return nil, e
		}
		if stop == nil && ctx.Done() != nil {
			stop = context.AfterFunc(ctx, func() {
				a.mu.Lock()
				a.cond.Broadcast()
				a.unlock()
			})
		}
		a.waiters++
		a.cond.Wait()
		a.waiters--
	}
}

// getUpTo appends to dst up to n blocks of size bytes: one as get does
// (waiting if it must), then as many more as the free lists and the budget
// give at once, stopping before the budget runs short. A source reads a
// run of records into them with one lock taken, not one per record.
func (p *pool) getUpTo(ctx context.Context, n, size int, dst []*Block) ([]*Block, error) {
	b, err := p.get(ctx, size)
	if err != nil {
		return dst, err
	}
	dst = append(dst, b)
	a, c := p.a, sizeClass(size)
	a.mu.Lock()
	defer a.unlock()
	room := int64(1) << 62
	if a.budget > 0 {
		room = a.budget - a.ledger.Live() + a.freeBytes
	}
	for len(dst) < n && room-c >= 2*a.maxReq {
		room -= c
		if l := p.free[c]; len(l) > 0 {
			b = l[len(l)-1]
			l[len(l)-1] = nil
			p.free[c] = l[:len(l)-1]
			a.freeBytes -= c
			b.n = size
			b.refs.Store(1)
		} else if a.ledger.Charge(mem.Input, p.owner, c) == nil {
			a.charged += c
			b = p.alloc(c, size)
		} else {
			break
		}
		a.outLocked(b, false)
		dst = append(dst, b)
	}
	return dst, nil
}

func (a *arena) outLocked(b *Block, pinned bool) {
	a.out++
	b.pinned = pinned
	if pinned {
		a.pinned += int64(len(b.buf))
		a.pinnedN++
	}
}

func (p *pool) alloc(c int64, n int) *Block {
	buf := make([]byte, c)
	if uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%mem.Alignment != 0 {
		// Go's allocator aligns these size classes; this is a fallback
		// whose 64 extra bytes stay off the ledger.
		buf = make([]byte, c+mem.Alignment)
		off := mem.Alignment - int(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%mem.Alignment)
		buf = buf[off : off+int(c) : off+int(c)]
	}
	b := &Block{buf: buf, n: n, pool: p}
	b.refs.Store(1)
	return b
}

func (p *pool) put(b *Block) {
	a := p.a
	if a == nil { // made outside a pipeline: the GC takes it
		return
	}
	c := int64(len(b.buf))
	a.mu.Lock()
	a.out--
	if b.pinned {
		a.pinned -= c
		a.pinnedN--
		b.pinned = false
	}
	if a.closed {
		a.charged -= c
		a.unlock()
		a.ledger.Release(mem.Input, p.owner, c)
		return
	}
	p.free[c] = append(p.free[c], b)
	a.freeBytes += c
	if a.waiters > 0 {
		a.cond.Broadcast()
	}
	a.unlock()
}

// reclaimLocked drops free buffers until c more bytes fit the budget. It
// reports whether it dropped any.
func (a *arena) reclaimLocked(c int64) bool {
	dropped := false
	for _, p := range a.pools {
		for cls, l := range p.free {
			for len(l) > 0 {
				if a.budget > 0 && a.ledger.Live()+c <= a.budget {
					p.free[cls] = l
					return dropped
				}
				l[len(l)-1] = nil
				l = l[:len(l)-1]
				a.freeBytes -= cls
				a.charged -= cls
				a.ledger.Release(mem.Input, p.owner, cls)
				dropped = true
			}
			p.free[cls] = l
		}
	}
	return dropped
}

// available returns the bytes a Get could obtain now without waiting: the
// budget's room plus the free lists.
func (a *arena) available() int64 {
	a.mu.Lock()
	defer a.unlock()
	if a.budget <= 0 {
		return 1 << 62
	}
	return a.budget - a.ledger.Live() + a.freeBytes
}

// reserve is the room that buffering stages (Shuffle, Prefetch, autotuned
// Map) leave for the rest of the pipeline so that it can always make
// progress: two of the largest buffers asked for so far.
func (a *arena) reserve() int64 {
	a.mu.Lock()
	defer a.unlock()
	return 2 * a.maxReq
}

// short reports whether the budget has less room than the reserve: stages
// that gather elements (a Map chunk, a run of records) then pass on what
// they hold rather than wait for more. It reads a cached answer (counting
// the arena's own charges), cheap enough to ask per element.
func (a *arena) short() bool { return a.isShort.Load() }

// close drops every free buffer; blocks still out release their charge
// directly when their last reference goes.
func (a *arena) close() {
	a.mu.Lock()
	defer a.unlock()
	a.closed = true
	for _, p := range a.pools {
		for cls, l := range p.free {
			for i := range l {
				l[i] = nil
				a.charged -= cls
				a.freeBytes -= cls
				a.ledger.Release(mem.Input, p.owner, cls)
			}
			delete(p.free, cls)
		}
	}
	a.cond.Broadcast()
}

type poolKey struct{}

// withPool returns ctx carrying the pool that Alloc draws from.
func withPool(ctx context.Context, p *pool) context.Context {
	return context.WithValue(ctx, poolKey{}, p)
}

// Alloc returns a Block of n bytes from the pipeline's arena, charged to
// the stage that runs the function ctx was given to (a Map function, a
// source). It waits while the pipeline's budget is full (backpressure) and
// fails with an error wrapping *mem.OOMError when n can never fit. Outside
// a pipeline it returns a Block backed by plain Go memory.
func Alloc(ctx context.Context, n int) (*Block, error) {
	if n < 0 {
		panic("data: Alloc of a negative size")
	}
	p, _ := ctx.Value(poolKey{}).(*pool)
	if p == nil {
		b := &Block{buf: make([]byte, sizeClass(n)), n: n, pool: unpooled}
		b.refs.Store(1)
		return b, nil
	}
	return p.get(ctx, n)
}

// unpooled backs blocks made outside a pipeline.
var unpooled = &pool{owner: "unpooled"}

// NewTensor returns a zeroed tensor of the given dtype and shape in a Block
// from the pipeline's arena (see Alloc). The caller owns one reference.
func NewTensor(ctx context.Context, dtype tensor.DType, shape tensor.Shape) (tensor.Tensor, *Block, error) {
	if err := shape.Validate(); err != nil {
		return tensor.Tensor{}, nil, err
	}
	if !dtype.Valid() {
		return tensor.Tensor{}, nil, fmt.Errorf("data: invalid dtype %v", dtype)
	}
	b, err := Alloc(ctx, shape.Size()*dtype.Size())
	if err != nil {
		return tensor.Tensor{}, nil, err
	}
	buf := b.Bytes()
	clear(buf)
	t, err := tensor.FromBytes(dtype, shape, buf)
	if err != nil {
		b.Release()
		return tensor.Tensor{}, nil, err
	}
	return t, b, nil
}
