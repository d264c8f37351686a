package data

import (
	"context"
	"sync"
)

// callerWake wakes a condition's waiters when the context a caller waits
// under ends. The structures that wait (a map's ready chunks, a prefetch
// queue) wake on their own context, but a caller passes its own: a
// prefetch's producer waits under the prefetch's context, which its close
// cancels before anything upstream is closed. Without a wake on the
// caller's context that wait lasts until the next element is ready, which
// may be never.
//
// It keeps one registration for the last context seen, so a steady state
// of waits under one context allocates nothing. Its fields are guarded by
// the lock of the condition it wakes.
type callerWake struct {
	ctx  context.Context
	stop func() bool
}

// watch makes sure cond is broadcast (under its lock) when ctx ends. Call
// it with cond's lock held, after checking ctx.Err() and before waiting:
// the broadcast takes the lock, so it cannot fall between the check and
// the wait.
func (w *callerWake) watch(ctx context.Context, cond *sync.Cond) {
	if ctx == w.ctx || ctx.Done() == nil {
		return
	}
	w.release()
	w.ctx = ctx
	w.stop = context.AfterFunc(ctx, func() {
		cond.L.Lock()
		cond.Broadcast()
		cond.L.Unlock()
	})
}

// release drops the registration. Call it with the lock held, or once no
// one waits any more.
func (w *callerWake) release() {
	if w.stop != nil {
		w.stop()
	}
	w.ctx, w.stop = nil, nil
}
