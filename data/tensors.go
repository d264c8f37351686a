package data

import (
	"context"
	"fmt"
	"io"

	"github.com/headroom-ml/headroom/tensor"
)

// FromTensors returns a dataset of the slices of x (and y) along their first
// axis: sample i has X = x[i] and Y = y[i], views into x's and y's memory,
// never copies (tf.data's from_tensor_slices). y may be the zero Tensor (no
// target); otherwise x and y must have the same first dimension. The tensors
// must not change while a pass reads them; their memory is the caller's and
// is not charged to the pipeline.
func FromTensors(x, y tensor.Tensor) (Dataset[Sample], error) {
	if x.Shape().Rank() == 0 {
		return Dataset[Sample]{}, fmt.Errorf("data: FromTensors: x %v has no axis to slice", x)
	}
	n := x.Shape()[0]
	if y.DType().Valid() && (y.Shape().Rank() == 0 || y.Shape()[0] != n) {
		return Dataset[Sample]{}, fmt.Errorf("data: FromTensors: x %v and y %v differ in their first dimension", x, y)
	}
	return newDataset(fmt.Sprintf("tensors(%d)", n), kindSource, func(p *pipeline, st *stage) (iterator[Sample], error) {
		return &tensorIter{x: x, y: y, n: n}, nil
	}), nil
}

type tensorIter struct {
	x, y tensor.Tensor
	n, i int
}

// row returns t[i] as a view.
func row(t tensor.Tensor, i, n int) tensor.Tensor {
	b := t.Bytes()
	w := len(b) / n
	r, err := tensor.FromBytes(t.DType(), t.Shape()[1:], b[i*w:(i+1)*w:(i+1)*w])
	if err != nil {
		panic(err) // unreachable: the shape was checked at construction
	}
	return r
}

func (t *tensorIter) next(ctx context.Context) (Sample, error) {
	if t.i >= t.n {
		return Sample{}, io.EOF
	}
	s := Sample{X: row(t.x, t.i, t.n)}
	if t.y.DType().Valid() {
		s.Y = row(t.y, t.i, t.n)
	}
	t.i++
	return s, nil
}

func (t *tensorIter) close() {}
