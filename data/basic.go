package data

import (
	"context"
	"fmt"
	"io"
)

// FromSlice returns a dataset of the elements of xs, in order, without
// copying them (tf.data's from_tensor_slices over a Go slice). The slice must
// not change while a pass reads it.
func FromSlice[T any](xs []T) Dataset[T] {
	return newDataset(fmt.Sprintf("slice(%d)", len(xs)), kindSource, func(p *pipeline, st *stage) (iterator[T], error) {
		return &sliceIter[T]{xs: xs}, nil
	})
}

type sliceIter[T any] struct {
	xs []T
	i  int
}

func (s *sliceIter[T]) next(ctx context.Context) (T, error) {
	if s.i >= len(s.xs) {
		var zero T
		return zero, io.EOF
	}
	s.i++
	return s.xs[s.i-1], nil
}

func (s *sliceIter[T]) close() {}

// Filter keeps the elements for which keep returns true and releases the
// others.
func (d Dataset[T]) Filter(keep func(T) bool) Dataset[T] {
	return newDataset("filter", kindSync, func(p *pipeline, st *stage) (iterator[T], error) {
		up, ust, err := d.openIn(p)
		if err != nil {
			return nil, err
		}
		st.up = ust
		return &filterIter[T]{up: up, keep: keep, ops: opsOf[T]()}, nil
	})
}

type filterIter[T any] struct {
	up   iterator[T]
	keep func(T) bool
	ops  elemOps[T]
}

func (f *filterIter[T]) next(ctx context.Context) (T, error) {
	for {
		x, err := f.up.next(ctx)
		if err != nil || f.keep(x) {
			return x, err
		}
		f.ops.release(x)
	}
}

func (f *filterIter[T]) close() { f.up.close() }

// Take yields at most the first n elements (all of them when n < 0).
func (d Dataset[T]) Take(n int) Dataset[T] {
	return d.window(fmt.Sprintf("take(%d)", n), 0, n, 1, 0)
}

// Skip drops the first n elements (all of them when n < 0).
func (d Dataset[T]) Skip(n int) Dataset[T] {
	if n < 0 {
		return d.window(fmt.Sprintf("skip(%d)", n), 0, 0, 1, 0)
	}
	return d.window(fmt.Sprintf("skip(%d)", n), n, -1, 1, 0)
}

// Shard keeps every n-th element starting at index i (elements i, i+n,
// i+2n, ...), so that Shard(n, 0) ... Shard(n, n-1) partition the dataset, as
// tf.data's shard. Put it right after the source, before Shuffle, so every
// worker sees a disjoint part. It panics unless 0 <= i < n.
func (d Dataset[T]) Shard(n, i int) Dataset[T] {
	if n <= 0 || i < 0 || i >= n {
		panic(fmt.Sprintf("data: Shard(%d, %d): want 0 <= index < count", n, i))
	}
	return d.window(fmt.Sprintf("shard(%d,%d)", n, i), 0, -1, n, i)
}

// window keeps element k (counting from 0) when k >= skip, fewer than take
// have been kept (take < 0: no limit) and k%stride == phase.
func (d Dataset[T]) window(name string, skip, take, stride, phase int) Dataset[T] {
	return newDataset(name, kindSync, func(p *pipeline, st *stage) (iterator[T], error) {
		up, ust, err := d.openIn(p)
		if err != nil {
			return nil, err
		}
		st.up = ust
		return &windowIter[T]{up: up, skip: skip, take: take, stride: stride, phase: phase, ops: opsOf[T]()}, nil
	})
}

type windowIter[T any] struct {
	up                        iterator[T]
	skip, take, stride, phase int
	k, kept                   int
	ops                       elemOps[T]
}

func (w *windowIter[T]) next(ctx context.Context) (T, error) {
	var zero T
	for {
		if w.take >= 0 && w.kept >= w.take {
			return zero, io.EOF
		}
		x, err := w.up.next(ctx)
		if err != nil {
			return x, err
		}
		k := w.k
		w.k++
		if k < w.skip || k%w.stride != w.phase {
			w.ops.release(x)
			continue
		}
		w.kept++
		return x, nil
	}
}

func (w *windowIter[T]) close() { w.up.close() }

// Repeat yields the dataset count times (forever when count < 0), reopening
// it for each repetition, so that a Shuffle before it reshuffles each time.
// A repetition that yields nothing ends the dataset.
func (d Dataset[T]) Repeat(count int) Dataset[T] {
	return newDataset(fmt.Sprintf("repeat(%d)", count), kindSync, func(p *pipeline, st *stage) (iterator[T], error) {
		r := &repeatIter[T]{d: d, p: p, st: st, count: count}
		if count == 0 {
			return r, nil
		}
		up, ust, err := d.openIn(p)
		if err != nil {
			return nil, err
		}
		st.up, r.up, r.done = ust, up, 1
		return r, nil
	})
}

type repeatIter[T any] struct {
	d     Dataset[T]
	p     *pipeline
	st    *stage
	up    iterator[T]
	count int
	done  int // repetitions opened
	n     int // elements in the current repetition
}

func (r *repeatIter[T]) next(ctx context.Context) (T, error) {
	var zero T
	for r.up != nil {
		x, err := r.up.next(ctx)
		if err != io.EOF {
			if err == nil {
				r.n++
			}
			return x, err
		}
		r.up.close()
		r.up = nil
		if r.n == 0 || (r.count >= 0 && r.done >= r.count) {
			break
		}
		up, _, err := r.d.openIn(r.p)
		if err != nil {
			return zero, err
		}
		r.up, r.n = up, 0
		r.done++
	}
	return zero, io.EOF
}

func (r *repeatIter[T]) close() {
	if r.up != nil {
		r.up.close()
		r.up = nil
	}
}

// Generate returns a dataset of generated elements: each pass calls start
// for a fresh generator, whose calls return the pass's elements in order
// and io.EOF after the last. Tensors the generator makes with NewTensor
// (with the ctx it is given) come from the pipeline's arena, under its
// budget. A generator that depends only on its own seed makes every pass
// the same sequence.
func Generate[T any](name string, start func() func(ctx context.Context) (T, error)) Dataset[T] {
	return newDataset(name, kindSource, func(p *pipeline, st *stage) (iterator[T], error) {
		return &genIter[T]{gen: start(), pool: p.arena.pool(name)}, nil
	})
}

type genIter[T any] struct {
	gen  func(ctx context.Context) (T, error)
	pool *pool
}

func (g *genIter[T]) next(ctx context.Context) (T, error) { return g.gen(withPool(ctx, g.pool)) }

func (g *genIter[T]) close() {}
