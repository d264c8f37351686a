package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// A Pool's threads: goroutines started when the pool is made (the default
// pool: at first use), each owning packing buffers of a fixed size, so that
// a product in the steady state starts no goroutine and allocates nothing
// (design principle 3). The calling goroutine works too, with buffer set 0;
// workers 1 ... threads-1 hold the others.
//
// Hand-off: the caller publishes a product (its number, its regions and the
// next region to claim) in one atomic word of the pool; the caller and the
// workers claim regions from it until none is left. A worker that finished
// its last product spins on that word for up to gemmSpin, so back-to-back
// products (a training step) start within a microsecond, as BLAS thread
// pools do; after that it parks on a channel and the caller wakes it. The
// caller waits for the last region the same way: a spin, then a channel.
// Every hand-off is an atomic operation or a channel operation, so the Go
// memory model (and the race detector) orders the product's fields and
// results.
//
// Jobs (jobs.go) use the same hand-off for other work: the convolution and
// pooling kernels, large elementwise kernels and ParallelOn publish regions
// of a job instead of a product, so they share the pool's threads and its
// spinning with the products around them.
//
// Everything a product or job changes lives in its Pool: two pools share
// no mutable state, so two engines in one process each run on their own
// threads and pack into their own Scratch.

// MaxThreads is the most threads a Pool has (NewPool and SetThreads cap
// their count at it).
const MaxThreads = 256

// gemmSpin is how long an idle worker, or a caller waiting for workers,
// spins before parking; every gemmYield of it, the spinner yields its P
// (runtime.Gosched) so that other goroutines are not held up. Waking a
// parked goroutine costs tens of microseconds on a virtual machine, as much
// as the work of a small product, so the spin covers the gaps between the
// products of a training step.
const (
	gemmSpin  = time.Millisecond
	gemmYield = 20 * time.Microsecond
)

// gemmWorkspace is one thread's packing buffers (gemm_pack.go), each aligned
// to a 64-byte cache line.
type gemmWorkspace struct {
	a []float32 // A panel: gemmMC·gemmKC
	b []float32 // B block: gemmKC·gemmNC
	c []float32 // scratch tile for the edges: gemmMaxMR·gemmMaxNR
}

// gemmWorkspaceFloats is the number of float32 in one gemmWorkspace,
// including the alignment slack of its three buffers.
const gemmWorkspaceFloats = gemmMC*gemmKC + gemmKC*gemmNC + gemmMaxMR*gemmMaxNR + 3*16

func newGemmWorkspace() *gemmWorkspace {
	buf := make([]float32, gemmWorkspaceFloats)
	take := func(n int) []float32 {
		buf = alignFloats(buf)
		s := buf[:n:n]
		buf = buf[n:]
		return s
	}
	return &gemmWorkspace{a: take(gemmMC * gemmKC), b: take(gemmKC * gemmNC), c: take(gemmMaxMR * gemmMaxNR)}
}

// alignFloats drops the leading elements of s up to the next 64-byte
// boundary (at most 15).
func alignFloats(s []float32) []float32 {
	off := 0
	for off < 16 && uintptr(unsafe.Pointer(unsafe.SliceData(s[off:])))%64 != 0 {
		off++
	}
	return s[off:]
}

// A parker is a goroutine's spin-then-park state: running, or parked on
// wake until another goroutine moves it back to running and sends a token.
type parker struct {
	parked atomic.Bool
	wake   chan struct{} // capacity 1
}

func newParker() *parker { return &parker{wake: make(chan struct{}, 1)} }

// await spins for up to gemmSpin, then parks, until ready returns true, and
// returns its last result.
func (k *parker) await(ready func() (uint64, bool)) uint64 {
	start := time.Now()
	lastYield := time.Duration(0)
	for i := 1; ; i++ {
		if v, ok := ready(); ok {
			return v
		}
		if i%64 == 0 {
			since := time.Since(start)
			if since > gemmSpin {
				break
			}
			if since-lastYield > gemmYield {
				runtime.Gosched()
				lastYield = since
			}
		}
	}
	k.parked.Store(true)
	if v, ok := ready(); ok {
		if k.parked.CompareAndSwap(true, false) {
			return v
		}
		<-k.wake // unpark already moved us to running and sends a token
		return v
	}
	<-k.wake
	v, _ := ready()
	return v
}

// unpark wakes k if it is parked. Call it after making ready true.
func (k *parker) unpark() {
	if k.parked.CompareAndSwap(true, false) {
		k.wake <- struct{}{}
	}
}

