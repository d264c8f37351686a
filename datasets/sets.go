package datasets

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/tensor"
)

// The built-in data sets as data.Sets: each says what it holds before it
// is read (from constants or file headers), so a trainer can plan a run,
// refuse it or choose to stream before generating or reading anything
// large. Fashion-MNIST and the synthetic set can be streamed; the digits
// and the shapes are small and only loaded.

// DigitsSet is the embedded digits (Digits) as a data.Set.
func DigitsSet() data.Set { return &digitsSet{} }

type digitsSet struct {
	once           sync.Once
	trainSet, test *data.Examples
	err            error
}

func (d *digitsSet) load() {
	d.once.Do(func() { d.trainSet, d.test, d.err = Digits() })
}

// Describe parses the embedded file (about 100 KB in memory), which is
// then what Load returns.
func (d *digitsSet) Describe() (data.SetInfo, bool) {
	if d.load(); d.err != nil {
		return data.SetInfo{}, false
	}
	return data.SetInfo{Train: describe(d.trainSet), Labels: d.trainSet.Kind(), HeldOut: d.test.N, HeldOutName: "test",
		TrainBytes: d.trainSet.Bytes(), HeldOutBytes: d.test.Bytes()}, true
}

func (d *digitsSet) Bytes() (int64, error) {
	if d.load(); d.err != nil {
		return 0, d.err
	}
	return d.trainSet.Bytes() + d.test.Bytes(), nil
}

func (d *digitsSet) Load() (*data.Examples, *data.Examples, error) {
	d.load()
	return d.trainSet, d.test, d.err
}

func (d *digitsSet) Stream() (*data.Streamed, error) { return nil, data.ErrNotStreamable }

// describe returns e's description without its data.
func describe(e *data.Examples) *data.Examples {
	return &data.Examples{Name: e.Name, Shape: e.Shape.Clone(), N: e.N, Scale: e.Scale, Classes: e.Classes, LabelShape: e.LabelShape.Clone()}
}

// ShapesSet is the generated segmentation set (Shapes) as a data.Set.
func ShapesSet(n, nTest, size int, seed uint64) data.Set {
	return &shapesSet{n: n, nTest: nTest, size: size, seed: seed}
}

type shapesSet struct {
	n, nTest, size int
	seed           uint64
}

func (s *shapesSet) Describe() (data.SetInfo, bool) {
	e := &data.Examples{Name: "shapes/train", Shape: tensor.Shape{s.size, s.size, 1}, N: s.n, Scale: 1.0 / 255, Classes: ShapeClasses,
		LabelShape: tensor.Shape{s.size, s.size}}
	per := int64(s.size*s.size) * 5 // a uint8 pixel and an int32 label per pixel
	return data.SetInfo{Train: e, Labels: data.LabelKind{Class: true, Classes: ShapeClasses, Shape: e.LabelShape}, HeldOut: s.nTest, HeldOutName: "test",
		TrainBytes: int64(s.n) * per, HeldOutBytes: int64(s.nTest) * per}, true
}

// Bytes: a uint8 pixel and an int32 label per pixel.
func (s *shapesSet) Bytes() (int64, error) {
	return int64(s.n+s.nTest) * int64(s.size*s.size) * 5, nil
}

func (s *shapesSet) Load() (*data.Examples, *data.Examples, error) {
	tr, te := Shapes(s.n, s.nTest, s.size, s.seed)
	return tr, te, nil
}

func (s *shapesSet) Stream() (*data.Streamed, error) { return nil, data.ErrNotStreamable }

// SyntheticSet is the peers' synthetic workload (Synthetic) as a
// data.Set. Streamed, each epoch generates the training examples again in
// the order Synthetic draws them (the same values) and shuffles them
// through a buffer; the test examples, which Synthetic draws after them,
// are held in memory.
func SyntheticSet(shape tensor.Shape, n, nTest, classes int, seed uint64) data.Set {
	return &syntheticSet{shape: shape.Clone(), n: n, nTest: nTest, classes: classes, seed: seed}
}

