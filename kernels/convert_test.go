package kernels_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

func TestConvertFloatToInt(t *testing.T) {
	inf := math.Inf(1)
	src := []float64{2.9, -2.9, 0.5, -0.5, nan64, inf, -inf, 3e9, -3e9, 2147483647.9, -2147483648.9, 1e300}
	wantI32 := []int32{2, -2, 0, 0, 0, math.MaxInt32, math.MinInt32, math.MaxInt32, math.MinInt32, math.MaxInt32, math.MinInt32, math.MaxInt32}
	got := kernels.Convert(make([]int32, len(src)), src)
	for i := range src {
		if got[i] != wantI32[i] {
			t.Errorf("int32(%v) = %d, want %d", src[i], got[i], wantI32[i])
		}
	}
	wantI64 := []int64{2, -2, 0, 0, 0, math.MaxInt64, math.MinInt64, 3e9, -3e9, 2147483647, -2147483648, math.MaxInt64}
	got64 := kernels.Convert(make([]int64, len(src)), src)
	for i := range src {
		if got64[i] != wantI64[i] {
			t.Errorf("int64(%v) = %d, want %d", src[i], got64[i], wantI64[i])
		}
	}
	src32 := []float32{-1.5, 0, 254.99, 255.5, 256, 1e10, float32(inf), nan32, 7}
	wantU8 := []uint8{0, 0, 254, 255, 255, 255, 255, 0, 7}
	gotU8 := kernels.Convert(make([]uint8, len(src32)), src32)
	for i := range src32 {
		if gotU8[i] != wantU8[i] {
			t.Errorf("uint8(%v) = %d, want %d", src32[i], gotU8[i], wantU8[i])
		}
	}
	// 2^63 is the first float64 above the int64 range.
	if got := kernels.Convert(make([]int64, 2), []float64{math.Ldexp(1, 63), -math.Ldexp(1, 63)}); got[0] != math.MaxInt64 || got[1] != math.MinInt64 {
		t.Errorf("int64(±2^63) = %v, want [MaxInt64 MinInt64]", got)
	}
}

func TestConvertIntAndFloat(t *testing.T) {
	// Integer narrowing wraps, like Go.
	wide := []int64{300, -1, 1 << 40, 5}
	u8 := kernels.Convert(make([]uint8, 4), wide)
	if u8[0] != 44 || u8[1] != 255 || u8[2] != 0 || u8[3] != 5 {
		t.Errorf("uint8(%v) = %v, want [44 255 0 5]", wide, u8)
	}
	i32 := kernels.Convert(make([]int32, 4), wide)
	if i32[0] != 300 || i32[1] != -1 || i32[2] != 0 || i32[3] != 5 {
		t.Errorf("int32(%v) = %v, want [300 -1 0 5]", wide, i32)
	}
	// To float rounds to nearest even.
	f := kernels.Convert(make([]float32, 3), []int32{16777217, 16777219, -3})
	if f[0] != 16777216 || f[1] != 16777220 || f[2] != -3 {
		t.Errorf("float32(2^24+1, 2^24+3, -3) = %v, want [16777216 16777220 -3]", f)
	}
	narrow := kernels.Convert(make([]float32, 2), []float64{1e39, 0.1})
	if !math.IsInf(float64(narrow[0]), 1) || narrow[1] != float32(0.1) {
		t.Errorf("float32(1e39, 0.1) = %v, want [+Inf 0.1]", narrow)
	}
	// Round trips that must be exact.
	r := rng(11)
	ints := make([]int32, 1000)
	for i := range ints {
		ints[i] = int32(r.Uint32())
	}
	back := kernels.Convert(make([]int32, len(ints)), kernels.Convert(make([]float64, len(ints)), ints))
	for i := range ints {
		if back[i] != ints[i] {
			t.Fatalf("int32 -> float64 -> int32 of %d gave %d", ints[i], back[i])
		}
	}
	fl := make([]float32, 1000)
	for i := range fl {
		fl[i] = math.Float32frombits(r.Uint32()&0x7f7fffff | r.Uint32()&0x80000000) // finite
	}
	fb := kernels.Convert(make([]float32, len(fl)), kernels.Convert(make([]float64, len(fl)), fl))
	for i := range fl {
		if fb[i] != fl[i] {
			t.Fatalf("float32 -> float64 -> float32 of %v gave %v", fl[i], fb[i])
		}
	}
	// Bool-as-uint8 to float.
	b := kernels.Convert(make([]float64, 2), []uint8{0, 1})
	if b[0] != 0 || b[1] != 1 {
		t.Errorf("float64(uint8 0, 1) = %v", b)
	}
}