// gemmWorker is one pool thread.
type gemmWorker struct {
	parker
	index int // its thread number: 1, 2, ... (the caller is 0)
	stop  atomic.Bool
}

// Pool is the threads the kernels' products and jobs run on, and their
// packing memory: worker goroutines, a thread count, the spin-then-park
// state of the hand-off, the Scratch its products pack into and the call
// of each kind in progress. A product, convolution, pooling pass or job
// runs on the pool passed to it (MatMulOn, Conv2DOn, ParallelOn, ...); the
// package-level kernels (MatMul, Conv2D, Parallel, ...) run on the default
// pool. Calls on one pool from several goroutines are safe and run one
// after another; two pools share nothing and run at once.
//
// An engine owns one Pool, sized by its thread setting (NewPool), gives it
// the packing memory of its plan (SetScratch) and closes it with the engine
// (Close).
type Pool struct {
	// mu is held for a whole product and guards threads, closed, workers,
	// own, cur, scratch, call and job (a job holds it from start to end).
	mu      sync.Mutex
	threads int // 0 until first use (the default pool) or after Close, then >= 1
	closed  bool
	// threadsNow is threads, for Threads to read without mu (a job's parts
	// run while the caller holds mu).
	threadsNow atomic.Int32
	workers    []*gemmWorker  // workers[i] is thread i+1
	running    sync.WaitGroup // workers that have not returned
	// own[t] is thread t's own packing buffers on the Go heap, made the
	// first time a product finds no scratch that holds it; cur[t] is what
	// thread t packs into for the product or job in progress: a piece of
	// the pool's Scratch, its own buffers, or nothing (jobs that pack
	// nothing).
	own     []*gemmWorkspace
	cur     []gemmWorkspace
	scratch *Scratch // SetScratch
	call    gemmCall // the product in progress
	job     *poolJob // when set, what the regions compute instead of call (jobs.go)

	// claim is (product number << 32) | (regions << 16) | next region. The
	// caller publishes a product by storing it with next region 0; every
	// thread, the caller included, claims regions by advancing next with a
	// compare-and-swap until none is left.
	claim  atomic.Uint64
	done   atomic.Int32 // regions of the current product completed
	caller *parker      // the caller waiting for done to reach regions

	misses atomic.Int64 // ScratchMisses

	calls poolCalls // the kernels' calls in progress (jobs.go)
}

// NewPool returns a pool of threads threads: the calling goroutine of each
// product and threads-1 worker goroutines, started now. threads <= 0 means
// runtime.GOMAXPROCS(0); it is capped at MaxThreads. The pool has no
// Scratch until SetScratch gives it one: until then its threads pack into
// buffers of their own on the Go heap (GemmWorkspaceBytes at most), made
// the first time a product needs them. Close stops the workers; a pool
// that is never closed keeps them, and itself, alive.
func NewPool(threads int) *Pool {
	p := &Pool{caller: newParker()}
	p.resize(threads)
	return p
}

// Threads returns the number of threads p runs on: the caller and
// Threads()-1 workers. It panics if p is closed.
func (p *Pool) Threads() int {
	if n := p.threadsNow.Load(); n > 0 {
		return int(n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	return p.threads
}

// GemmWorkspaceBytes returns the bytes of packing buffers p's threads hold
// on the Go heap at most: one set per thread, each an A panel (MC·KC
// float32), a B block (KC·NC float32) and an edge tile, made the first time
// a product finds no Scratch of p's that holds it (see Scratch; with one,
// the pool holds none). It panics if p is closed.
func (p *Pool) GemmWorkspaceBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	return int64(p.threads) * gemmWorkspaceFloats * 4
}

// Close stops p's workers and waits for them to return, and drops its
// packing buffers and its Scratch. It waits for a product or job in
// progress to finish. p must not be used after Close: Threads and the
// kernels that reach its threads panic. Closing a closed pool does nothing.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.stopWorkers(0)
	p.running.Wait()
	p.closed = true
	p.threads = 0
	p.threadsNow.Store(0)
	p.own, p.cur, p.scratch = nil, nil, nil
}

// init sizes the pool to the default on first use (the default pool) and
// panics if p is closed. p.mu is held.
func (p *Pool) init() {
	if p.threads == 0 {
		if p.closed {
			panicf("Pool used after Close")
		}
		p.resize(0)
	}
}