type syntheticSet struct {
	shape             tensor.Shape
	n, nTest, classes int
	seed              uint64
}

func (s *syntheticSet) Describe() (data.SetInfo, bool) {
	e := &data.Examples{Name: "synthetic/train", Shape: s.shape.Clone(), N: s.n, Classes: s.classes}
	per := int64(s.shape.Size()*4 + 4) // float32 features and an int32 label
	return data.SetInfo{Train: e, Labels: data.LabelKind{Class: true, Classes: s.classes}, HeldOut: s.nTest, HeldOutName: "test",
		TrainBytes: int64(s.n) * per, HeldOutBytes: int64(s.nTest) * per}, true
}

// Bytes: float32 features and an int32 label per example.
func (s *syntheticSet) Bytes() (int64, error) {
	return int64(s.n+s.nTest) * int64(s.shape.Size()*4+4), nil
}

func (s *syntheticSet) Load() (*data.Examples, *data.Examples, error) {
	tr, te := Synthetic(s.shape, s.n, s.nTest, s.classes, s.seed)
	return tr, te, nil
}

func (s *syntheticSet) Stream() (*data.Streamed, error) {
	info, _ := s.Describe()
	return &data.Streamed{Info: info, HeldOut: func() (*data.Examples, error) { return s.testSet(), nil }, From: "generated each epoch",
		Batches: func(batch int, budget int64, seed uint64) (data.Dataset[data.Batch], int) {
			shuffle := data.StreamShuffle(batch, s.shape.Size(), budget)
			return data.PerPass("synthetic", func(pass int) data.Dataset[data.Batch] {
				return data.Batches(s.examples().Shuffle(shuffle, seed+uint64(pass)*0x9e3779b97f4a7c15), batch, false).Prefetch(2)
			}), shuffle
		}}, nil
}

// teacher starts Synthetic's draw: the generator and the teacher's
// weights, drawn first.
func (s *syntheticSet) teacher() (*rand.Rand, []float32) {
	rng := rand.New(rand.NewPCG(s.seed, 0x7eac4e5))
	w := make([]float32, s.shape.Size()*s.classes)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	return rng, w
}

// draw draws the next example into x and returns its label (Synthetic's
// draw, example by example).
func draw(rng *rand.Rand, w, x, scores []float32) int32 {
	clear(scores)
	classes := len(scores)
	for k := range x {
		x[k] = float32(rng.NormFloat64())
		wk := w[k*classes : (k+1)*classes]
		for c := range scores {
			scores[c] += x[k] * wk[c]
		}
	}
	best := 0
	for c := range scores {
		if scores[c] > scores[best] {
			best = c
		}
	}
	return int32(best)
}

// testSet draws the test examples: those after the training examples.
func (s *syntheticSet) testSet() *data.Examples {
	rng, w := s.teacher()
	d := s.shape.Size()
	scratch, scores := make([]float32, d), make([]float32, s.classes)
	for i := 0; i < s.n; i++ {
		draw(rng, w, scratch, scores)
	}
	e := &data.Examples{Name: "synthetic/test", Shape: s.shape.Clone(), N: s.nTest, Classes: s.classes,
		Floats: make([]float32, s.nTest*d), Labels: make([]int32, s.nTest)}
	for i := 0; i < s.nTest; i++ {
		e.Labels[i] = draw(rng, w, e.Floats[i*d:(i+1)*d], scores)
	}
	return e
}

