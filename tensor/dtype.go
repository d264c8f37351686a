package tensor

import "fmt"

// DType is an element type. The zero value is Invalid.
type DType uint8

// The element types, in a fixed order (the order is part of the checkpoint
// and plan formats; append only).
const (
	Invalid DType = iota
	Float32
	Float64
	Float16
	BFloat16
	Int32
	Int64
	Uint8
	Bool
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	Invalid:  {"invalid", 0},
	Float32:  {"float32", 4},
	Float64:  {"float64", 8},
	Float16:  {"float16", 2},
	BFloat16: {"bfloat16", 2},
	Int32:    {"int32", 4},
	Int64:    {"int64", 8},
	Uint8:    {"uint8", 1},
	Bool:     {"bool", 1},
}

// Size returns the number of bytes of one element (0 for Invalid).
func (d DType) Size() int {
	if int(d) >= len(dtypeInfo) {
		return 0
	}
	return dtypeInfo[d].size
}

// String returns the lower-case name used by NumPy and safetensors-style
// metadata ("float32", "bfloat16", ...).
func (d DType) String() string {
	if int(d) >= len(dtypeInfo) {
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
	return dtypeInfo[d].name
}

// IsFloat reports whether d is a floating-point type (including 16-bit ones).
func (d DType) IsFloat() bool {
	return d == Float32 || d == Float64 || d == Float16 || d == BFloat16
}

// IsInt reports whether d is an integer type (Bool excluded).
func (d DType) IsInt() bool { return d == Int32 || d == Int64 || d == Uint8 }

// Valid reports whether d is one of the defined element types.
func (d DType) Valid() bool { return d > Invalid && int(d) < len(dtypeInfo) }

// ParseDType returns the DType named s, as String writes it.
func ParseDType(s string) (DType, error) {
	for i := range dtypeInfo {
		if DType(i) != Invalid && dtypeInfo[i].name == s {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("tensor: unknown dtype %q", s)
}
