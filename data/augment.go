package data

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/headroom-ml/headroom/tensor"
)

// Augmentation is random image augmentation applied as a pipeline map to
// images [H, W, C], in training only, each draw a function of (Seed,
// epoch, example):
//   - Flip mirrors half the images left to right (Keras'
//     RandomFlip("horizontal")).
//   - Crop pads the image with zeros by 1/8 of its height and width on
//     each side and crops a window of the original size at a random place:
//     a random translation by up to 1/8 (the CIFAR recipe of He et al.,
//     "Deep Residual Learning for Image Recognition", 2016, section 4.2;
//     Keras' RandomTranslation with fill_mode="constant").
type Augmentation struct {
	Flip, Crop bool
	Seed       uint64
}

// Apply augments x, one image [H, W, C] (float32 values), in place, with
// the draws of example index in epoch; scratch must hold len(x) values.
// It does not allocate.
func (a *Augmentation) Apply(x, scratch []float32, shape tensor.Shape, epoch, index int) {
	h, w, c := shape[0], shape[1], shape[2]
	rng := rand.New(rand.NewPCG(a.Seed^0xa06e, uint64(epoch)<<32|uint64(uint32(index))))
	if a.Flip && rng.IntN(2) == 1 {
		for y := 0; y < h; y++ {
			row := x[y*w*c : (y+1)*w*c]
			for l, r := 0, w-1; l < r; l, r = l+1, r-1 {
				for k := 0; k < c; k++ {
					row[l*c+k], row[r*c+k] = row[r*c+k], row[l*c+k]
				}
			}
		}
	}
	if a.Crop {
		py, px := h/8, w/8
		dy, dx := rng.IntN(2*py+1)-py, rng.IntN(2*px+1)-px // the window's offset
		if dy == 0 && dx == 0 {
			return
		}
		copy(scratch, x)
		for y := 0; y < h; y++ {
			sy := y + dy
			for xx := 0; xx < w; xx++ {
				sx := xx + dx
				dst := x[(y*w+xx)*c : (y*w+xx+1)*c]
				if sy < 0 || sy >= h || sx < 0 || sx >= w {
					clear(dst)
					continue
				}
				copy(dst, scratch[(sy*w+sx)*c:(sy*w+sx+1)*c])
			}
		}
	}
}

// EpochStream streams in-memory examples as a pipeline of training
// batches: in a fresh order each epoch, drawn from (seed, epoch) as Fit
// draws its order, each example fed as float32 (pixels scaled) and passed
// through an Augmentation when one is given. Call SetEpoch before each
// pass (an epoch-begin callback).
type EpochStream struct {
	e     *Examples
	seed  uint64
	aug   *Augmentation
	perm  []int
	epoch atomic.Int64
}

// NewEpochStream returns the stream of e's examples; aug may be nil. An
// augmentation needs images: examples of shape [H, W, C].
func NewEpochStream(e *Examples, seed uint64, aug *Augmentation) (*EpochStream, error) {
	if aug != nil && e.Shape.Rank() != 3 {
		return nil, fmt.Errorf("data: image augmentation needs images [height, width, channels]; data set %q has examples of shape %v", e.Name, e.Shape)
	}
	s := &EpochStream{e: e, seed: seed, aug: aug, perm: make([]int, e.N)}
	s.SetEpoch(1)
	return s, nil
}

// SetEpoch draws the order of epoch (counted from 1) for the next pass.
func (s *EpochStream) SetEpoch(epoch int) {
	s.epoch.Store(int64(epoch))
	for i := range s.perm {
		s.perm[i] = i
	}
	rng := rand.New(rand.NewPCG(s.seed, uint64(epoch)+0xe90c))
	rng.Shuffle(len(s.perm), func(i, j int) { s.perm[i], s.perm[j] = s.perm[j], s.perm[i] })
}

// Dataset returns the pipeline: examples in the epoch's order, fed and
// augmented by parallel map workers, in batches of batch.
func (s *EpochStream) Dataset(batch int) Dataset[Batch] {
	e := s.e
	d := e.Shape.Size()
	samples := Map(FromSlice(s.perm), "augment", func(ctx context.Context, i int) (Sample, error) {
		x, xb, err := NewTensor(ctx, tensor.Float32, e.Shape)
		if err != nil {
			return Sample{}, err
		}
		xs := x.Float32s()
		if e.Floats != nil {
			copy(xs, e.Floats[i*d:(i+1)*d])
		} else {
			for k, p := range e.Pixels[i*d : (i+1)*d] {
				xs[k] = float32(p) * e.Scale
			}
		}
		if s.aug != nil {
			tmp, tb, err := NewTensor(ctx, tensor.Float32, e.Shape)
			if err != nil {
				xb.Release()
				return Sample{}, err
			}
			s.aug.Apply(xs, tmp.Float32s(), e.Shape, int(s.epoch.Load()), i)
			tb.Release()
		}
		var y tensor.Tensor
		var yb *Block
		if e.Labels != nil {
			y, yb, err = NewTensor(ctx, tensor.Int32, nil)
			if err == nil {
				y.Int32s()[0] = e.Labels[i]
			}
		} else {
			t := e.TargetSize()
			y, yb, err = NewTensor(ctx, tensor.Float32, tensor.Shape{t})
			if err == nil {
				copy(y.Float32s(), e.Targets[i*t:(i+1)*t])
			}
		}
		if err != nil {
			xb.Release()
			return Sample{}, err
		}
		smp := NewSample(x, y, xb, yb)
		xb.Release()
		yb.Release()
		return smp, nil
	}, Parallel(Autotune))
	return Batches(samples, batch, false).Prefetch(2)
}
