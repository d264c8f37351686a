package data

import (
	"context"
	"errors"
	"io"
	"iter"
	"runtime"
	"sync"
	"time"

	"github.com/headroom-ml/headroom/mem"
)

// Autotune asks a stage to choose its own parallelism (Map) or depth
// (Prefetch) from measured waits, within the pipeline's budget, as
// tf.data.AUTOTUNE does.
const Autotune = -1

// DefaultBudget is the pipeline budget when Config.Budget is not set.
const DefaultBudget = 256 << 20

// Dataset is a recipe for a stream of elements of type T: a source and the
// stages applied to it. A Dataset holds no data and starts nothing; each call
// to Iter opens an independent pass with its own buffers, goroutines and
// stats. Datasets are immutable values: every stage returns a new one.
type Dataset[T any] struct {
	n    *node
	open func(p *pipeline, st *stage) (iterator[T], error)
}

// node identifies a stage of a recipe; the stats of every pass through the
// same node add up (Repeat reopens its input, for example).
type node struct {
	name string
	kind stageKind
}

// iterator is the internal protocol between stages. next returns io.EOF at
// the end. close stops every goroutine the stage started (and waits for
// them), releases the elements it buffers and closes its input; it is called
// once, never concurrently with next.
type iterator[T any] interface {
	next(ctx context.Context) (T, error)
	close()
}

func newDataset[T any](name string, kind stageKind, open func(p *pipeline, st *stage) (iterator[T], error)) Dataset[T] {
	return Dataset[T]{n: &node{name: name, kind: kind}, open: open}
}

// Name returns the name of the last stage ("map(decode)", "batch(256)", ...).
func (d Dataset[T]) Name() string {
	if d.n == nil {
		return ""
	}
	return d.n.name
}

// openIn opens d as part of pipeline p and wraps it so that its stage
// counts elements, bytes and the time its consumer spends in next.
func (d Dataset[T]) openIn(p *pipeline) (iterator[T], *stage, error) {
	if d.open == nil {
		return nil, nil, errors.New("data: the zero Dataset has no source")
	}
	st := p.stage(d.n)
	it, err := d.open(p, st)
	if err != nil {
		return nil, nil, err
	}
	return &timed[T]{it: it, st: st, size: opsOf[T]().size}, st, nil
}

type timed[T any] struct {
	it   iterator[T]
	st   *stage
	size func(T) int64
}

func (t *timed[T]) next(ctx context.Context) (T, error) {
	t0 := mono()
	x, err := t.it.next(ctx)
	t.st.incl.Add(mono() - t0)
	if err == nil {
		t.st.elements.Add(1)
		t.st.bytes.Add(t.size(x))
	}
	return x, err
}

func (t *timed[T]) close() { t.it.close() }

// Config sets up one pass over a Dataset.
type Config struct {
	// Ledger is the host ledger the pipeline charges (through a sub-ledger
	// named Name with the budget). Nil: a new root ledger.
	Ledger *mem.Ledger
	// Budget is the most bytes the pipeline's buffers may hold, all stages
	// together; <= 0 means DefaultBudget. A stage that would exceed it waits.
	Budget int64
	// OnError is the policy for corrupt records: Fail (default) or Skip.
	OnError Policy
	// Name names the pipeline's sub-ledger ("data" when empty).
	Name string
}

// pipeline is what a stage's open function gets: the state shared by the
// stages of one pass and the scope stats are kept in.
type pipeline struct {
	*pass
	scope *node // the Interleave whose inner datasets are being opened
}

// pass is the state shared by the stages of one pass.
type pass struct {
	ctx    context.Context
	cancel context.CancelFunc
	ledger *mem.Ledger // the pipeline's sub-ledger
	arena  *arena
	policy Policy
	start  time.Time

	mu     sync.Mutex
	stages []*stage
	byNode map[stageKey]*stage
	opens  map[*node]int
	top    *stage   // the last stage
	atEnd  []func() // run when the pass ends, before the arena closes
	caches map[*node]any
}

type stageKey struct {
	scope *node
	n     *node
	name  string
}

// stage returns the stats of n in this pass, creating them on first use.
func (p *pipeline) stage(n *node) *stage {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := stageKey{n: n}
	if p.scope != nil {
		k = stageKey{scope: p.scope, name: n.name}
	}
	if st := p.byNode[k]; st != nil {
		return st
	}
	st := &stage{name: n.name, kind: n.kind, inner: p.scope != nil}
	p.byNode[k] = st
	p.stages = append(p.stages, st)
	return st
}

// epoch returns how many times n was opened before in this pass (Shuffle
// uses it to reshuffle on each repetition).
func (p *pass) epoch(n *node) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.opens[n]
	p.opens[n] = e + 1
	return e
}

