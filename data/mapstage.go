package data

import (
	"context"
	"fmt"
)

// MapOption configures Map.
type MapOption func(*mapConfig)

type mapConfig struct {
	workers   int
	unordered bool
}

// Parallel runs the function on n workers (goroutines), or on as many as
// Autotune finds useful. The default is 1: the function runs in the
// consumer's goroutine, as tf.data's map without num_parallel_calls.
func Parallel(n int) MapOption {
	if n < 1 && n != Autotune {
		panic(fmt.Sprintf("data: Parallel(%d): want n >= 1 or Autotune", n))
	}
	return func(c *mapConfig) { c.workers = n }
}

// Unordered lets a parallel Map yield results as they complete instead of
// in input order (tf.data's deterministic=False): faster when the
// function's time varies, at the cost of a run-to-run order.
func Unordered() MapOption { return func(c *mapConfig) { c.unordered = true } }

// MaxMapWorkers bounds Map's Autotune parallelism.
const MaxMapWorkers = 64

// Map applies fn to every element. fn owns its input only for the call:
// Map releases the input when fn returns, so an output that views the
// input's memory must hold a reference of its own (NewSample(x, y,
// rec.Block()) does). Memory fn needs for its output comes from Alloc or
// NewTensor with the ctx it is given, which charges it to this stage under
// the pipeline budget and waits (backpressure) when the budget is full.
//
// A *FormatError from fn ends the pass, or skips the element under the Skip
// policy. name names the stage: "map(name)".
//
// With Parallel(Autotune) Map starts with one worker and adds one whenever,
// over a window of at least 10 ms, its consumer waited more than 5% of the
// time while the workers were busy (not starved by the input) and the
// budget holds what the larger number of workers keeps in flight (two chunks
// each) beside the rest of the pipeline and its reserve. An increase that
// does not raise throughput by 2% over the next two windows is taken back
// and the tuner rests for five. It stops at MaxMapWorkers.
func Map[T, U any](d Dataset[T], name string, fn func(ctx context.Context, x T) (U, error), opts ...MapOption) Dataset[U] {
	cfg := mapConfig{workers: 1}
	for _, o := range opts {
		o(&cfg)
	}
	kind := kindSync
	if cfg.workers != 1 {
		kind = kindMap
	}
	sname := "map(" + name + ")"
	return newDataset(sname, kind, func(p *pipeline, st *stage) (iterator[U], error) {
		up, ust, err := d.openIn(p)
		if err != nil {
			return nil, err
		}
		st.up = ust
		if cfg.workers == 1 {
			return &mapSeq[T, U]{p: p, st: st, up: up, fn: fn, fctx: withPool(p.ctx, p.arena.pool(sname)), in: opsOf[T]()}, nil
		}
		return startMap(p, st, up, fn, sname, cfg), nil
	})
}

type mapSeq[T, U any] struct {
	p    *pipeline
	st   *stage
	up   iterator[T]
	fn   func(context.Context, T) (U, error)
	fctx context.Context
	in   elemOps[T]
}

func (m *mapSeq[T, U]) next(ctx context.Context) (U, error) {
	for {
		x, err := m.up.next(ctx)
		if err != nil {
			var zero U
			return zero, err
		}
		y, err := m.fn(m.fctx, x)
		m.in.release(x)
		if err != nil && m.p.skip(m.st, err) {
			continue
		}
		return y, err
	}
}

func (m *mapSeq[T, U]) close() { m.up.close() }
