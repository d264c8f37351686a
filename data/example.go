package data

import (
	"fmt"
	"math"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// Example is a decoded tf.train.Example: named features, each a list of
// byte strings, floats or int64s (tensorflow/core/example/example.proto and
// feature.proto):
//
//	message Example  { Features features = 1; }
//	message Features { map<string, Feature> feature = 1; }
//	message Feature  { oneof kind { BytesList bytes_list = 1;
//	                   FloatList float_list = 2; Int64List int64_list = 3; } }
//	message BytesList { repeated bytes value = 1; }
//	message FloatList { repeated float value = 1 [packed = true]; }
//	message Int64List { repeated int64 value = 1 [packed = true]; }
type Example struct {
	Features map[string]Feature
}

// FeatureKind says which list a Feature holds.
type FeatureKind uint8

const (
	NoKind FeatureKind = iota // a Feature with no list set
	BytesKind
	FloatKind
	Int64Kind
)

// Feature is one feature of an Example. Bytes values view the record they
// were parsed from (no copy): they are valid while the record is.
type Feature struct {
	Kind   FeatureKind
	Bytes  [][]byte
	Floats []float32
	Int64s []int64
}

// ParseExample decodes a serialized tf.train.Example. Packed and unpacked
// repeated fields are both accepted, unknown fields skipped, and a later
// entry for a feature name replaces an earlier one (proto3 map semantics).
// A malformed message is an error naming the byte offset in b.
func ParseExample(b []byte) (Example, error) {
	ex := Example{Features: map[string]Feature{}}
	err := walk(b, 0, func(num protowire.Number, typ protowire.Type, v []byte, off int) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		return walk(v, off, func(num protowire.Number, typ protowire.Type, v []byte, off int) error {
			if num != 1 || typ != protowire.BytesType {
				return nil
			}
			return parseEntry(ex.Features, v, off)
		})
	})
	return ex, err
}

// ExampleError is a malformed tf.train.Example at byte Offset of the record.
type ExampleError struct {
	Offset int
	Msg    string
}

func (e *ExampleError) Error() string {
	return fmt.Sprintf("tf.train.Example at byte %d: %s", e.Offset, e.Msg)
}

// ParseExampleRecord decodes rec's payload as a tf.train.Example; an error
// is a *FormatError naming the record's file and offset.
func ParseExampleRecord(rec Record) (Example, error) {
	ex, err := ParseExample(rec.Data)
	if err != nil {
		return Example{}, formatErr("tfrecord", rec.File, rec.Offset, err, "bad tf.train.Example")
	}
	return ex, nil
}

// walk calls f for every field of the message b (at offset base of the
// record) with the field's payload: the bytes of a length-delimited field,
// the encoded value of any other.
func walk(b []byte, base int, f func(protowire.Number, protowire.Type, []byte, int) error) error {
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return &ExampleError{Offset: base + i, Msg: "bad tag: " + protowire.ParseError(n).Error()}
		}
		start := i + n
		var v []byte
		if typ == protowire.BytesType {
			vb, m := protowire.ConsumeBytes(b[start:])
			if m < 0 {
				return &ExampleError{Offset: base + start, Msg: "bad length: " + protowire.ParseError(m).Error()}
			}
			v, n = vb, m
			if err := f(num, typ, v, base+start+m-len(vb)); err != nil {
				return err
			}
		} else {
			m := protowire.ConsumeFieldValue(num, typ, b[start:])
			if m < 0 {
				return &ExampleError{Offset: base + start, Msg: "bad field: " + protowire.ParseError(m).Error()}
			}
			n = m
			if err := f(num, typ, b[start:start+m], base+start); err != nil {
				return err
			}
		}
		i = start + n
	}
	return nil
}

// parseEntry decodes one map entry {1: key, 2: Feature}.
func parseEntry(m map[string]Feature, b []byte, base int) error {
	var key string
	var feat Feature
	err := walk(b, base, func(num protowire.Number, typ protowire.Type, v []byte, off int) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			key = string(v)
		case num == 2 && typ == protowire.BytesType:
			feat = Feature{}
			return walk(v, off, func(num protowire.Number, typ protowire.Type, v []byte, off int) error {
				if typ != protowire.BytesType || num < 1 || num > 3 {
					return nil
				}
				feat = Feature{Kind: FeatureKind(num)}
				return parseList(&feat, v, off)
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	m[key] = feat
	return nil
}

// parseList decodes a BytesList, FloatList or Int64List into f.
func parseList(f *Feature, b []byte, base int) error {
	return walk(b, base, func(num protowire.Number, typ protowire.Type, v []byte, off int) error {
		if num != 1 {
			return nil
		}
		switch f.Kind {
		case BytesKind:
			if typ == protowire.BytesType {
				f.Bytes = append(f.Bytes, v)
			}
		case FloatKind:
			switch typ {
			case protowire.Fixed32Type: // unpacked
				x, _ := protowire.ConsumeFixed32(v)
				f.Floats = append(f.Floats, math.Float32frombits(x))
			case protowire.BytesType:
				if len(v)%4 != 0 {
					return &ExampleError{Offset: off, Msg: fmt.Sprintf("packed floats of %d bytes", len(v))}
				}
				for i := 0; i < len(v); i += 4 {
					x, _ := protowire.ConsumeFixed32(v[i:])
					f.Floats = append(f.Floats, math.Float32frombits(x))
				}
			}
		case Int64Kind:
			switch typ {
			case protowire.VarintType: // unpacked
				x, _ := protowire.ConsumeVarint(v)
				f.Int64s = append(f.Int64s, int64(x))
			case protowire.BytesType:
				for i := 0; i < len(v); {
					x, n := protowire.ConsumeVarint(v[i:])
					if n < 0 {
						return &ExampleError{Offset: off + i, Msg: "bad packed varint"}
					}
					f.Int64s = append(f.Int64s, int64(x))
					i += n
				}
			}
		}
		return nil
	})
}

// Names returns the feature names, sorted.
func (e Example) Names() []string {
	names := make([]string, 0, len(e.Features))
	for k := range e.Features {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