func TestBFloat16(t *testing.T) {
	tests := []struct {
		x    float32
		want tensor.BF16
	}{
		{1, 0x3f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // 1 + 2^-8: tie, to even (down)
		{math.Float32frombits(0x3f818000), 0x3f82}, // 1 + 3·2^-8: tie, to even (up)
		{math.Float32frombits(0x3f808001), 0x3f81}, // just above the tie
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // max float32 rounds to +Inf
		{-2, 0xc000},
		{float32(math.Inf(-1)), 0xff80},
	}
	for _, tc := range tests {
		got := kernels.Float32ToBF16(make([]tensor.BF16, 1), []float32{tc.x})[0]
		if got != tc.want {
			t.Errorf("Float32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(tc.x), got, tc.want)
		}
	}
	if got := kernels.Float32ToBF16(make([]tensor.BF16, 1), []float32{nan32})[0]; got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("Float32ToBF16(NaN) = %#04x, want a NaN", got)
	}
	// Every bfloat16 widens exactly and rounds back to itself.
	all := make([]tensor.BF16, 1<<16)
	for i := range all {
		all[i] = tensor.BF16(i)
	}
	f := kernels.BF16ToFloat32(make([]float32, len(all)), all)
	back := kernels.Float32ToBF16(make([]tensor.BF16, len(all)), f)
	for i := range all {
		if math.Float32bits(f[i]) != uint32(i)<<16 {
			t.Fatalf("BF16ToFloat32(%#04x) = %#08x, want %#08x", i, math.Float32bits(f[i]), uint32(i)<<16)
		}
		if isNaN32(f[i]) {
			continue // NaNs come back quiet
		}
		if back[i] != all[i] {
			t.Fatalf("bfloat16 %#04x -> float32 -> bfloat16 gave %#04x", i, back[i])
		}
	}
}

func TestFloat16(t *testing.T) {
	tests := []struct {
		x    float32
		want tensor.F16
	}{
		{1, 0x3c00},
		{1 + 1.0/2048, 0x3c00}, // tie, to even (down)
		{1 + 3.0/2048, 0x3c02}, // tie, to even (up)
		{65504, 0x7bff},        // largest half
		{65519, 0x7bff},        // below the rounding boundary
		{65520, 0x7c00},        // rounds to +Inf
		{-2, 0xc000},
		{5.960464477539063e-08, 0x0001}, // smallest subnormal
		{2.98e-8, 0x0000},               // below half of it
	}
	for _, tc := range tests {
		got := kernels.Float32ToF16(make([]tensor.F16, 1), []float32{tc.x})[0]
		if got != tc.want {
			t.Errorf("Float32ToF16(%v) = %#04x, want %#04x", tc.x, got, tc.want)
		}
	}
	all := make([]tensor.F16, 1<<16)
	for i := range all {
		all[i] = tensor.F16(i)
	}
	f := kernels.F16ToFloat32(make([]float32, len(all)), all)
	back := kernels.Float32ToF16(make([]tensor.F16, len(all)), f)
	for i := range all {
		if isNaN32(f[i]) {
			if i&0x7c00 != 0x7c00 || i&0x3ff == 0 {
				t.Fatalf("F16ToFloat32(%#04x) = NaN for a non-NaN half", i)
			}
			continue
		}
		if back[i] != all[i] {
			t.Fatalf("float16 %#04x -> float32 (%v) -> float16 gave %#04x", i, f[i], back[i])
		}
	}
	// Spot values of the widening, computed from the format: sign,
	// exponent bias 15, 10 mantissa bits.
	for _, h := range []uint16{0x3c00, 0x3555, 0xc248, 0x0001, 0x03ff, 0x7bff} {
		s, e, m := h>>15, int(h>>10&0x1f), float64(h&0x3ff)
		v := math.Ldexp(1+m/1024, e-15)
		if e == 0 {
			v = math.Ldexp(m/1024, -14)
		}
		if s == 1 {
			v = -v
		}
		if got := float64(f[h]); got != v {
			t.Errorf("F16ToFloat32(%#04x) = %v, want %v", h, got, v)
		}
	}
}
