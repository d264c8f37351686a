package onnx

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The subset of onnx.proto (package onnx, proto2) that an exported model
// uses, as Go structs with one encoder each. Field numbers are onnx.proto's;
// the tests decode what these write and check them, and the real-runtime
// test loads the result in onnxruntime.

// TensorProto.DataType values.
const (
	dtFloat    = 1
	dtUint8    = 2
	dtInt8     = 3
	dtInt32    = 6
	dtInt64    = 7
	dtBool     = 9
	dtFloat16  = 10
	dtDouble   = 11
	dtBFloat16 = 16
)

// AttributeProto.AttributeType values.
const (
	attrFloat  = 1
	attrInt    = 2
	attrString = 3
	attrFloats = 6
	attrInts   = 7
)

// modelProto is ModelProto.
type modelProto struct {
	IRVersion       int64            // 1
	ProducerName    string           // 2
	ProducerVersion string           // 3
	Domain          string           // 4
	ModelVersion    int64            // 5
	DocString       string           // 6
	Graph           *graphProto      // 7
	OpsetImport     []opsetID        // 8
	MetadataProps   []stringStringKV // 14
}

// opsetID is OperatorSetIdProto.
type opsetID struct {
	Domain  string // 1
	Version int64  // 2
}

// stringStringKV is StringStringEntryProto.
type stringStringKV struct{ Key, Value string } // 1, 2

// graphProto is GraphProto.
type graphProto struct {
	Node        []*nodeProto   // 1
	Name        string         // 2
	Initializer []*tensorProto // 5
	DocString   string         // 10
	Input       []valueInfo    // 11
	Output      []valueInfo    // 12
	ValueInfo   []valueInfo    // 13
}

// nodeProto is NodeProto.
type nodeProto struct {
	Input     []string     // 1
	Output    []string     // 2
	Name      string       // 3
	OpType    string       // 4
	Attribute []*attribute // 5
	DocString string       // 6
	Domain    string       // 7
}

// attribute is AttributeProto; Type says which value field is set.
type attribute struct {
	Name   string    // 1
	F      float32   // 2
	I      int64     // 3
	S      []byte    // 4
	Floats []float32 // 7
	Ints   []int64   // 8
	Type   int32     // 20
}

// tensorProto is TensorProto with its data in RawData (little-endian).
type tensorProto struct {
	Dims     []int64 // 1
	DataType int32   // 2
	Name     string  // 8
	RawData  []byte  // 9
}

// valueInfo is ValueInfoProto with a tensor TypeProto: dims are either a
// value or, where Params[i] != "", a symbolic dimension (dim_param).
type valueInfo struct {
	Name     string // ValueInfoProto.name 1
	ElemType int32  // TypeProto.tensor_type 1 -> Tensor.elem_type 1
	Dims     []int64
	Params   []string
}

