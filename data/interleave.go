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
			slots: make([]iterator[U], cycle), cycle: cycle, block: block,
			parallel: cfg.workers != 1, in: opsOf[T](),
		}, nil
	}}
}

type interleaveIter[T, U any] struct {
	p        *pipeline
	up       iterator[T]
	open     func(T) Dataset[U]
	slots    []iterator[U] // nil: empty
	cycle    int
	block    int
	parallel bool
	in       elemOps[T]
	upDone   bool
	cur      int // slot whose turn it is
	taken    int // elements taken from it in this turn
}

// openNext opens the inner dataset of d's next element (nil at its end).
func (it *interleaveIter[T, U]) openNext(ctx context.Context) (iterator[U], error) {
	if it.upDone {
		return nil, nil
	}
	x, err := it.up.next(ctx)
	if err == io.EOF {
		it.upDone = true
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ds := it.open(x)
	it.in.release(x)
	if it.parallel {
		ds = ds.Prefetch(max(it.block, 2))
	}
	inner, _, err := ds.openIn(it.p)
	return inner, err
}

// next follows tf.data's order: block elements from each slot in turn; an
// exhausted slot passes its turn and takes the next input when its turn
// comes again.
func (it *interleaveIter[T, U]) next(ctx context.Context) (U, error) {
	var zero U
	for idle := 0; idle <= it.cycle; {
		if it.slots[it.cur] == nil {
			inner, err := it.openNext(ctx)
			if err != nil {
				return zero, err
			}
			if inner == nil {
				it.cur, it.taken = (it.cur+1)%it.cycle, 0
				idle++
				continue
			}
			it.slots[it.cur] = inner
		}
		idle = 0
		y, err := it.slots[it.cur].next(ctx)
		if err == nil {
			if it.taken++; it.taken >= it.block {
				it.cur, it.taken = (it.cur+1)%it.cycle, 0
			}
			return y, nil
		}
		if err != io.EOF {
			return zero, err
		}
		it.slots[it.cur].close()
		it.slots[it.cur] = nil
		if !it.upDone {
			if it.slots[it.cur], err = it.openNext(ctx); err != nil {
				return zero, err
			}
		}
		it.cur, it.taken = (it.cur+1)%it.cycle, 0
	}
	return zero, io.EOF
}

func (it *interleaveIter[T, U]) close() {
	for i, s := range it.slots {
		if s != nil {
			s.close()
			it.slots[i] = nil
		}
	}
	it.up.close()
}
