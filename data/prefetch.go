package data

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/headroom-ml/headroom/mem"
)

// MaxPrefetch is the deepest buffer Prefetch(Autotune) grows to.
const MaxPrefetch = 64

// Prefetch reads ahead of the consumer in a goroutine, holding up to n
// elements (tf.data's prefetch). With n = Autotune it starts at 2 and
// deepens while the consumer waits on an empty buffer although the producer
// sometimes found it full (a bursty producer), up to MaxPrefetch and only
// while the budget has room for two more elements beyond the pipeline's
// reserve. The elements it holds stay charged to the stage that made them.
// It panics unless n >= 1 or n == Autotune.
func (d Dataset[T]) Prefetch(n int) Dataset[T] {
	name := fmt.Sprintf("prefetch(%d)", n)
	if n == Autotune {
		name = "prefetch(autotune)"
	} else if n < 1 {
		panic(fmt.Sprintf("data: Prefetch(%d): want n >= 1 or Autotune", n))
	}
	return newDataset(name, kindPrefetch, func(p *pipeline, st *stage) (iterator[T], error) {
		capacity, limit := n, n
		if n == Autotune {
			capacity, limit = MaxPrefetch, 2
		}
		slots := int64(capacity) * int64(unsafe.Sizeof(*new(T)))
		if err := p.ledger.Charge(mem.Input, name, slots); err != nil {
			return nil, fmt.Errorf("data: %s: %w", name, err)
		}
		up, ust, err := d.openIn(p)
		if err != nil {
			p.ledger.Release(mem.Input, name, slots)
			return nil, err
		}
		st.up = ust
		ctx, cancel := context.WithCancel(p.ctx)
		it := &prefetchIter[T]{
			p: p, st: st, up: up, name: name, slots: slots, cancel: cancel,
			q: newQueue[T](ctx, capacity, limit), auto: n == Autotune, ops: opsOf[T](),
			last: time.Now(),
		}
		st.setPar(limit)
		it.wg.Add(1)
		go it.produce(ctx)
		return it, nil
	})
}

type prefetchIter[T any] struct {
	p      *pipeline
	st     *stage
	up     iterator[T]
	name   string
	slots  int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
	q      *queue[T]
	auto   bool
	ops    elemOps[T]

	// Autotune state, used by the consumer's goroutine only
	last    time.Time
	waited  time.Duration
	avgSize float64
}

func (it *prefetchIter[T]) produce(ctx context.Context) {
	defer it.wg.Done()
	for {
		x, err := it.up.next(ctx)
		if err != nil {
			it.q.finish(err)
			return
		}
		ok, w := it.q.push(ctx, x)
		it.st.blocked.Add(int64(w))
		if !ok {
			it.ops.release(x)
			it.q.finish(ctx.Err())
			return
		}
	}
}

func (it *prefetchIter[T]) next(ctx context.Context) (T, error) {
	if !it.auto {
		return it.q.pop(ctx)
	}
	t0 := time.Now()
	x, err := it.q.pop(ctx)
	now := time.Now()
	it.waited += now.Sub(t0)
	if err == nil {
		sz := float64(it.ops.size(x))
		if it.avgSize == 0 {
			it.avgSize = sz
		}
		it.avgSize = 0.9*it.avgSize + 0.1*sz
	}
	if wall := now.Sub(it.last); wall >= autotuneWindow {
		it.tune(wall)
		it.last, it.waited = now, 0
	}
	return x, err
}

// autotuneWindow is how often Autotune decides.
const autotuneWindow = 10 * time.Millisecond

func (it *prefetchIter[T]) tune(wall time.Duration) {
	pops, empty, blocked, limit := it.q.window()
	if pops == 0 || limit >= MaxPrefetch {
		return
	}
	consumerWaits := it.waited > wall/20 && empty*10 > pops
	bursty := blocked > wall/100
	if !consumerWaits || !bursty {
		return
	}
	need := int64(2*it.avgSize) + it.p.arena.reserve()
	if it.p.arena.available() < need {
		return
	}
	it.q.setLimit(limit + 1)
	it.st.setPar(limit + 1)
}

func (it *prefetchIter[T]) close() {
	it.cancel()
	it.wg.Wait()
	it.q.drain(it.ops.release)
	it.up.close()
	it.p.ledger.Release(mem.Input, it.name, it.slots)
}
