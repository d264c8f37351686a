package data

import (
	"context"
	"sync"
	"time"
)

// chunkTarget is the work a parallel Map hands a worker at once: elements
// are grouped into chunks of about this much function time, so that the
// cost of waking a goroutine (microseconds) is paid per chunk, not per
// element; a 1 ms function gets chunks of one element.
const chunkTarget = time.Millisecond

// maxChunk bounds a chunk's elements.
const maxChunk = 256

// mapChunk is a run of consecutive input elements and their results.
type mapChunk[T, U any] struct {
	seq   int64
	xs    []T
	ys    []U
	errs  []error
	ready bool
}

// mapPar is a Map on worker goroutines. A dispatcher goroutine reads the
// input in chunks and numbers them; workers apply fn to a whole chunk and
// mark it ready; the consumer takes chunks in number order (or, unordered,
// in completion order) and hands out their elements. At most limit chunks
// are in flight.
type mapPar[T, U any] struct {
	p      *pipeline
	st     *stage
	up     iterator[T]
	fn     func(context.Context, T) (U, error)
	fctx   context.Context
	cancel context.CancelFunc
	stop   func() bool
	wg     sync.WaitGroup
	in     elemOps[T]
	out    elemOps[U]
	jobs   chan *mapChunk[T, U]
	auto   bool
	unord  bool

	mu         sync.Mutex
	readyCond  sync.Cond
	roomCond   sync.Cond
	wake       callerWake        // the consumer's context, for readyCond
	ring       []*mapChunk[T, U] // ordered: chunk seq % len; unordered: FIFO of ready chunks from head
	nready     int               // unordered: ready chunks in ring from head on
	free       []*mapChunk[T, U]
	head, tail int64 // chunks delivered, dispatched
	limit      int
	workers    int // running
	target     int
	upDone     bool
	upErr      error
	chunk      int // elements per chunk, set by the dispatcher

	// consumer goroutine only
	cur *mapChunk[T, U]
	ci  int

	// Autotune state, consumer goroutine only
	last     int64 // mono
	waited   time.Duration
	lastBusy int64
	lastN    int64
	prevRate float64
	grew     bool
	settle   int
	evalN    int64
	evalWall time.Duration
	freeze   int
	avgSize  float64
}

func startMap[T, U any](p *pipeline, st *stage, up iterator[T], fn func(context.Context, T) (U, error), name string, cfg mapConfig) *mapPar[T, U] {
	ctx, cancel := context.WithCancel(p.ctx)
	workers, maxw := cfg.workers, cfg.workers
	if cfg.workers == Autotune {
		workers, maxw = 1, MaxMapWorkers
	}
	m := &mapPar[T, U]{
		p: p, st: st, up: up, fn: fn, fctx: withPool(ctx, p.arena.pool(name)), cancel: cancel,
		in: opsOf[T](), out: opsOf[U](), auto: cfg.workers == Autotune, unord: cfg.unordered,
		jobs:  make(chan *mapChunk[T, U], 2*maxw+2),
		ring:  make([]*mapChunk[T, U], 2*maxw+2),
		limit: 2*workers + 2, target: workers, chunk: 1, last: mono(),
	}
	m.readyCond.L = &m.mu
	m.roomCond.L = &m.mu
	m.stop = context.AfterFunc(ctx, func() {
		m.mu.Lock()
		m.readyCond.Broadcast()
		m.roomCond.Broadcast()
		m.mu.Unlock()
	})
	st.setPar(workers)
	m.wg.Add(1 + workers)
	m.workers = workers
	go m.dispatch(ctx)
	for range workers {
		go m.work(ctx)
	}
	return m
}

// chunkSize picks the elements per chunk from the measured time per
// element of the function and of the input, so that the chunks in flight
// (limit of them), inputs and outputs, hold at most a quarter of the
// budget: a chunk being filled holds its inputs while the input waits for
// memory, and a chunk being mapped holds its outputs while the function
// does. Until an element has been measured a chunk is one element.
func (m *mapPar[T, U]) chunkSize(limit int) int {
	done := m.st.elements.Load()
	if done == 0 {
		return 1
	}
	c := int64(maxChunk)
	if per := (m.st.busy.Load() + m.up0()) / done; per > 0 {
		c = min(max(int64(chunkTarget)/per, 1), maxChunk)
	}
	if m.p.arena.budget > 0 {
		size := m.st.bytes.Load() / done
		if up := m.st.up; up != nil {
			if k := up.elements.Load(); k > 0 {
				size += up.bytes.Load() / k
			}
		}
		if size > 0 {
			c = min(c, max(1, m.p.arena.budget/4/(int64(limit)*size)))
		}
	}
	return int(c)
}

