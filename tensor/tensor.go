package tensor

import (
	"fmt"
	"unsafe"
)

// Elem is the set of Go types that back a DType's elements.
type Elem interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~bool
}

// Tensor is a typed view over bytes it does not own. Copying a Tensor copies
// the view, not the data.
type Tensor struct {
	dtype DType
	shape Shape
	data  []byte
}

// FromBytes returns a view of b as a tensor of the given dtype and shape. b
// must hold exactly shape.Size()*dtype.Size() bytes.
func FromBytes(dtype DType, shape Shape, b []byte) (Tensor, error) {
	if !dtype.Valid() {
		return Tensor{}, fmt.Errorf("tensor: invalid dtype %v", dtype)
	}
	if err := shape.Validate(); err != nil {
		return Tensor{}, err
	}
	if want := shape.Size() * dtype.Size(); len(b) != want {
		return Tensor{}, fmt.Errorf("tensor: %v %v needs %d bytes, got %d", dtype, shape, want, len(b))
	}
	return Tensor{dtype: dtype, shape: shape.Clone(), data: b}, nil
}

// New returns a zeroed tensor backed by Go memory (for constants, tests and
// host-side results; the engine's own buffers come from mem).
func New(dtype DType, shape Shape) Tensor {
	t, err := FromBytes(dtype, shape, make([]byte, shape.Size()*dtype.Size()))
	if err != nil {
		panic(err)
	}
	return t
}

// FromSlice returns a tensor view over s (no copy) with the given shape. It
// panics if len(s) != shape.Size().
func FromSlice[T Elem](shape Shape, s []T) Tensor {
	var z T
	var dt DType
	switch any(z).(type) {
	case float32:
		dt = Float32
	case float64:
		dt = Float64
	case int32:
		dt = Int32
	case int64:
		dt = Int64
	case uint8:
		dt = Uint8
	case bool:
		dt = Bool
	default:
		panic(fmt.Sprintf("tensor: FromSlice of %T needs an explicit dtype; use FromBytes", z))
	}
	if len(s) != shape.Size() {
		panic(fmt.Sprintf("tensor: FromSlice: %d elements for shape %v", len(s), shape))
	}
	return Tensor{dtype: dt, shape: shape.Clone(), data: AsBytes(s)}
}

// AsBytes reinterprets s as its bytes, without copying.
func AsBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// As reinterprets b as a slice of T, without copying. len(b) must be a
// multiple of T's size and b suitably aligned (every mem buffer is 64-byte
// aligned).
func As[T Elem](b []byte) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b) == 0 {
		return nil
	}
	if len(b)%sz != 0 {
		panic(fmt.Sprintf("tensor: %d bytes is not a whole number of %T", len(b), z))
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sz)
}

// DType returns the element type.
func (t Tensor) DType() DType { return t.dtype }

// Shape returns the shape. The caller must not modify it.
func (t Tensor) Shape() Shape { return t.shape }

// Bytes returns the underlying bytes (the view, not a copy).
func (t Tensor) Bytes() []byte { return t.data }

// Len returns the number of elements.
func (t Tensor) Len() int { return t.shape.Size() }

// Float32s returns the elements of a Float32 tensor; it panics for another dtype.
func (t Tensor) Float32s() []float32 { t.must(Float32); return As[float32](t.data) }

// Float64s returns the elements of a Float64 tensor; it panics for another dtype.
func (t Tensor) Float64s() []float64 { t.must(Float64); return As[float64](t.data) }

// Int32s returns the elements of an Int32 tensor; it panics for another dtype.
func (t Tensor) Int32s() []int32 { t.must(Int32); return As[int32](t.data) }

// Int64s returns the elements of an Int64 tensor; it panics for another dtype.
func (t Tensor) Int64s() []int64 { t.must(Int64); return As[int64](t.data) }

// Uint8s returns the elements of a Uint8 or Bool tensor; it panics for another dtype.
func (t Tensor) Uint8s() []uint8 {
	if t.dtype != Bool {
		t.must(Uint8)
	}
	return t.data
}

// Float16s returns the elements of a Float16 tensor as bit patterns.
func (t Tensor) Float16s() []F16 { t.must(Float16); return As16[F16](t.data) }

// BFloat16s returns the elements of a BFloat16 tensor as bit patterns.
func (t Tensor) BFloat16s() []BF16 { t.must(BFloat16); return As16[BF16](t.data) }

// As16 reinterprets b as 16-bit elements (F16 or BF16).
func As16[T ~uint16](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}

func (t Tensor) must(d DType) {
	if t.dtype != d {
		panic(fmt.Sprintf("tensor: want %v elements, tensor is %v %v", d, t.dtype, t.shape))
	}
}

// Float64At returns element i converted to float64, whatever the dtype (for
// tests, printing and checks; not for hot loops).
func (t Tensor) Float64At(i int) float64 {
	switch t.dtype {
	case Float32:
		return float64(As[float32](t.data)[i])
	case Float64:
		return As[float64](t.data)[i]
	case Float16:
		return float64(As16[F16](t.data)[i].Float32())
	case BFloat16:
		return float64(As16[BF16](t.data)[i].Float32())
	case Int32:
		return float64(As[int32](t.data)[i])
	case Int64:
		return float64(As[int64](t.data)[i])
	case Uint8, Bool:
		return float64(t.data[i])
	}
	panic(fmt.Sprintf("tensor: Float64At on %v", t.dtype))
}

// SetFloat64At stores v, converted to the tensor's dtype, at element i.
func (t Tensor) SetFloat64At(i int, v float64) {
	switch t.dtype {
	case Float32:
		As[float32](t.data)[i] = float32(v)
	case Float64:
		As[float64](t.data)[i] = v
	case Float16:
		As16[F16](t.data)[i] = ToFloat16(float32(v))
	case BFloat16:
		As16[BF16](t.data)[i] = ToBFloat16(float32(v))
	case Int32:
		As[int32](t.data)[i] = int32(v)
	case Int64:
		As[int64](t.data)[i] = int64(v)
	case Uint8:
		t.data[i] = uint8(v)
	case Bool:
		if v != 0 {
			t.data[i] = 1
		} else {
			t.data[i] = 0
		}
	default:
		panic(fmt.Sprintf("tensor: SetFloat64At on %v", t.dtype))
	}
}

// String formats the dtype and shape, e.g. "float32[128, 784]".
func (t Tensor) String() string { return t.dtype.String() + t.shape.String() }
