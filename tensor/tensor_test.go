package tensor

import (
	"math"
	"strings"
	"testing"
	"unsafe"
)

func TestFromBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dtype DType
		shape Shape
		n     int    // bytes
		err   string // "" when it must succeed
	}{
		{"float32 matrix", Float32, Shape{2, 3}, 24, ""},
		{"bfloat16 vector", BFloat16, Shape{5}, 10, ""},
		{"scalar", Float64, Shape{}, 8, ""},
		{"empty", Int32, Shape{3, 0}, 0, ""},
		{"bool", Bool, Shape{7}, 7, ""},
		{"too short", Float32, Shape{2, 3}, 23, "needs 24 bytes, got 23"},
		{"too long", Int64, Shape{2}, 24, "needs 16 bytes, got 24"},
		{"invalid dtype", Invalid, Shape{2}, 0, "invalid dtype"},
		{"unknown dtype", DType(99), Shape{2}, 0, "invalid dtype"},
		{"negative dimension", Float32, Shape{2, -3}, 0, "negative"},
		{"rank too large", Uint8, Shape{1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, "exceeds the maximum 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, tc.n)
			x, err := FromBytes(tc.dtype, tc.shape, b)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), "tensor: ") || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("FromBytes(%v, %v, %d bytes) error %v, want one containing %q", tc.dtype, tc.shape, tc.n, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromBytes(%v, %v, %d bytes): %v", tc.dtype, tc.shape, tc.n, err)
			}
			if x.DType() != tc.dtype || !x.Shape().Equal(tc.shape) || x.Len() != tc.shape.Size() || len(x.Bytes()) != tc.n {
				t.Errorf("got %v with %d elements and %d bytes, want %v%v with %d and %d", x, x.Len(), len(x.Bytes()), tc.dtype, tc.shape, tc.shape.Size(), tc.n)
			}
			if tc.n > 0 && &x.Bytes()[0] != &b[0] {
				t.Errorf("FromBytes copied the bytes; want a view")
			}
		})
	}
	// The tensor keeps its own copy of the shape.
	s := Shape{2, 2}
	x, _ := FromBytes(Float32, s, make([]byte, 16))
	s[0] = 7
	if x.Shape()[0] != 2 {
		t.Errorf("changing the caller's shape changed the tensor's: %v", x.Shape())
	}
}

func TestAsBytesRoundTrip(t *testing.T) {
	f := []float32{1, -2.5, float32(math.Inf(1)), 3e-39}
	b := AsBytes(f)
	if len(b) != 16 || unsafe.Pointer(&b[0]) != unsafe.Pointer(&f[0]) {
		t.Fatalf("AsBytes: %d bytes at %p, want 16 at %p (no copy)", len(b), &b[0], &f[0])
	}
	back := As[float32](b)
	for i := range f {
		if math.Float32bits(back[i]) != math.Float32bits(f[i]) {
			t.Errorf("As[float32](AsBytes(f))[%d] = %g, want %g", i, back[i], f[i])
		}
	}
	back[0] = 42
	if f[0] != 42 {
		t.Errorf("As returned a copy; want a view")
	}
	i64 := []int64{math.MinInt64, 0, math.MaxInt64}
	if got := As[int64](AsBytes(i64)); len(got) != 3 || got[0] != math.MinInt64 || got[2] != math.MaxInt64 {
		t.Errorf("int64 round trip = %v, want %v", got, i64)
	}
	f64 := []float64{math.Pi, -0.0}
	if got := As[float64](AsBytes(f64)); got[0] != math.Pi {
		t.Errorf("float64 round trip = %v, want %v", got, f64)
	}
	u16 := []uint16{0x3c00, 0xffff}
	if got := As16[BF16](AsBytes(u16)); len(got) != 2 || got[0] != 0x3c00 || got[1] != 0xffff {
		t.Errorf("As16 round trip = %#v, want %#v", got, u16)
	}
	if As[float32](nil) != nil || AsBytes([]int32{}) != nil {
		t.Errorf("empty slices should convert to nil")
	}
	defer func() {
		if msg, _ := recover().(string); !strings.HasPrefix(msg, "tensor: ") {
			t.Errorf("As[float32] of 6 bytes panicked with %q, want a \"tensor: ...\" panic", msg)
		}
	}()
	As[float32](make([]byte, 6))
}