// up0 is the time spent reading the input so far.
func (m *mapPar[T, U]) up0() int64 {
	if m.st.up == nil {
		return 0
	}
	return m.st.up.incl.Load()
}

func (m *mapPar[T, U]) dispatch(ctx context.Context) {
	defer m.wg.Done()
	defer close(m.jobs)
	for {
		m.mu.Lock()
		var t0 time.Time
		for int(m.tail-m.head) >= m.limit && ctx.Err() == nil {
			if t0.IsZero() {
				t0 = time.Now()
			}
			m.roomCond.Wait()
		}
		if !t0.IsZero() {
			m.st.blocked.Add(int64(time.Since(t0)))
		}
		limit := m.limit
		var c *mapChunk[T, U]
		if n := len(m.free); n > 0 {
			c, m.free = m.free[n-1], m.free[:n-1]
		} else {
			c = &mapChunk[T, U]{}
		}
		m.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		size := m.chunkSize(limit)
		m.mu.Lock()
		m.chunk = size
		m.mu.Unlock()
		var err error
		for len(c.xs) < size {
			if len(c.xs) > 0 && m.p.arena.short() {
				break // ship what we have: a waiting input must not hold a chunk hostage
			}
			var x T
			if x, err = m.up.next(ctx); err != nil {
				break
			}
			c.xs = append(c.xs, x)
		}
		m.mu.Lock()
		if len(c.xs) > 0 {
			c.seq = m.tail
			m.tail++
			if !m.unord {
				m.ring[c.seq%int64(len(m.ring))] = c
			}
		}
		if err != nil {
			m.upDone, m.upErr = true, err
			m.readyCond.Broadcast()
		}
		m.mu.Unlock()
		if len(c.xs) > 0 {
			m.jobs <- c // never blocks: chunks in flight <= limit <= cap(jobs)
		}
		if err != nil {
			return
		}
	}
}

func (m *mapPar[T, U]) work(ctx context.Context) {
	defer m.wg.Done()
	for {
		var c *mapChunk[T, U]
		var ok bool
		select {
		case c, ok = <-m.jobs:
		case <-ctx.Done():
			return
		}
		if !ok {
			return
		}
		t0 := mono()
		for i, x := range c.xs {
			y, err := m.fn(m.fctx, x)
			m.in.release(x)
			var zero T
			c.xs[i] = zero
			c.ys = append(c.ys, y)
			c.errs = append(c.errs, err)
		}
		c.xs = c.xs[:0]
		m.st.busy.Add(mono() - t0)
		m.mu.Lock()
		c.ready = true
		if m.unord {
			m.ring[(m.head+int64(m.nready))%int64(len(m.ring))] = c
			m.nready++
			m.readyCond.Signal()
		} else if c.seq == m.head {
			m.readyCond.Signal()
		}
		quit := m.workers > m.target
		if quit {
			m.workers--
		}
		m.mu.Unlock()
		if quit {
			return
		}
	}
}

func (m *mapPar[T, U]) next(ctx context.Context) (U, error) {
	var zero U
	var t0 int64
	if m.auto {
		t0 = mono()
	}
	for {
		if c := m.cur; c != nil {
			for m.ci < len(c.ys) {
				y, err := c.ys[m.ci], c.errs[m.ci]
				c.ys[m.ci], c.errs[m.ci] = zero, nil
				m.ci++
				if err != nil && m.p.skip(m.st, err) {
					continue
				}
				if m.auto {
					m.tune(t0, y)
				}
				return y, err
			}
			m.recycle(c)
			m.cur = nil
		}
		c, err := m.take(ctx)
		if err != nil {
			return zero, err
		}
		m.cur, m.ci = c, 0
	}
}

