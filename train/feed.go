package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/tensor"
)

// A feed hands Fit the batches of each epoch, whatever the data is:
// examples in memory (examplesFeed), an input pipeline (pipelineFeed:
// augmentation, a streamed data set, the user's dataset of batches) or
// text windows (textFeed). Fit's loop is the same for all of them.
type feed interface {
	// epoch opens epoch ep (counted from 0), from batch skip on (a
	// resumed epoch's batches before the checkpoint are passed over).
	epoch(ctx context.Context, ep, skip int) (epochFeed, error)
	// batches returns the batches of an epoch (0: unknown).
	batches() int
}

// epochFeed is one epoch's batches.
type epochFeed interface {
	// next returns the next batch (what fills the step's inputs) and its
	// size, or io.EOF after the last. step is the optimizer step it will
	// make, counted from 1 (text draws its windows from it).
	next(step int64) (batchSource, int, error)
	close()
}

// batchSource fills a step program's inputs with examples [lo, hi) of the
// batch being trained on.
type batchSource interface {
	// fill feeds examples [lo, hi) of the batch; label then gives the class
	// label of row r of what it fed.
	fill(pr *program, lo, hi int)
	labeler
}

// examplesFeed feeds examples held in memory, in a fresh order each epoch
// drawn from (seed, epoch).
type examplesFeed struct {
	data   *data.Examples
	labels data.LabelMode
	batch  int
	seed   uint64
	perm   []int
	src    examplesSource
	at     int
}

func newExamplesFeed(d *data.Examples, labels data.LabelMode, batch int, seed uint64) *examplesFeed {
	f := &examplesFeed{data: d, labels: labels, batch: batch, seed: seed, perm: make([]int, d.N)}
	f.src = examplesSource{data: d, labels: labels}
	return f
}

func (f *examplesFeed) batches() int { return (f.data.N + f.batch - 1) / f.batch }

func (f *examplesFeed) epoch(_ context.Context, ep, skip int) (epochFeed, error) {
	shuffle(f.perm, f.seed, ep)
	f.at = skip * f.batch
	return f, nil
}

func (f *examplesFeed) next(int64) (batchSource, int, error) {
	if f.at >= f.data.N {
		return nil, 0, io.EOF
	}
	f.src.idx = f.perm[f.at:min(f.at+f.batch, f.data.N)]
	f.at += f.batch
	return &f.src, len(f.src.idx), nil
}

func (f *examplesFeed) close() {}

// shuffle sets perm to the permutation of epoch ep under seed (Fisher-Yates
// over the identity): a pure function of (seed, ep, len(perm)).
func shuffle(perm []int, seed uint64, ep int) {
	for i := range perm {
		perm[i] = i
	}
	rng := rand.New(rand.NewPCG(seed, uint64(ep)+0x5eed))
	rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
}

// examplesSource feeds the examples idx of an in-memory data set.
type examplesSource struct {
	data   *data.Examples
	labels data.LabelMode
	idx    []int
	base   int // the first row of the last fill
}

func (s *examplesSource) fill(pr *program, lo, hi int) {
	s.data.Fill(pr.in.x, s.idx[lo:hi])
	s.data.FillLabels(pr.in.y, s.idx[lo:hi], s.labels)
	s.base = lo
}

func (s *examplesSource) label(r int) int { return int(s.data.Labels[s.idx[s.base+r]]) }

// pipelineFeed feeds batches from an input pipeline: one pass of ds per
// epoch, its buffers charged to the pipeline's ledger under its budget
// (a reservation the plan holds). before, when set, runs before each
// epoch's pass (the augmentation draws the epoch's order).
type pipelineFeed struct {
	ds      data.Dataset[data.Batch]
	dcfg    data.Config
	batch   int
	n       int // examples per epoch (0: unknown)
	before  func(ep int)
	it      *data.Iterator[data.Batch]
	ep      int
	last    bool // a smaller batch was seen
	src     streamSource
	skipped int
}

func (f *pipelineFeed) batches() int {
	if f.n <= 0 {
		return 0
	}
	return (f.n + f.batch - 1) / f.batch
}

func (f *pipelineFeed) epoch(ctx context.Context, ep, skip int) (epochFeed, error) {
	if f.before != nil {
		f.before(ep)
	}
	it, err := f.ds.Iter(ctx, f.dcfg)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", f.ds.Name(), err)
	}
	f.it, f.ep, f.last = it, ep, false
	for ; skip > 0; skip-- { // a resumed epoch: these batches were trained before the checkpoint
		if _, _, err := f.next(0); err != nil {
			it.Close()
			return nil, err
		}
	}
	return f, nil
}

func (f *pipelineFeed) next(int64) (batchSource, int, error) {
	b, err := f.it.Next()
	if errors.Is(err, io.EOF) {
		return nil, 0, io.EOF
	}
	if err != nil {
		return nil, 0, err
	}
	if f.last || b.Size > f.batch || b.Size <= 0 {
		return nil, 0, fmt.Errorf("a batch of %d examples after a smaller one, or larger than the batch size %d", b.Size, f.batch)
	}
	f.last = b.Size < f.batch
	f.src.b = b
	return &f.src, b.Size, nil
}

func (f *pipelineFeed) close() {
	if f.it != nil {
		f.it.Close()
		f.it = nil
	}
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

// textFeed feeds batches of windows of text: batch s (counted from 1) is
// the windows data.Windows.RandomOffsets draws for (seed, s), a function
// of the seed and the step, so a resumed run draws what the uninterrupted
// one would. An epoch is Text.StepsPerEpoch updates.
type textFeed struct {
	src   windowSource
	count int
	done  int
}

func (f *textFeed) batches() int { return f.count }

func (f *textFeed) epoch(_ context.Context, _, skip int) (epochFeed, error) {
	f.done = skip
	return f, nil
}

func (f *textFeed) next(step int64) (batchSource, int, error) {
	if f.done >= f.count {
		return nil, 0, io.EOF
	}
	if _, err := f.src.w.RandomOffsets(f.src.offsets, f.src.seed, uint64(step)); err != nil {
		return nil, 0, err
	}
	f.done++
	return &f.src, len(f.src.offsets), nil
}

func (f *textFeed) close() {}

// windowSource feeds the windows at offsets: x[t] = text[o+t] and y[t] =
// text[o+t+1].
type windowSource struct {
	text    []byte
	t       int
	w       *data.Windows
	seed    uint64
	offsets []int
}

func (s *windowSource) fill(pr *program, lo, hi int) {
	x, y := pr.in.x.Int32s(), pr.in.y.Int32s()
	for i, o := range s.offsets[lo:hi] {
		src := s.text[o : o+s.t+1]
		xi, yi := x[i*s.t:(i+1)*s.t], y[i*s.t:(i+1)*s.t]
		for j := range xi {
			xi[j] = int32(src[j])
			yi[j] = int32(src[j+1])
		}
	}
}

func (s *windowSource) label(int) int { return -1 } // no accuracy for a language model
