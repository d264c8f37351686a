package data

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"image"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/headroom-ml/headroom/tensor"
)

// PerPass returns a dataset whose pass k (counted from 0 over every Iter
// of the returned dataset) runs the recipe f(k): a fresh shuffle seed for
// each epoch of a trainer that opens one pass per epoch.
func PerPass[T any](name string, f func(pass int) Dataset[T]) Dataset[T] {
	var passes atomic.Int64
	n := &node{name: name, kind: kindSync}
	return Dataset[T]{n: n, open: func(p *pipeline, st *stage) (iterator[T], error) {
		d := f(int(passes.Add(1) - 1))
		up, ust, err := d.openIn(p)
		if err != nil {
			return nil, err
		}
		st.up = ust
		return up, nil
	}}
}

// Stream is a Source read for training without holding it in memory: the
// training examples are read from the files on every epoch, through a
// shuffle buffer, and a fraction of the examples, chosen by a seeded hash
// of their content, is held out for validation (in memory: it is a
// fraction). Scan fills it.
type Stream struct {
	Source *Source
	Split  float64 // the fraction held out (0: none)
	Seed   uint64
	// N, Shape: the training examples and one example's shape; Val the
	// held-out examples (nil without Split).
	N     int
	Shape tensor.Shape
	Val   *Examples
	// targets is the float targets per example (0: class labels).
	targets int
}

// held reports whether a sample is held out for validation: a hash of
// its features and label under the seed, below Split (duplicates fall on
// the same side).
func (s *Stream) held(x Sample) bool {
	if s.Split <= 0 {
		return false
	}
	h := fnv.New64a()
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], s.Seed)
	h.Write(seed[:])
	h.Write(x.X.Bytes())
	if x.Y.DType().Valid() {
		h.Write(x.Y.Bytes())
	}
	return float64(h.Sum64())/math.Exp2(64) < s.Split
}

// Scan reads the source once: it counts the training examples, checks
// that they share one shape, finds the classes of integer labels and
// collects the held-out examples.
func (s *Stream) Scan() error {
	ds, err := s.Source.Open()
	if err != nil {
		return err
	}
	var val *collector
	if s.Split > 0 {
		val = newCollector(s.Source, s.Source.Path+"/validation", nil)
	}
	maxLabel := int64(-1)
	for smp, err := range ds.All(context.Background(), Config{Name: "scan:" + baseName(s.Source.Path)}) {
		if err != nil {
			return err
		}
		if s.N == 0 && (val == nil || val.e.N == 0) {
			s.Shape = smp.X.Shape().Clone()
		} else if !smp.X.Shape().Equal(s.Shape) {
			return fmt.Errorf("data: %s: an example has shape %v, the first %v (images: give an image size)", s.Source.Path, smp.X.Shape(), s.Shape)
		}
		if y := smp.Y; y.DType().Valid() && !y.DType().IsFloat() && y.Len() == 1 {
			maxLabel = max(maxLabel, int64(y.Float64At(0)))
		} else if y.DType().IsFloat() {
			s.targets = y.Len()
		}
		if s.held(smp) {
			if err := val.add(smp); err != nil {
				return err
			}
			continue
		}
		s.N++
	}
	if s.N == 0 {
		return fmt.Errorf("data: %s holds no training examples", s.Source.Path)
	}
	if s.Source.Classes == 0 && maxLabel >= 0 {
		s.Source.Classes = int(maxLabel) + 1
	}
	s.Source.Shape = s.Shape.Clone()
	if val != nil {
		if s.Val, err = val.done(); err != nil {
			return fmt.Errorf("data: %s: no example was held out for validation: %w", s.Source.Path, err)
		}
	}
	return nil
}

// Dataset returns the training batches: the examples not held out, each
// pass through a shuffle buffer of shuffle examples with the pass's own
// seed, fed as float32 (integer features scaled) with int32 class labels
// or float targets, in batches of batch.
func (s *Stream) Dataset(batch, shuffle int) Dataset[Batch] {
	scale := s.Source.scale()
	return PerPass("epoch", func(pass int) Dataset[Batch] {
		ds, err := s.Source.Open()
		if err != nil {
			return newDataset("epoch", kindSource, func(*pipeline, *stage) (iterator[Batch], error) { return nil, err })
		}
		fed := Map(ds.Filter(func(x Sample) bool { return !s.held(x) }), "feed", func(ctx context.Context, in Sample) (Sample, error) {
			x, xb, err := NewTensor(ctx, tensor.Float32, in.X.Shape())
			if err != nil {
				return Sample{}, err
			}
			xs := x.Float32s()
			if in.X.DType() == tensor.Uint8 {
				for i, v := range in.X.Uint8s() {
					xs[i] = float32(float64(v) * scale)
				}
			} else {
				for i := range xs {
					xs[i] = float32(in.X.Float64At(i))
				}
			}
			ydt := tensor.Float32
			if !in.Y.DType().IsFloat() {
				ydt = tensor.Int32
			}
			y, yb, err := NewTensor(ctx, ydt, in.Y.Shape())
			if err != nil {
				xb.Release()
				return Sample{}, err
			}
			for i := 0; i < y.Len(); i++ {
				y.SetFloat64At(i, in.Y.Float64At(i))
			}
			smp := NewSample(x, y, xb, yb)
			xb.Release()
			yb.Release()
			return smp, nil
		}, Parallel(Autotune))
		return Batches(fed.Shuffle(shuffle, s.Seed+uint64(pass)*0x9e3779b97f4a7c15), batch, false).Prefetch(2)
	})
}

// EstimateBytes returns about how many bytes the source takes in memory
// as Examples: the sizes of its files (decoded sizes for images).
func (s *Source) EstimateBytes() (int64, error) {
	format := s.Format
	if format == "" {
		f, err := DetectFormat(s.Path)
		if err != nil {
			return 0, err
		}
		format = f
	}
	if format == "images" {
		files, _, _, err := ImageFiles(s.Path, s.Unlabeled)
		if err != nil || len(files) == 0 {
			return 0, err
		}
		ch := int64(3)
		if s.Color == "grayscale" {
			ch = 1
		}
		h, w := int64(s.ImageSize[0]), int64(s.ImageSize[1])
		if h == 0 || w == 0 {
			f, err := os.Open(files[0])
			if err != nil {
				return 0, fmt.Errorf("data: %w", err)
			}
			cfg, _, err := image.DecodeConfig(f)
			f.Close()
			if err != nil {
				return 0, formatErr("image", files[0], 0, err, "cannot decode")
			}
			h, w = int64(cfg.Height), int64(cfg.Width)
		}
		return int64(len(files)) * h * w * ch, nil
	}
	var total int64
	err := filepath.Walk(s.Path, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("data: %w", err)
	}
	return total, nil
}