// take waits for the next chunk in order (or any ready chunk, unordered).
func (m *mapPar[T, U]) take(ctx context.Context) (*mapChunk[T, U], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		slot := &m.ring[m.head%int64(len(m.ring))]
		if c := *slot; c != nil && c.ready && (!m.unord || m.nready > 0) {
			*slot = nil
			m.head++
			if m.unord {
				m.nready--
			}
			m.roomCond.Signal()
			return c, nil
		}
		if m.upDone && m.head == m.tail {
			return nil, m.upErr
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.wake.watch(ctx, &m.readyCond)
		m.readyCond.Wait()
	}
}

func (m *mapPar[T, U]) recycle(c *mapChunk[T, U]) {
	c.xs, c.ys, c.errs, c.ready = c.xs[:0], c.ys[:0], c.errs[:0], false
	m.mu.Lock()
	m.free = append(m.free, c)
	m.mu.Unlock()
}

// tune runs Autotune's rule once per window (see Map). After an increase
// it lets one window pass for the new worker to settle, measures the next
// two, and takes the worker back if throughput did not rise by 2%.
func (m *mapPar[T, U]) tune(t0 int64, y U) {
	now := mono()
	m.waited += time.Duration(now - t0)
	sz := float64(m.out.size(y))
	if m.avgSize == 0 {
		m.avgSize = sz
	}
	m.avgSize = 0.9*m.avgSize + 0.1*sz
	wall := time.Duration(now - m.last)
	n := m.st.elements.Load()
	if wall < autotuneWindow || n-m.lastN < 8 {
		return
	}
	busy := m.st.busy.Load()
	m.mu.Lock()
	workers, target, chunk := m.workers, m.target, m.chunk
	m.mu.Unlock()
	rate := float64(n-m.lastN) / wall.Seconds()
	util := float64(busy-m.lastBusy) / (float64(wall) * float64(max(1, workers)))
	waited := m.waited
	m.last, m.waited, m.lastBusy, m.lastN = now, 0, busy, n
	switch {
	case m.settle > 0: // the window right after a change
		m.settle--
		m.evalN, m.evalWall = n, 0
		return
	case m.grew:
		if m.evalWall += wall; m.evalWall < 2*autotuneWindow {
			return
		}
		m.grew = false
		evalRate := float64(n-m.evalN) / m.evalWall.Seconds()
		if evalRate < 1.02*m.prevRate && target > 1 {
			// the last worker did not help: take it back and rest a while
			m.setTarget(target - 1)
			m.freeze = 5
			return
		}
	case m.freeze > 0:
		m.freeze--
		return
	}
	if waited <= wall/20 || util < 0.7 || target >= MaxMapWorkers {
		return
	}
	if !m.affords(target+1, chunk) {
		return
	}
	m.prevRate = rate
	m.setTarget(target + 1)
	m.grew, m.settle = true, 1
}

// affords reports whether the budget holds the elements that target
// workers keep in flight (2*target+2 chunks of outputs) besides what the
// rest of the pipeline holds now and the reserve.
func (m *mapPar[T, U]) affords(target, chunk int) bool {
	a := m.p.arena
	if a.budget <= 0 {
		return true
	}
	m.mu.Lock()
	inflight := m.tail - m.head
	m.mu.Unlock()
	per := float64(chunk) * m.avgSize
	others := a.ledger.Live() - int64(float64(inflight)*per)
	planned := int64(float64(2*target+2) * per)
	return max(0, others)+planned+a.reserve() <= a.budget
}

func (m *mapPar[T, U]) setTarget(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.target = n
	m.limit = 2*n + 2
	for m.workers < n {
		m.workers++
		m.wg.Add(1)
		go m.work(m.fctx)
	}
	m.roomCond.Broadcast()
	m.st.setPar(n)
}

func (m *mapPar[T, U]) close() {
	m.cancel()
	m.wg.Wait()
	m.stop()
	m.mu.Lock()
	m.wake.release()
	m.mu.Unlock()
	release := func(c *mapChunk[T, U], from int) {
		for _, x := range c.xs {
			m.in.release(x)
		}
		for i := from; i < len(c.ys); i++ {
			if c.errs[i] == nil {
				m.out.release(c.ys[i])
			}
		}
	}
	if m.cur != nil {
		release(m.cur, m.ci)
		m.cur = nil
	}
	for c := range m.jobs {
		release(c, 0)
	}
	for i, c := range m.ring {
		if c != nil && c.ready {
			release(c, 0)
		}
		m.ring[i] = nil
	}
	m.up.close()
}
