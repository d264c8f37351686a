package onnx

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// msg is a decoded protobuf message: each field number's values in order,
// as varints, fixed32s or bytes (length-delimited).
type msg map[protowire.Number][]field

type field struct {
	typ   protowire.Type
	v     uint64 // varint, fixed32, fixed64
	bytes []byte
}

// decode parses b as one protobuf message with protowire, without a schema.
func decode(b []byte) (msg, error) {
	m := msg{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		f := field{typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.v = uint64(v)
		case protowire.Fixed64Type:
			f.v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		default:
			return nil, fmt.Errorf("field %d: unexpected wire type %d", num, typ)
		}
		if n < 0 {
			return nil, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		m[num] = append(m[num], f)
	}
	return m, nil
}

// The accessors below fail the test when the field is missing or has
// another wire type, so a wrong field number cannot pass unnoticed.

func (m msg) str(t testing.TB, num protowire.Number) string {
	t.Helper()
	return string(m.one(t, num, protowire.BytesType).bytes)
}

func (m msg) int(t testing.TB, num protowire.Number) int64 {
	t.Helper()
	return int64(m.one(t, num, protowire.VarintType).v)
}

func (m msg) ints(t testing.TB, num protowire.Number) []int64 {
	t.Helper()
	var out []int64
	for _, f := range m[num] {
		if f.typ != protowire.VarintType {
			t.Fatalf("field %d: wire type %d, want varint", num, f.typ)
		}
		out = append(out, int64(f.v))
	}
	return out
}

func (m msg) strs(t testing.TB, num protowire.Number) []string {
	t.Helper()
	var out []string
	for _, f := range m[num] {
		if f.typ != protowire.BytesType {
			t.Fatalf("field %d: wire type %d, want bytes", num, f.typ)
		}
		out = append(out, string(f.bytes))
	}
	return out
}

func (m msg) sub(t testing.TB, num protowire.Number) msg {
	t.Helper()
	return mustDecode(t, m.one(t, num, protowire.BytesType).bytes)
}

func (m msg) subs(t testing.TB, num protowire.Number) []msg {
	t.Helper()
	var out []msg
	for _, f := range m[num] {
		if f.typ != protowire.BytesType {
			t.Fatalf("field %d: wire type %d, want bytes", num, f.typ)
		}
		out = append(out, mustDecode(t, f.bytes))
	}
	return out
}

func (m msg) one(t testing.TB, num protowire.Number, typ protowire.Type) field {
	t.Helper()
	fs := m[num]
	if len(fs) != 1 {
		t.Fatalf("field %d occurs %d times, want once (fields: %v)", num, len(fs), m.numbers())
	}
	if fs[0].typ != typ {
		t.Fatalf("field %d: wire type %d, want %d", num, fs[0].typ, typ)
	}
	return fs[0]
}

func (m msg) numbers() []protowire.Number {
	var out []protowire.Number
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func mustDecode(t testing.TB, b []byte) msg {
	t.Helper()
	m, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTensorProtoFields(t *testing.T) {
	tp := &tensorProto{Dims: []int64{2, 3}, DataType: dtFloat, Name: "dense/kernel", RawData: []byte{1, 2, 3, 4}}
	m := mustDecode(t, tp.marshal(nil))
	if got := m.ints(t, 1); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("dims (1) = %v, want [2 3]", got)
	}
	if got := m.int(t, 2); got != dtFloat {
		t.Errorf("data_type (2) = %d, want %d", got, dtFloat)
	}
	if got := m.str(t, 8); got != "dense/kernel" {
		t.Errorf("name (8) = %q, want dense/kernel", got)
	}
	if got := []byte(m.str(t, 9)); !bytes.Equal(got, tp.RawData) {
		t.Errorf("raw_data (9) = %v, want %v", got, tp.RawData)
	}
	if got, want := m.numbers(), []protowire.Number{1, 2, 8, 9}; !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
}

func TestAttributeFields(t *testing.T) {
	cases := []struct {
		name  string
		attr  *attribute
		field protowire.Number
		typ   int64
		check func(t *testing.T, m msg)
	}{
		{"int", attrI("axis", -1), 3, attrInt, func(t *testing.T, m msg) {
			if got := m.int(t, 3); got != -1 {
				t.Errorf("i = %d, want -1", got)
			}
		}},
		{"ints", attrIs("perm", 0, 3, 1, 2), 8, attrInts, func(t *testing.T, m msg) {
			if got := m.ints(t, 8); !slices.Equal(got, []int64{0, 3, 1, 2}) {
				t.Errorf("ints = %v, want [0 3 1 2]", got)
			}
		}},
		{"float", attrF("alpha", 0.25), 2, attrFloat, func(t *testing.T, m msg) {
			if got := math.Float32frombits(uint32(m.one(t, 2, protowire.Fixed32Type).v)); got != 0.25 {
				t.Errorf("f = %v, want 0.25", got)
			}
		}},
		{"string", attrS("mode", "constant"), 4, attrString, func(t *testing.T, m msg) {
			if got := m.str(t, 4); got != "constant" {
				t.Errorf("s = %q, want constant", got)
			}
		}},
		{"floats", &attribute{Name: "scales", Floats: []float32{1, 2}, Type: attrFloats}, 7, attrFloats, func(t *testing.T, m msg) {
			var got []float32
			for _, f := range m[7] {
				got = append(got, math.Float32frombits(uint32(f.v)))
			}
			if !slices.Equal(got, []float32{1, 2}) {
				t.Errorf("floats = %v, want [1 2]", got)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := mustDecode(t, c.attr.marshal(nil))
			if got := m.str(t, 1); got != c.attr.Name {
				t.Errorf("name (1) = %q, want %q", got, c.attr.Name)
			}
			if got := m.int(t, 20); got != c.typ {
				t.Errorf("type (20) = %d, want %d", got, c.typ)
			}
			if got, want := m.numbers(), []protowire.Number{1, c.field, 20}; !slices.Equal(got, want) {
				t.Errorf("fields %v, want %v", got, want)
			}
			c.check(t, m)
		})
	}
}

func TestValueInfoFields(t *testing.T) {
	v := valueInfo{Name: "x", ElemType: dtFloat, Dims: []int64{3, 28, 28, 1}, Params: []string{"N", "", "", ""}}
	m := mustDecode(t, v.marshal(nil))
	if got := m.str(t, 1); got != "x" {
		t.Errorf("name = %q, want x", got)
	}
	tt := m.sub(t, 2).sub(t, 1) // TypeProto.tensor_type
	if got := tt.int(t, 1); got != dtFloat {
		t.Errorf("elem_type = %d, want %d", got, dtFloat)
	}
	dims := tt.sub(t, 2).subs(t, 1) // TensorShapeProto.dim
	if len(dims) != 4 {
		t.Fatalf("%d dims, want 4", len(dims))
	}
	if got := dims[0].str(t, 2); got != "N" {
		t.Errorf("dim 0 dim_param = %q, want N", got)
	}
	if _, ok := dims[0][1]; ok {
		t.Errorf("dim 0 has a dim_value too")
	}
	for i, want := range []int64{28, 28, 1} {
		if got := dims[i+1].int(t, 1); got != want {
			t.Errorf("dim %d dim_value = %d, want %d", i+1, got, want)
		}
	}
}

func TestNodeAndModelFields(t *testing.T) {
	n := &nodeProto{Input: []string{"a", "", "c"}, Output: []string{"y"}, Name: "n", OpType: "Conv", Domain: "d",
		Attribute: []*attribute{attrI("group", 1)}}
	nm := mustDecode(t, n.marshal(nil))
	if got := nm.strs(t, 1); !slices.Equal(got, []string{"a", "", "c"}) {
		t.Errorf("input (1) = %q, want [a  c] (an empty optional input keeps its slot)", got)
	}
	if got := nm.strs(t, 2); !slices.Equal(got, []string{"y"}) {
		t.Errorf("output (2) = %q", got)
	}
	if nm.str(t, 3) != "n" || nm.str(t, 4) != "Conv" || nm.str(t, 7) != "d" {
		t.Errorf("name, op_type, domain (3, 4, 7) = %q %q %q", nm.str(t, 3), nm.str(t, 4), nm.str(t, 7))
	}
	if got := nm.sub(t, 5).str(t, 1); got != "group" {
		t.Errorf("attribute (5) name %q", got)
	}

	mp := &modelProto{IRVersion: 8, ProducerName: "headroom", ProducerVersion: "v", DocString: "doc",
		Graph: &graphProto{Name: "g", Node: []*nodeProto{n}, Initializer: []*tensorProto{{Name: "w", DataType: dtFloat}},
			Input: []valueInfo{{Name: "x", ElemType: dtFloat}}, Output: []valueInfo{{Name: "y", ElemType: dtFloat}}},
		OpsetImport:   []opsetID{{Version: 17}},
		MetadataProps: []stringStringKV{{"classes", "[a, b]"}}}
	m := mustDecode(t, mp.marshal(nil))
	if m.int(t, 1) != 8 || m.str(t, 2) != "headroom" || m.str(t, 3) != "v" || m.str(t, 6) != "doc" {
		t.Errorf("ir_version, producer_name, producer_version, doc_string = %d %q %q %q", m.int(t, 1), m.str(t, 2), m.str(t, 3), m.str(t, 6))
	}
	op := m.sub(t, 8)
	if op.int(t, 2) != 17 || len(op[1]) != 0 {
		t.Errorf("opset_import (8) = version %d, domain fields %d; want 17 and the default domain", op.int(t, 2), len(op[1]))
	}
	kv := m.sub(t, 14)
	if kv.str(t, 1) != "classes" || kv.str(t, 2) != "[a, b]" {
		t.Errorf("metadata_props (14) = %q: %q", kv.str(t, 1), kv.str(t, 2))
	}
	g := m.sub(t, 7)
	if g.str(t, 2) != "g" || len(g[1]) != 1 || g.sub(t, 5).str(t, 8) != "w" || g.sub(t, 11).str(t, 1) != "x" || g.sub(t, 12).str(t, 1) != "y" {
		t.Errorf("graph fields (name 2, node 1, initializer 5, input 11, output 12): %v", g.numbers())
	}
}

// FuzzTensorRoundTrip encodes a TensorProto made from the fuzzer's input
// and decodes it back.
func FuzzTensorRoundTrip(f *testing.F) {
	f.Add([]byte{1, 2, 3}, int64(3), "w")
	f.Add([]byte{}, int64(-1), "")
	f.Fuzz(func(t *testing.T, raw []byte, dim int64, name string) {
		tp := &tensorProto{Dims: []int64{dim, int64(len(raw))}, DataType: dtUint8, Name: name, RawData: raw}
		m, err := decode(tp.marshal(nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.ints(t, 1); !slices.Equal(got, tp.Dims) {
			t.Errorf("dims %v, want %v", got, tp.Dims)
		}
		if name != "" && m.str(t, 8) != name {
			t.Errorf("name %q, want %q", m.str(t, 8), name)
		}
		if got := []byte(m.str(t, 9)); !bytes.Equal(got, raw) {
			t.Errorf("raw_data %v, want %v", got, raw)
		}
	})
}

// FuzzDecode: the tests' decoder returns an error, never panics, on any
// input, and finds a field in any non-empty input it accepts.
func FuzzDecode(f *testing.F) {
	f.Add((&tensorProto{Dims: []int64{2}, DataType: dtFloat, RawData: make([]byte, 8)}).marshal(nil))
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decode(b)
		if err != nil {
			return
		}
		n := 0
		for _, fs := range m {
			n += len(fs)
		}
		if n == 0 && len(b) != 0 {
			t.Errorf("decoded no fields from %d bytes", len(b))
		}
	})
}
