package data

import (
	"context"
	"fmt"
	"io"

	"github.com/headroom-ml/headroom/tensor"
)

// Batches stacks n consecutive samples into one Batch (tf.data's batch):
// X [k, x...] and Y [k, y...] with k = n, except that the last batch holds
// what is left (k < n) unless dropRemainder drops it. Every sample must have
// the shapes and dtypes of the first (tf.data's rule without padding). The
// batch's memory comes from the arena, charged to this stage; each sample is
// released as soon as it is copied. It panics if n < 1.
func Batches(d Dataset[Sample], n int, dropRemainder bool) Dataset[Batch] {
	if n < 1 {
		panic(fmt.Sprintf("data: Batches(%d): want n >= 1", n))
	}
	name := fmt.Sprintf("batch(%d)", n)
	return newDataset(name, kindSync, func(p *pipeline, st *stage) (iterator[Batch], error) {
		up, ust, err := d.openIn(p)
		if err != nil {
			return nil, err
		}
		st.up = ust
		return &batchIter{up: up, pool: p.arena.pool(name), n: n, drop: dropRemainder}, nil
	})
}

type batchIter struct {
	up       iterator[Sample]
	pool     *pool
	n        int
	drop     bool
	x, y     spec
	set      bool
	elements int64
}

// spec is the dtype and shape every sample of a batch must share.
type spec struct {
	dtype tensor.DType
	shape tensor.Shape
	bytes int
}

func specOf(t tensor.Tensor) spec {
	return spec{dtype: t.DType(), shape: t.Shape().Clone(), bytes: len(t.Bytes())}
}

func (s spec) matches(t tensor.Tensor) bool {
	return t.DType() == s.dtype && t.Shape().Equal(s.shape)
}

func (b *batchIter) next(ctx context.Context) (Batch, error) {
	first, err := b.up.next(ctx)
	if err != nil {
		return Batch{}, err
	}
	if !b.set {
		b.x, b.y, b.set = specOf(first.X), specOf(first.Y), true
	}
	xb, err := b.pool.get(ctx, b.n*b.x.bytes)
	if err != nil {
		first.Release()
		return Batch{}, err
	}
	var yb *Block
	if b.y.dtype.Valid() {
		if yb, err = b.pool.get(ctx, b.n*b.y.bytes); err != nil {
			first.Release()
			xb.Release()
			return Batch{}, err
		}
	}
	fail := func(err error) (Batch, error) {
		xb.Release()
		yb.Release()
		return Batch{}, err
	}
	k := 0
	for s := first; ; {
		if !b.x.matches(s.X) || (s.Y.DType().Valid() || b.y.dtype.Valid()) && !b.y.matches(s.Y) {
			err := fmt.Errorf("data: batch: element %d has X %v and Y %v, the batch has X %v%v and Y %v%v",
				b.elements, s.X, s.Y, b.x.dtype, b.x.shape, b.y.dtype, b.y.shape)
			s.Release()
			return fail(err)
		}
		copy(xb.Bytes()[k*b.x.bytes:], s.X.Bytes())
		if yb != nil {
			copy(yb.Bytes()[k*b.y.bytes:], s.Y.Bytes())
		}
		s.Release()
		k++
		b.elements++
		if k == b.n {
			break
		}
		if s, err = b.up.next(ctx); err == io.EOF {
			break
		} else if err != nil {
			return fail(err)
		}
	}
	if k < b.n && b.drop {
		return fail(io.EOF)
	}
	out := Batch{Size: k, mem: [2]*Block{xb, yb}}
	if out.X, err = tensor.FromBytes(b.x.dtype, append(tensor.Shape{k}, b.x.shape...), xb.Bytes()[:k*b.x.bytes]); err != nil {
		return fail(err)
	}
	if yb != nil {
		if out.Y, err = tensor.FromBytes(b.y.dtype, append(tensor.Shape{k}, b.y.shape...), yb.Bytes()[:k*b.y.bytes]); err != nil {
			return fail(err)
		}
	}
	return out, nil
}

func (b *batchIter) close() { b.up.close() }