// examples generates the training examples in order, in the pipeline's
// memory.
func (s *syntheticSet) examples() data.Dataset[data.Sample] {
	return data.Generate("synthetic", func() func(ctx context.Context) (data.Sample, error) {
		rng, w := s.teacher()
		scores := make([]float32, s.classes)
		i := 0
		return func(ctx context.Context) (data.Sample, error) {
			if i == s.n {
				return data.Sample{}, io.EOF
			}
			i++
			x, xb, err := data.NewTensor(ctx, tensor.Float32, s.shape)
			if err != nil {
				return data.Sample{}, err
			}
			y, yb, err := data.NewTensor(ctx, tensor.Int32, nil)
			if err != nil {
				xb.Release()
				return data.Sample{}, err
			}
			y.Int32s()[0] = draw(rng, w, x.Float32s(), scores)
			smp := data.NewSample(x, y, xb, yb)
			xb.Release()
			yb.Release()
			return smp, nil
		}
	})
}

// FashionMNISTSet is Fashion-MNIST in dir (FashionMNIST; "" for
// FashionMNISTDir) as a data.Set: described from its files' headers;
// streamed, the training images are read from their gzipped IDX file every
// epoch through a shuffle buffer, and the test set is held in memory.
func FashionMNISTSet(dir string) data.Set {
	if dir == "" {
		dir = FashionMNISTDir
	}
	return &fashionSet{dir: dir}
}

type fashionSet struct{ dir string }

func (f *fashionSet) path(prefix, kind string) string {
	return filepath.Join(f.dir, prefix+"-"+kind+"-idx"+map[string]string{"images": "3", "labels": "1"}[kind]+"-ubyte.gz")
}

// counts reads the images' headers.
func (f *fashionSet) counts() (n, nTest int, err error) {
	for i, prefix := range []string{"train", "t10k"} {
		shape, err := data.IDXShape(f.path(prefix, "images"))
		if err != nil || len(shape) != 3 || shape[1] != 28 || shape[2] != 28 {
			if err == nil {
				err = fmt.Errorf("datasets: %s holds %v images, want 28x28", f.path(prefix, "images"), shape)
			}
			return 0, 0, err
		}
		if i == 0 {
			n = int(shape[0])
		} else {
			nTest = int(shape[0])
		}
	}
	return n, nTest, nil
}

func (f *fashionSet) Describe() (data.SetInfo, bool) {
	n, nTest, err := f.counts()
	if err != nil {
		return data.SetInfo{}, false
	}
	e := &data.Examples{Name: "fashion-mnist/train", Shape: tensor.Shape{28, 28, 1}, N: n, Scale: 1.0 / 255, Classes: 10}
	const per = 28*28 + 4 // uint8 pixels and an int32 label
	return data.SetInfo{Train: e, Labels: data.LabelKind{Class: true, Classes: 10}, HeldOut: nTest, HeldOutName: "test",
		TrainBytes: int64(n) * per, HeldOutBytes: int64(nTest) * per}, true
}

// Bytes: a uint8 pixel per pixel and an int32 label per image.
func (f *fashionSet) Bytes() (int64, error) {
	if err := fashionInstalled(f.dir); err != nil {
		return 0, err
	}
	n, nTest, err := f.counts()
	return int64(n+nTest) * (28*28 + 4), err
}

func (f *fashionSet) Load() (*data.Examples, *data.Examples, error) { return FashionMNIST(f.dir) }

func (f *fashionSet) Stream() (*data.Streamed, error) {
	if err := fashionInstalled(f.dir); err != nil {
		return nil, err
	}
	info, ok := f.Describe()
	if !ok {
		_, _, err := f.counts()
		return nil, err
	}
	src := &data.Source{Path: f.path("train", "images"), Labels: f.path("train", "labels"), Preprocessing: data.Preprocessing{Format: "idx", Classes: 10, Shape: tensor.Shape{28, 28, 1}}}
	return &data.Streamed{Info: info, HeldOut: func() (*data.Examples, error) { return FashionMNISTTest(f.dir) }, From: src.Path,
		Batches: func(batch int, budget int64, seed uint64) (data.Dataset[data.Batch], int) {
			st := &data.Stream{Source: src, Seed: seed, N: info.Train.N, Shape: tensor.Shape{28, 28, 1}}
			shuffle := data.StreamShuffle(batch, 28*28, budget)
			return st.Dataset(batch, shuffle), shuffle
		}}, nil
}