// message appends field num holding the message that enc appends.
func message(b []byte, num protowire.Number, enc func([]byte) []byte) []byte {
	return appendBytes(b, num, enc(nil))
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func (m *modelProto) marshal(b []byte) []byte {
	b = appendVarint(b, 1, uint64(m.IRVersion))
	b = appendString(b, 2, m.ProducerName)
	b = appendString(b, 3, m.ProducerVersion)
	b = appendString(b, 4, m.Domain)
	if m.ModelVersion != 0 {
		b = appendVarint(b, 5, uint64(m.ModelVersion))
	}
	b = appendString(b, 6, m.DocString)
	if m.Graph != nil {
		b = message(b, 7, m.Graph.marshal)
	}
	for _, o := range m.OpsetImport {
		b = message(b, 8, o.marshal)
	}
	for _, kv := range m.MetadataProps {
		b = message(b, 14, kv.marshal)
	}
	return b
}

func (o opsetID) marshal(b []byte) []byte {
	b = appendString(b, 1, o.Domain)
	return appendVarint(b, 2, uint64(o.Version))
}

func (kv stringStringKV) marshal(b []byte) []byte {
	b = appendString(b, 1, kv.Key)
	return appendString(b, 2, kv.Value)
}

func (g *graphProto) marshal(b []byte) []byte {
	for _, n := range g.Node {
		b = message(b, 1, n.marshal)
	}
	b = appendString(b, 2, g.Name)
	for _, t := range g.Initializer {
		b = message(b, 5, t.marshal)
	}
	b = appendString(b, 10, g.DocString)
	for _, v := range g.Input {
		b = message(b, 11, v.marshal)
	}
	for _, v := range g.Output {
		b = message(b, 12, v.marshal)
	}
	for _, v := range g.ValueInfo {
		b = message(b, 13, v.marshal)
	}
	return b
}

func (n *nodeProto) marshal(b []byte) []byte {
	for _, s := range n.Input {
		// an empty name is a legal "absent optional input": keep the slot
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	for _, s := range n.Output {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	b = appendString(b, 3, n.Name)
	b = appendString(b, 4, n.OpType)
	for _, a := range n.Attribute {
		b = message(b, 5, a.marshal)
	}
	b = appendString(b, 6, n.DocString)
	return appendString(b, 7, n.Domain)
}

func (a *attribute) marshal(b []byte) []byte {
	b = appendString(b, 1, a.Name)
	switch a.Type {
	case attrFloat:
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(a.F))
	case attrInt:
		b = appendVarint(b, 3, uint64(a.I))
	case attrString:
		b = appendBytes(b, 4, a.S)
	case attrFloats:
		for _, f := range a.Floats { // proto2 repeated float: unpacked
			b = protowire.AppendTag(b, 7, protowire.Fixed32Type)
			b = protowire.AppendFixed32(b, math.Float32bits(f))
		}
	case attrInts:
		for _, v := range a.Ints { // proto2 repeated int64: unpacked
			b = appendVarint(b, 8, uint64(v))
		}
	}
	return appendVarint(b, 20, uint64(a.Type))
}

func (t *tensorProto) marshal(b []byte) []byte {
	for _, d := range t.Dims {
		b = appendVarint(b, 1, uint64(d))
	}
	b = appendVarint(b, 2, uint64(t.DataType))
	b = appendString(b, 8, t.Name)
	return appendBytes(b, 9, t.RawData)
}

func (v *valueInfo) marshal(b []byte) []byte {
	b = appendString(b, 1, v.Name)
	return message(b, 2, func(b []byte) []byte { // TypeProto
		return message(b, 1, func(b []byte) []byte { // TypeProto.Tensor
			b = appendVarint(b, 1, uint64(v.ElemType))
			return message(b, 2, func(b []byte) []byte { // TensorShapeProto
				for i, d := range v.Dims {
					b = message(b, 1, func(b []byte) []byte { // Dimension
						if i < len(v.Params) && v.Params[i] != "" {
							return appendString(b, 2, v.Params[i]) // dim_param
						}
						return appendVarint(b, 1, uint64(d)) // dim_value
					})
				}
				return b
			})
		})
	})
}

// Helpers that build attributes.

func attrI(name string, v int64) *attribute { return &attribute{Name: name, I: v, Type: attrInt} }

func attrF(name string, v float32) *attribute { return &attribute{Name: name, F: v, Type: attrFloat} }

func attrIs(name string, v ...int64) *attribute {
	return &attribute{Name: name, Ints: append([]int64{}, v...), Type: attrInts}
}

func attrS(name, v string) *attribute { return &attribute{Name: name, S: []byte(v), Type: attrString} }

// littleEndian is whether this machine stores numbers as TensorProto's
// raw_data does; tensors are byte-swapped when it does not.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// rawLE returns b, a host-order array of elements of size bytes, in
// little-endian order (b itself on a little-endian machine).
func rawLE(b []byte, size int) []byte {
	if littleEndian || size == 1 {
		return b
	}
	out := make([]byte, len(b))
	for i := 0; i+size <= len(b); i += size {
		for j := 0; j < size; j++ {
			out[i+j] = b[i+size-1-j]
		}
	}
	return out
}
