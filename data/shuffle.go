package data

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"unsafe"

	"github.com/headroom-ml/headroom/mem"
)

// Shuffle yields the elements in a random order drawn from a buffer of up
// to buffer elements, as tf.data's shuffle: it fills the buffer, then
// repeatedly yields a uniformly chosen element and refills its slot from the
// input. buffer >= the dataset's size gives a uniform permutation.
//
// The order depends only on seed and the input order: the same seed gives
// the same order on every pass. Each repetition under Repeat (reopening) uses
// the next order of the same seeded sequence, as tf.data's
// reshuffle_each_iteration=True.
//
// Unlike tf.data, the buffer never holds more than half the pipeline budget
// (its elements' bytes and its slots): a buffer that would is cut at that
// size and Stats reports the size it reached (Buffered). It panics if
// buffer < 1.
func (d Dataset[T]) Shuffle(buffer int, seed uint64) Dataset[T] {
	if buffer < 1 {
		panic(fmt.Sprintf("data: Shuffle(%d): the buffer needs at least one element", buffer))
	}
	n := &node{name: fmt.Sprintf("shuffle(%d)", buffer), kind: kindSync}
	return Dataset[T]{n: n, open: func(p *pipeline, st *stage) (iterator[T], error) {
		epoch := p.epoch(n)
		up, ust, err := d.openIn(p)
		if err != nil {
			return nil, err
		}
		st.up = ust
		return &shuffleIter[T]{
			up: up, p: p, st: st, name: n.name, size: buffer,
			limit: p.arena.budget / 2, slot: int64(unsafe.Sizeof(*new(T))),
			rng: rand.New(rand.NewPCG(seed, uint64(epoch))),
			ops: opsOf[T](),
		}, nil
	}}
}

type shuffleIter[T any] struct {
	up    iterator[T]
	p     *pipeline
	st    *stage
	name  string
	slots int64 // bytes of buf's backing array, charged
	slot  int64 // bytes of one slot
	size  int
	limit int64 // most element bytes the buffer may hold
	held  int64 // element bytes in the buffer
	last  int64 // bytes of the last element read
	buf   []T
	eof   bool
	rng   *rand.Rand
	ops   elemOps[T]
}

func (s *shuffleIter[T]) next(ctx context.Context) (T, error) {
	var zero T
	for !s.eof && len(s.buf) < s.size && (len(s.buf) == 0 || s.limit <= 0 || s.held+s.last+s.slots <= s.limit) {
		if len(s.buf) == cap(s.buf) && !s.grow() {
			if len(s.buf) > 0 {
				break
			}
			return zero, fmt.Errorf("data: %s: no room for one element", s.name)
		}
		x, err := s.up.next(ctx)
		if err == io.EOF {
			s.eof = true
			break
		}
		if err != nil {
			return zero, err
		}
		s.last = s.ops.held(x)
		s.held += s.last
		s.buf = append(s.buf, x)
	}
	s.st.buffered.Store(int64(len(s.buf)))
	if len(s.buf) == 0 {
		return zero, io.EOF
	}
	i := s.rng.IntN(len(s.buf))
	x := s.buf[i]
	last := len(s.buf) - 1
	s.buf[i] = s.buf[last]
	s.buf[last] = zero
	s.buf = s.buf[:last]
	s.held -= s.ops.held(x)
	return x, nil
}

// grow enlarges the buffer's backing array, charging it; false when the
// budget has no room (the buffer then stays at its size).
func (s *shuffleIter[T]) grow() bool {
	c := min(s.size, max(64, 2*cap(s.buf)))
	more := int64(c)*s.slot - s.slots
	if s.limit > 0 && s.held+s.slots+more > s.limit && len(s.buf) > 0 {
		return false
	}
	if s.p.ledger.Charge(mem.Input, s.name, more) != nil {
		return false
	}
	s.slots += more
	s.buf = append(make([]T, 0, c), s.buf...)
	return true
}

func (s *shuffleIter[T]) close() {
	for i := range s.buf {
		s.ops.release(s.buf[i])
	}
	s.buf = nil
	s.up.close()
	if s.slots > 0 {
		s.p.ledger.Release(mem.Input, s.name, s.slots)
	}
}
