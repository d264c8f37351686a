package train

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/tensor"
)

// FitStream trains on batches streamed from an input pipeline (package
// data), for cfg.Epochs passes over ds: the data never has to fit in
// memory. Each epoch opens a new pass (shuffling, if any, is the
// pipeline's: data.Shuffle with a seed gives the same order every run).
// A pass must yield batches of cfg.Batch examples and at most one smaller
// last batch; its features are converted to the model's input dtype and
// its labels to the loss's.
//
// The pipeline's buffers are charged to a sub-ledger of the trainer's
// ledger (dcfg.Ledger is set to it) under dcfg.Budget, so the run's
// measured peak is at most Trainer.Planned plus that budget. Build the
// trainer with New(cfg, nil) to plan for a stream (no data set in memory).
func (t *Trainer) FitStream(ctx context.Context, ds data.Dataset[data.Batch], dcfg data.Config) (*History, error) {
	dcfg.Ledger = t.engine.HostLedger()
	if dcfg.Budget <= 0 {
		dcfg.Budget = t.cfg.InputBudget
	}
	if dcfg.Name == "" {
		dcfg.Name = "input pipeline"
	}
	r, err := t.begin()
	if err != nil {
		return nil, err
	}
	if r.h.Done { // resumed at the end of the run: nothing to do
		return r.finish(), nil
	}
	src := &streamSource{}
	for ep := r.h.StartEpoch; ep < t.cfg.Epochs && !t.stop; ep++ {
		e := r.epochBegin(ep)
		skip := e.batch
		it, err := ds.Iter(ctx, dcfg)
		if err != nil {
			return r.h, fmt.Errorf("train: epoch %d: opening %s: %w", ep+1, ds.Name(), err)
		}
		err = func() error {
			defer it.Close()
			last := false
			for !r.done() {
				b, err := it.Next()
				if err != nil {
					if isEnd(err) {
						return nil
					}
					return fmt.Errorf("train: epoch %d: %w", ep+1, err)
				}
				if last || b.Size > t.cfg.Batch || b.Size <= 0 {
					return fmt.Errorf("train: epoch %d: a batch of %d examples after a smaller one, or larger than the batch size %d", ep+1, b.Size, t.cfg.Batch)
				}
				last = b.Size < t.cfg.Batch
				if skip > 0 { // a resumed epoch: these batches were trained before the checkpoint
					skip--
					continue
				}
				src.b = b
				if err := r.update(e, b.Size, 0, src); err != nil {
					return err
				}
				if err := r.afterStep(e, false); err != nil {
					return err
				}
			}
			return nil
		}()
		if err != nil {
			return r.h, err
		}
		if err := r.epochEnd(e, !r.done()); err != nil {
			return r.h, err
		}
	}
	return r.finish(), nil
}

// streamSource feeds rows of a pipeline batch.
type streamSource struct {
	b    data.Batch
	base int // the first row of the last fill
}

func (s *streamSource) fill(pr *program, lo, hi int) {
	copyRows(pr.in.x, s.b.X, lo, hi)
	copyRows(pr.in.y, s.b.Y, lo, hi)
	s.base = lo
}

// label reads the pipeline's label: a class index, or the argmax of a
// one-hot row.
func (s *streamSource) label(r int) int {
	y := s.b.Y
	w := y.Len() / max(1, y.Shape()[0])
	row := s.base + r
	if w == 1 {
		return int(y.Float64At(row))
	}
	best := 0
	for k := 1; k < w; k++ {
		if y.Float64At(row*w+k) > y.Float64At(row*w+best) {
			best = k
		}
	}
	return best
}

// copyRows copies rows [lo, hi) of src (batch first) into dst, converting
// elements to dst's dtype.
func copyRows(dst, src tensor.Tensor, lo, hi int) {
	n := hi - lo
	if n == 0 || dst.Len() == 0 {
		return
	}
	per := src.Len() / max(1, src.Shape()[0])
	if src.DType() == dst.DType() {
		sz := dst.DType().Size()
		copy(dst.Bytes(), src.Bytes()[lo*per*sz:hi*per*sz])
		return
	}
	for i := 0; i < n*per; i++ {
		dst.SetFloat64At(i, src.Float64At(lo*per+i))
	}
}

func isEnd(err error) bool { return errors.Is(err, io.EOF) }