// resize starts or stops workers so that the pool has n threads (<= 0:
// GOMAXPROCS). p.mu is held, or p is not yet shared.
func (p *Pool) resize(n int) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	n = min(n, MaxThreads)
	for len(p.workers) < n-1 {
		w := &gemmWorker{parker: parker{wake: make(chan struct{}, 1)}, index: len(p.workers) + 1}
		p.workers = append(p.workers, w)
		p.running.Add(1)
		go p.work(w, p.claim.Load())
	}
	for len(p.own) < n {
		p.own = append(p.own, nil)
		p.cur = append(p.cur, gemmWorkspace{})
	}
	p.stopWorkers(n - 1)
	p.threads = n
	p.threadsNow.Store(int32(n))
}

// stopWorkers stops the workers past the first keep (they return soon
// after; p.running counts them until then).
func (p *Pool) stopWorkers(keep int) {
	for len(p.workers) > keep {
		w := p.workers[len(p.workers)-1]
		w.stop.Store(true)
		w.unpark()
		p.workers[len(p.workers)-1] = nil
		p.workers = p.workers[:len(p.workers)-1]
	}
}

// work is the loop of a worker: wait for a product newer than seen, claim
// and compute its regions while any is left, repeat until stopped.
func (p *Pool) work(w *gemmWorker, seen uint64) {
	defer p.running.Done()
	ready := func() (uint64, bool) {
		v := p.claim.Load()
		return v, v>>32 != seen>>32 || w.stop.Load()
	}
	for {
		v := w.await(ready)
		if w.stop.Load() {
			return
		}
		seen = v
		p.runRegions(w.index, v>>32)
	}
}

// runRegions claims regions of product number gen and computes them with
// thread t's packing buffers until none is left. Regions are claimed, not
// assigned, so a thread that starts late (a worker the scheduler has not run
// yet, or has preempted) costs at most the region it holds: the others take
// the rest.
func (p *Pool) runRegions(t int, gen uint64) {
	var ws *gemmWorkspace // read after the first claim: p.cur may be resized between products
	slot := -1            // this thread's slot in the current job, taken at its first region
	for {
		v := p.claim.Load()
		regions, next := int(v>>16&0xffff), int(v&0xffff)
		if v>>32 != gen || next >= regions {
			return
		}
		if !p.claim.CompareAndSwap(v, v+1) {
			continue
		}
		// The claim orders this read of call (and of cur) after the
		// caller's write of it, and the caller does not touch call again
		// before done reaches regions.
		if ws == nil {
			ws = &p.cur[t]
		}
		if job := p.job; job != nil {
			if slot < 0 {
				slot = int(job.slots.Add(1)) - 1
			}
			job.part(ws, next, slot)
		} else {
			p.call.part(ws, next)
		}
		if p.done.Add(1) == int32(regions) {
			p.caller.unpark()
		}
	}
}

// run computes c on the pool and returns when all its regions are done. The
// calling goroutine claims regions like the workers.
func (p *Pool) run(c gemmCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	p.call = c
	call := &p.call
	parts := call.plan(p.threads)
	p.pack(call.packNeed(call.m, call.n, call.k))
	if parts == 1 {
		call.part(&p.cur[0], 0)
	} else {
		p.handOff(parts, parts-1)
	}
	p.call = gemmCall{} // drop the caller's slices
}

// handOff publishes the current product (or job) as regions regions, wakes
// helpers workers, computes regions with the others and returns when all
// are done. p.mu is held.
func (p *Pool) handOff(regions, helpers int) {
	gen := p.claim.Load()>>32 + 1
	p.done.Store(0)
	p.claim.Store(gen<<32 | uint64(regions)<<16)
	for _, w := range p.workers[:helpers] {
		w.unpark()
	}
	p.runRegions(0, gen)
	p.caller.await(func() (uint64, bool) { return 0, p.done.Load() == int32(regions) })
}

// runJob computes regions [0, regions) of j (j.part) on the pool and returns
// when all are done. Each thread that takes part gets a slot, 0, 1, ...,
// for its scratch; j.slots bounds them (0: no bound): when the pool has
// more threads than j.slots, the caller computes every region in slot 0.
// j.part must not call into the pool. Regions are claimed as a product's
// are, so the thread and slot that compute a region vary from run to run; a
// job's results must not depend on them.
func (p *Pool) runJob(j *poolJob, regions int) {
	if regions < 1 {
		return
	}
	if regions > 0xffff {
		panicf("runJob: %d regions, want at most 65535", regions)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	p.pack(j.packNeed())
	if p.threads == 1 || regions == 1 || j.maxSlots > 0 && p.threads > j.maxSlots {
		for r := 0; r < regions; r++ {
			j.part(&p.cur[0], r, 0)
		}
		return
	}
	j.slots.Store(0)
	p.job = j
	p.handOff(regions, min(p.threads, regions)-1)
	p.job = nil
}