// skip reports whether err is a format error that the policy skips, and
// counts it on st.
func (p *pass) skip(st *stage, err error) bool {
	if p.policy != Skip || !isFormat(err) {
		return false
	}
	st.skipped.Add(1)
	return true
}

// Iterator is one pass over a Dataset. Next returns elements in order and
// io.EOF at the end. An element is valid until the next call to Next (which
// releases it) or Close; Retain it to keep it longer. Close stops every
// goroutine of the pass and releases its memory; it must be called (defer it)
// unless the pass was read to its end or failed, and is safe to call more
// than once. An Iterator is not safe for concurrent use.
type Iterator[T any] struct {
	p      *pipeline
	top    iterator[T]
	ops    elemOps[T]
	prev   T
	held   bool
	err    error
	closed bool
	wait   time.Duration
	n      int64
}

// Iter opens a pass over d. The pass ends when ctx is done: Next then
// returns ctx.Err() and the pass's goroutines exit.
func (d Dataset[T]) Iter(ctx context.Context, cfg Config) (*Iterator[T], error) {
	budget := cfg.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	name := cfg.Name
	if name == "" {
		name = "data"
	}
	root := cfg.Ledger
	if root == nil {
		root = mem.NewLedger("host", 0)
	}
	sub := root.Sub(name, budget)
	pctx, cancel := context.WithCancel(ctx)
	p := &pipeline{pass: &pass{
		ctx: pctx, cancel: cancel, ledger: sub, arena: newArena(sub, budget),
		policy: cfg.OnError, start: time.Now(),
		byNode: make(map[stageKey]*stage), opens: make(map[*node]int),
	}}
	top, topStage, err := d.openIn(p)
	p.top = topStage
	if err != nil {
		cancel()
		p.end()
		return nil, err
	}
	it := &Iterator[T]{p: p, top: top, ops: opsOf[T]()}
	// An Iterator dropped without Close still stops its goroutines.
	runtime.AddCleanup(it, func(c context.CancelFunc) { c() }, cancel)
	return it, nil
}

// Next returns the next element, io.EOF at the end, or the error that ended
// the pass (the same error on every later call).
func (it *Iterator[T]) Next() (T, error) {
	var zero T
	if it.held {
		it.ops.release(it.prev)
		it.prev, it.held = zero, false
	}
	if it.err != nil {
		return zero, it.err
	}
	if it.closed {
		return zero, errors.New("data: Next on a closed Iterator")
	}
	t0 := time.Now()
	x, err := it.top.next(it.p.ctx)
	it.wait += time.Since(t0)
	if err != nil {
		it.err = err
		it.stop()
		return zero, err
	}
	it.n++
	it.prev, it.held = x, true
	return x, nil
}

// stop ends the pass: cancels its context, closes every stage (each waits
// for its goroutines) and gives the free buffers back to the ledger.
func (it *Iterator[T]) stop() {
	if it.closed {
		return
	}
	it.closed = true
	it.p.cancel()
	it.top.close()
	it.p.end()
}

// end runs the pass's end hooks and closes its arena.
func (p *pass) end() {
	p.mu.Lock()
	hooks := p.atEnd
	p.atEnd = nil
	p.mu.Unlock()
	for i := len(hooks) - 1; i >= 0; i-- {
		hooks[i]()
	}
	p.arena.close()
}

// onEnd registers f to run when the pass ends.
func (p *pass) onEnd(f func()) {
	p.mu.Lock()
	p.atEnd = append(p.atEnd, f)
	p.mu.Unlock()
}

// Close releases the current element, stops every goroutine of the pass and
// returns its memory to the ledger. When it returns, no goroutine started by
// the pass is running.
func (it *Iterator[T]) Close() error {
	if it.held {
		var zero T
		it.ops.release(it.prev)
		it.prev, it.held = zero, false
	}
	it.stop()
	return nil
}

// Ledger returns the pipeline's sub-ledger: its live bytes, peak and owners
// (one per stage) under the budget.
func (it *Iterator[T]) Ledger() *mem.Ledger { return it.p.ledger }

// Stats returns the per-stage counters of the pass so far.
func (it *Iterator[T]) Stats() Stats { return it.p.stats(it.wait, it.n) }

// All returns a range-over-func sequence over a pass of d: each element with
// a nil error, or, once, a zero element and the error that ended the pass.
// The pass is closed when the loop ends, by break or return included. An
// element is valid for one iteration of the loop body.
func (d Dataset[T]) All(ctx context.Context, cfg Config) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		it, err := d.Iter(ctx, cfg)
		if err != nil {
			var zero T
			yield(zero, err)
			return
		}
		defer it.Close()
		for {
			x, err := it.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			if !yield(x, nil) {
				return
			}
		}
	}
}
