package data

import (
	"context"
	"fmt"
	"io"
)

// Interleave maps every element of d to a dataset with open (typically one
// file each) and mixes their elements as tf.data's interleave: it keeps
// cycle inner datasets open, takes block elements from each in turn, and
// replaces an exhausted one with the next element of d. With Parallel(n),
// n != 1, each inner dataset reads ahead in its own goroutine (a Prefetch of
// max(block, 2) elements). It panics unless cycle >= 1 and block >= 1.
func Interleave[T, U any](d Dataset[T], open func(T) Dataset[U], cycle, block int, opts ...MapOption) Dataset[U] {
	if cycle < 1 || block < 1 {
		panic(fmt.Sprintf("data: Interleave(cycle %d, block %d): want both >= 1", cycle, block))
	}
	cfg := mapConfig{workers: 1}
	for _, o := range opts {
		o(&cfg)
	}
	n := &node{name: fmt.Sprintf("interleave(%d,%d)", cycle, block), kind: kindSource}
	return Dataset[U]{n: n, open: func(p *pipeline, st *stage) (iterator[U], error) {
		up, ust, err := d.openIn(p)
		if err != nil {
			return nil, err
		}
		st.up = ust
		return &interleaveIter[T, U]{
			p: &pipeline{pass: p.pass, scope: n}, up: up, open: open,
			slots: make([]iterator[U], 0, cycle), cycle: cycle, block: block,
			parallel: cfg.workers != 1, in: opsOf[T](),
		}, nil
	}}
}

type interleaveIter[T, U any] struct {
	p        *pipeline
	up       iterator[T]
	open     func(T) Dataset[U]
	slots    []iterator[U]
	cycle    int
	block    int
	parallel bool
	in       elemOps[T]
	upDone   bool
	cur      int // slot being read
	taken    int // elements taken from it in this turn
}

// fill opens inner datasets until cycle are open or d is exhausted.
func (it *interleaveIter[T, U]) fill(ctx context.Context) error {
	for len(it.slots) < it.cycle && !it.upDone {
		x, err := it.up.next(ctx)
		if err == io.EOF {
			it.upDone = true
			break
		}
		if err != nil {
			return err
		}
		ds := it.open(x)
		it.in.release(x)
		if it.parallel {
			ds = ds.Prefetch(max(it.block, 2))
		}
		inner, _, err := ds.openIn(it.p)
		if err != nil {
			return err
		}
		it.slots = append(it.slots, inner)
	}
	return nil
}

func (it *interleaveIter[T, U]) next(ctx context.Context) (U, error) {
	var zero U
	for {
		if err := it.fill(ctx); err != nil {
			return zero, err
		}
		if len(it.slots) == 0 {
			return zero, io.EOF
		}
		if it.cur >= len(it.slots) {
			it.cur = 0
		}
		y, err := it.slots[it.cur].next(ctx)
		if err == nil {
			it.taken++
			if it.taken >= it.block {
				it.cur, it.taken = it.cur+1, 0
			}
			return y, nil
		}
		if err != io.EOF {
			return zero, err
		}
		// exhausted: close it; the next input takes its place in the cycle
		it.slots[it.cur].close()
		it.slots = append(it.slots[:it.cur], it.slots[it.cur+1:]...)
		it.taken = 0
		if len(it.slots) < it.cycle && !it.upDone {
			if err := it.fill(ctx); err != nil {
				return zero, err
			}
			if n := len(it.slots); n > 0 && it.cur < n-1 {
				// move the newcomer into the exhausted one's turn
				last := it.slots[n-1]
				copy(it.slots[it.cur+1:], it.slots[it.cur:n-1])
				it.slots[it.cur] = last
			}
		}
	}
}

func (it *interleaveIter[T, U]) close() {
	for _, s := range it.slots {
		s.close()
	}
	it.slots = nil
	it.up.close()
}
