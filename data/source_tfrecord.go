package data

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/tensor"
)

// FeatureSpec names one feature of tf.train.Example records that a model
// reads: its key, its kind (the list it is stored in) and one example's
// shape (nil: as many values as the record holds, flat).
type FeatureSpec struct {
	Key   string
	Kind  FeatureKind
	Shape tensor.Shape
}

// maxFeatureElems bounds a feature's declared shape.
const maxFeatureElems = 1 << 28

// ParseFeatures reads a feature spec: comma-separated key:kind[:shape],
// kind one of float (a FloatList), int64 (an Int64List) or bytes (a
// BytesList whose one value is raw bytes, read as uint8), shape as
// dimensions joined by "x" (28x28x1). Example: "image:bytes:28x28x1" or
// "pixels:float:784,extra:int64:3". Keys must differ.
func ParseFeatures(spec string) ([]FeatureSpec, error) {
	var out []FeatureSpec
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		fields := strings.Split(part, ":")
		if part == "" || len(fields) < 2 || len(fields) > 3 || fields[0] == "" {
			return nil, fmt.Errorf("data: feature %q: want key:kind[:shape], kind float, int64 or bytes", part)
		}
		f := FeatureSpec{Key: fields[0]}
		if seen[f.Key] {
			return nil, fmt.Errorf("data: feature %q is listed twice", f.Key)
		}
		seen[f.Key] = true
		switch fields[1] {
		case "float", "float32":
			f.Kind = FloatKind
		case "int64", "int":
			f.Kind = Int64Kind
		case "bytes", "uint8":
			f.Kind = BytesKind
		default:
			return nil, fmt.Errorf("data: feature %q: kind %q, want float, int64 or bytes", f.Key, fields[1])
		}
		if len(fields) == 3 && fields[2] != "" {
			size := 1
			for _, d := range strings.Split(fields[2], "x") {
				n, err := strconv.Atoi(d)
				if err != nil || n <= 0 || n > maxFeatureElems || size*n > maxFeatureElems {
					return nil, fmt.Errorf("data: feature %q: shape %q, want positive dimensions joined by x (28x28x1)", f.Key, fields[2])
				}
				size *= n
				f.Shape = append(f.Shape, n)
			}
			if len(f.Shape) > tensor.MaxRank {
				return nil, fmt.Errorf("data: feature %q: shape %q has more than %d dimensions", f.Key, fields[2], tensor.MaxRank)
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// count returns how many values feature f of ex holds, or why they do
// not fit the spec.
func (f FeatureSpec) count(ex Example) (int, error) {
	v, ok := ex.Features[f.Key]
	if !ok {
		return 0, fmt.Errorf("no feature %q (it has %s)", f.Key, strings.Join(ex.Names(), ", "))
	}
	if v.Kind != f.Kind {
		return 0, fmt.Errorf("feature %q is a %s, the spec says %s", f.Key, kindName(v.Kind), kindName(f.Kind))
	}
	n := 0
	switch f.Kind {
	case FloatKind:
		n = len(v.Floats)
	case Int64Kind:
		n = len(v.Int64s)
	case BytesKind:
		if len(v.Bytes) != 1 {
			return 0, fmt.Errorf("feature %q holds %d byte strings, want 1 (raw bytes)", f.Key, len(v.Bytes))
		}
		n = len(v.Bytes[0])
	}
	if f.Shape != nil && n != f.Shape.Size() {
		return 0, fmt.Errorf("feature %q holds %d values, its shape %v needs %d", f.Key, n, f.Shape, f.Shape.Size())
	}
	return n, nil
}

func kindName(k FeatureKind) string {
	return [...]string{"feature with no list", "bytes", "float", "int64"}[k]
}

// put writes feature f of ex from dst[0] on, converted to dst's dtype.
func (f FeatureSpec) put(ex Example, dst tensor.Tensor, at int) int {
	v := ex.Features[f.Key]
	switch f.Kind {
	case FloatKind:
		for i, x := range v.Floats {
			dst.SetFloat64At(at+i, float64(x))
		}
		return len(v.Floats)
	case Int64Kind:
		for i, x := range v.Int64s {
			dst.SetFloat64At(at+i, float64(x))
		}
		return len(v.Int64s)
	}
	b := v.Bytes[0]
	if dst.DType() == tensor.Uint8 {
		copy(dst.Uint8s()[at:], b)
	} else {
		for i, x := range b {
			dst.SetFloat64At(at+i, float64(x))
		}
	}
	return len(b)
}

// openTFRecord streams tf.train.Example records as samples: X the
// features of Features (one: its shape; several: flat, concatenated),
// uint8 when every feature is bytes, else float32; Y the label key's
// value: an int64 class index, or float targets.
func (s *Source) openTFRecord() (Dataset[Sample], error) {
	if s.Features == "" {
		return Dataset[Sample]{}, fmt.Errorf("data: tfrecord %s: name the features the model reads (--features key:kind[:shape],...)", s.Path)
	}
	specs, err := ParseFeatures(s.Features)
	if err != nil {
		return Dataset[Sample]{}, err
	}
	if s.Label == "" {
		s.Label = "label"
	}
	xType := tensor.Uint8
	for _, f := range specs {
		if f.Key == s.Label {
			return Dataset[Sample]{}, fmt.Errorf("data: tfrecord %s: %q is the label; --features names the model's input", s.Path, f.Key)
		}
		if f.Kind != BytesKind {
			xType = tensor.Float32
		}
	}
	path, label, unlabeled, classes := s.Path, s.Label, s.Unlabeled, s.Classes
	return Map(TFRecords(path, TFRecordOptions{Gzip: true}), "tf_example", func(ctx context.Context, rec Record) (Sample, error) {
		ex, err := ParseExampleRecord(rec)
		if err != nil {
			return Sample{}, err
		}
		total := 0
		for _, f := range specs {
			n, err := f.count(ex)
			if err != nil {
				return Sample{}, formatErr("tfrecord", path, rec.Offset, nil, "%v", err)
			}
			total += n
		}
		shape := tensor.Shape{total}
		if len(specs) == 1 && specs[0].Shape != nil {
			shape = specs[0].Shape
		}
		x, xb, err := NewTensor(ctx, xType, shape)
		if err != nil {
			return Sample{}, err
		}
		at := 0
		for _, f := range specs {
			at += f.put(ex, x, at)
		}
		if unlabeled {
			smp := NewSample(x, tensor.Tensor{}, xb)
			xb.Release()
			return smp, nil
		}
		v, ok := ex.Features[label]
		var y tensor.Tensor
		var yb *Block
		why := ""
		switch {
		case !ok:
			why = fmt.Sprintf("no label feature %q (it has %s)", label, strings.Join(ex.Names(), ", "))
		case v.Kind == Int64Kind && len(v.Int64s) == 1:
			if c := v.Int64s[0]; c < 0 || c > 1<<31-1 || (classes > 0 && int(c) >= classes) {
				why = fmt.Sprintf("label %d is not a class index%s", c, classRange(classes))
			} else if y, yb, err = NewTensor(ctx, tensor.Int32, nil); err == nil {
				y.Int32s()[0] = int32(c)
			}
		case v.Kind == FloatKind && len(v.Floats) > 0:
			if y, yb, err = NewTensor(ctx, tensor.Float32, tensor.Shape{len(v.Floats)}); err == nil {
				copy(y.Float32s(), v.Floats)
			}
		default:
			why = fmt.Sprintf("label %q is a %s of %d values, want one int64 class index or floats", label, kindName(v.Kind), len(v.Int64s)+len(v.Floats)+len(v.Bytes))
		}
		if why != "" {
			err = formatErr("tfrecord", path, rec.Offset, nil, "%s", why)
		}
		if err != nil {
			xb.Release()
			return Sample{}, err
		}
		smp := NewSample(x, y, xb, yb)
		xb.Release()
		yb.Release()
		return smp, nil
	}), nil
}