func TestFromSlice(t *testing.T) {
	x := FromSlice(Shape{2, 2}, []float32{1, 2, 3, 4})
	if x.DType() != Float32 || x.String() != "float32[2, 2]" || x.Float32s()[3] != 4 {
		t.Errorf("FromSlice float32: %v %v", x, x.Float32s())
	}
	for _, tc := range []struct {
		t    Tensor
		want DType
	}{
		{FromSlice(Shape{1}, []float64{1}), Float64},
		{FromSlice(Shape{1}, []int32{1}), Int32},
		{FromSlice(Shape{1}, []int64{1}), Int64},
		{FromSlice(Shape{1}, []uint8{1}), Uint8},
		{FromSlice(Shape{1}, []bool{true}), Bool},
	} {
		if tc.t.DType() != tc.want {
			t.Errorf("FromSlice gave %v, want %v", tc.t.DType(), tc.want)
		}
	}
	for _, f := range []func(){
		func() { FromSlice(Shape{3}, []float32{1, 2}) },
		func() { FromSlice(Shape{1}, []uint16{1}) },
		func() { x.Int32s() },
	} {
		func() {
			defer func() {
				if msg, _ := recover().(string); !strings.HasPrefix(msg, "tensor: ") {
					t.Errorf("panic %q, want a \"tensor: ...\" panic", msg)
				}
			}()
			f()
		}()
	}
}

func TestFloat64At(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Uint8, Bool} {
		x := New(dt, Shape{3})
		want := []float64{1, 0, 3}
		if dt == Bool {
			want[2] = 1
		}
		x.SetFloat64At(0, 1)
		x.SetFloat64At(2, 3)
		for i, w := range want {
			if got := x.Float64At(i); got != w {
				t.Errorf("%v: Float64At(%d) = %g, want %g", dt, i, got, w)
			}
		}
	}
}

func TestDType(t *testing.T) {
	for _, tc := range []struct {
		d              DType
		name           string
		size           int
		isFloat, isInt bool
	}{
		{Float32, "float32", 4, true, false},
		{Float64, "float64", 8, true, false},
		{Float16, "float16", 2, true, false},
		{BFloat16, "bfloat16", 2, true, false},
		{Int32, "int32", 4, false, true},
		{Int64, "int64", 8, false, true},
		{Uint8, "uint8", 1, false, true},
		{Bool, "bool", 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.d.String() != tc.name || tc.d.Size() != tc.size || tc.d.IsFloat() != tc.isFloat || tc.d.IsInt() != tc.isInt || !tc.d.Valid() {
				t.Errorf("got %q size %d float %v int %v valid %v; want %q %d %v %v true",
					tc.d, tc.d.Size(), tc.d.IsFloat(), tc.d.IsInt(), tc.d.Valid(), tc.name, tc.size, tc.isFloat, tc.isInt)
			}
			got, err := ParseDType(tc.name)
			if err != nil || got != tc.d {
				t.Errorf("ParseDType(%q) = %v, %v; want %v", tc.name, got, err, tc.d)
			}
		})
	}
	for _, s := range []string{"invalid", "float", "Float32", "", "f32"} {
		if d, err := ParseDType(s); err == nil || d != Invalid {
			t.Errorf("ParseDType(%q) = %v, %v; want Invalid and an error", s, d, err)
		}
	}
	if Invalid.Valid() || DType(200).Valid() || DType(200).Size() != 0 || DType(200).String() != "dtype(200)" {
		t.Errorf("Invalid or out-of-range dtypes report as valid")
	}
}
