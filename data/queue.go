package data

import (
	"context"
	"sync"
	"time"
)

// queue is a FIFO of at most limit elements (limit <= len(ring), adjustable)
// between one producer goroutine and one consumer. The producer ends it with
// finish(err); the consumer then drains it and gets err.
type queue[T any] struct {
	mu       sync.Mutex
	notEmpty sync.Cond
	notFull  sync.Cond
	ring     []T
	head, n  int
	limit    int
	done     bool
	err      error // io.EOF or the producer's error, after the elements
	stop     func() bool
	wake     callerWake // the consumer's context, for notEmpty

	// window counters for Autotune, guarded by mu
	pops, emptyPops int
	blocked         time.Duration // producer waiting for room
}

func newQueue[T any](ctx context.Context, capacity, limit int) *queue[T] {
	q := &queue[T]{ring: make([]T, capacity), limit: limit}
	q.notEmpty.L = &q.mu
	q.notFull.L = &q.mu
	q.stop = context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.notEmpty.Broadcast()
		q.notFull.Broadcast()
		q.mu.Unlock()
	})
	return q
}

// push appends x, waiting for room; false when ctx ended first (x was not
// taken). It returns how long it waited.
func (q *queue[T]) push(ctx context.Context, x T) (bool, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var t0 time.Time
	for q.n >= q.limit {
		if ctx.Err() != nil {
			return false, 0
		}
		if t0.IsZero() {
			t0 = time.Now()
		}
		q.notFull.Wait()
	}
	var w time.Duration
	if !t0.IsZero() {
		w = time.Since(t0)
		q.blocked += w
	}
	q.ring[(q.head+q.n)%len(q.ring)] = x
	q.n++
	q.notEmpty.Signal()
	return true, w
}

// finish records the producer's last word (io.EOF or an error).
func (q *queue[T]) finish(err error) {
	q.mu.Lock()
	q.done, q.err = true, err
	q.notEmpty.Broadcast()
	q.mu.Unlock()
}

// pop returns the oldest element, or the producer's final error once the
// queue is empty, or ctx.Err().
func (q *queue[T]) pop(ctx context.Context) (T, error) {
	var zero T
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pops++
	if q.n == 0 && !q.done {
		q.emptyPops++
	}
	for q.n == 0 {
		if q.done {
			return zero, q.err
		}
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		q.wake.watch(ctx, &q.notEmpty)
		q.notEmpty.Wait()
	}
	x := q.ring[q.head]
	q.ring[q.head] = zero
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	q.notFull.Signal()
	return x, nil
}

// setLimit changes how many elements the queue may hold.
func (q *queue[T]) setLimit(n int) {
	q.mu.Lock()
	q.limit = min(max(n, 1), len(q.ring))
	q.notFull.Broadcast()
	q.mu.Unlock()
}

// window returns and resets the Autotune counters.
func (q *queue[T]) window() (pops, emptyPops int, blocked time.Duration, limit int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	pops, emptyPops, blocked, limit = q.pops, q.emptyPops, q.blocked, q.limit
	q.pops, q.emptyPops, q.blocked = 0, 0, 0
	return
}

// drain removes every element left (after the producer stopped).
func (q *queue[T]) drain(release func(T)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	for ; q.n > 0; q.n-- {
		release(q.ring[q.head])
		q.ring[q.head] = zero
		q.head = (q.head + 1) % len(q.ring)
	}
	q.stop()
	q.wake.release()
}
