package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func f32(bits uint32) float32 { return math.Float32frombits(bits) }

func TestToBFloat16(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   float32
		want BF16
	}{
		{"one", 1, 0x3f80},
		{"minus two", -2, 0xc000},
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"exact bf16 value", f32(0x3f810000), 0x3f81},
		{"halfway, even below: stays", f32(0x3f808000), 0x3f80},
		{"halfway, odd below: rounds up", f32(0x3f818000), 0x3f82},
		{"just below halfway", f32(0x3f807fff), 0x3f80},
		{"just above halfway", f32(0x3f808001), 0x3f81},
		{"negative halfway, even", f32(0xbf808000), 0xbf80},
		{"negative halfway, odd", f32(0xbf818000), 0xbf82},
		{"carry into exponent", f32(0x3fffc000), 0x4000},
		{"max float32 rounds to inf", math.MaxFloat32, 0x7f80},
		{"-max float32 rounds to -inf", -math.MaxFloat32, 0xff80},
		{"halfway below inf, odd: inf", f32(0x7f7f8000), 0x7f80},
		{"largest finite bf16", f32(0x7f7f7fff), 0x7f7f},
		{"+inf", float32(math.Inf(1)), 0x7f80},
		{"-inf", float32(math.Inf(-1)), 0xff80},
		{"subnormal halfway, even: zero", f32(0x00008000), 0x0000},
		{"subnormal halfway, odd", f32(0x00018000), 0x0002},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToBFloat16(tc.in); got != tc.want {
				t.Errorf("ToBFloat16(%g = %#08x) = %#04x, want %#04x", tc.in, math.Float32bits(tc.in), got, tc.want)
			}
		})
	}
	for _, bits := range []uint32{0x7fc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0xffffffff} {
		got := ToBFloat16(f32(bits))
		if v := got.Float32(); v == v || math.Signbit(float64(v)) != (bits>>31 == 1) {
			t.Errorf("ToBFloat16(NaN %#08x) = %#04x (%g), want a NaN of the same sign", bits, got, v)
		}
	}
}

// bf16Reference rounds x to bfloat16 by comparing distances to its two
// bfloat16 neighbours in float64 (ties to the even bit pattern); the
// neighbour past the largest finite value is 2^128, as IEEE 754 rounds.
func bf16Reference(x float32) BF16 {
	bits := math.Float32bits(x)
	lo := BF16(bits >> 16) // truncation: the neighbour toward zero
	hi := lo + 1
	val := func(b BF16) float64 {
		if b&0x7fff == 0x7f80 {
			return math.Copysign(math.Ldexp(1, 128), float64(x))
		}
		return float64(b.Float32())
	}
	dlo, dhi := math.Abs(float64(x)-val(lo)), math.Abs(val(hi)-float64(x))
	switch {
	case dlo < dhi:
		return lo
	case dhi < dlo:
		return hi
	case lo&1 == 0:
		return lo
	}
	return hi
}

func TestToBFloat16Reference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200000; i++ {
		bits := rng.Uint32()
		if i%4 == 0 { // many exact ties and near-ties
			bits = bits&^0xffff | uint32(0x8000+rng.IntN(3)-1)
		}
		x := f32(bits)
		if x != x || math.IsInf(float64(x), 0) {
			continue
		}
		if got, want := ToBFloat16(x), bf16Reference(x); got != want {
			t.Fatalf("ToBFloat16(%#08x) = %#04x, want %#04x", bits, got, want)
		}
	}
}

func TestBFloat16RoundTrip(t *testing.T) {
	for b := 0; b < 1<<16; b++ {
		h := BF16(b)
		v := h.Float32()
		if v != v {
			continue
		}
		if got := ToBFloat16(v); got != h {
			t.Fatalf("ToBFloat16(BF16(%#04x).Float32() = %g) = %#04x, want %#04x", b, v, got, h)
		}
		if got := math.Float32bits(v); got != uint32(b)<<16 {
			t.Fatalf("BF16(%#04x).Float32() has bits %#08x, want %#08x", b, got, uint32(b)<<16)
		}
	}
}

func TestToFloat16(t *testing.T) {
	tiny := math.Ldexp(1, -24) // smallest positive subnormal half
	for _, tc := range []struct {
		in   float64
		want F16
	}{
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{0, 0x0000},
		{math.Copysign(0, -1), 0x8000},
		{65504, 0x7bff},        // largest finite half
		{65519, 0x7bff},        // below the halfway point 65520
		{65520, 0x7c00},        // halfway to 65536, odd below: rounds to inf
		{1e6, 0x7c00},          // overflow
		{-1e6, 0xfc00},         // negative overflow
		{1 + 1.0/2048, 0x3c00}, // halfway, even below
		{1 + 3.0/2048, 0x3c02}, // halfway, odd below
		{1 + 1.0/1024, 0x3c01}, // exact
		{tiny, 0x0001},
		{tiny / 2, 0x0000},           // halfway to zero, even
		{tiny * 1.5, 0x0002},         // halfway between 1 and 2 subnormal units
		{math.Ldexp(1, -14), 0x0400}, // smallest normal
		{math.Inf(1), 0x7c00},
		{math.Inf(-1), 0xfc00},
	} {
		t.Run(fmt.Sprint(tc.in), func(t *testing.T) {
			if got := ToFloat16(float32(tc.in)); got != tc.want {
				t.Errorf("ToFloat16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
			}
		})
	}
	if v := ToFloat16(float32(math.NaN())).Float32(); v == v {
		t.Errorf("ToFloat16(NaN) widens to %g, want NaN", v)
	}
}

func TestFloat16RoundTrip(t *testing.T) {
	for b := 0; b < 1<<16; b++ {
		h := F16(b)
		v := h.Float32()
		if h&0x7c00 == 0x7c00 && h&0x03ff != 0 { // NaN
			if v == v {
				t.Fatalf("F16(%#04x) is a NaN but widens to %g", b, v)
			}
			continue
		}
		if got := ToFloat16(v); got != h {
			t.Fatalf("ToFloat16(F16(%#04x).Float32() = %g) = %#04x, want %#04x", b, v, got, h)
		}
	}
	// Widening is exact: the subnormal unit and the largest finite value.
	if got := F16(0x0001).Float32(); float64(got) != math.Ldexp(1, -24) {
		t.Errorf("F16(0x0001).Float32() = %g, want 2^-24", got)
	}
	if got := F16(0x7bff).Float32(); got != 65504 {
		t.Errorf("F16(0x7bff).Float32() = %g, want 65504", got)
	}
}
