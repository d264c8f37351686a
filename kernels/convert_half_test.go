package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The casts between float32 and the 16-bit floats are checked bit for bit
// against their definitions (tensor.ToFloat16, tensor.ToBFloat16 and the
// exact widenings F16.Float32, BF16.Float32), on every vector tier this CPU
// has and on the Go loops alone.

// convertTiers runs f once per tier: 0 (the Go loops), 8 and 16 float32
// lanes a vector, each where this CPU and build have it.
func convertTiers(t *testing.T, f func(t *testing.T)) {
	f16, bf16 := kernels.ConvertLanes()
	for _, lanes := range []int{0, 8, 16} {
		if lanes > max(f16, bf16) {
			continue
		}
		t.Run(fmt.Sprintf("lanes=%d", lanes), func(t *testing.T) {
			defer kernels.UseConvertLanes(lanes)()
			f(t)
		})
	}
}

// halfNarrowInputs returns float32 bit patterns that probe rounding to both
// 16-bit formats: every exponent with random mantissas, the exact halfway
// points between neighbouring float16 and bfloat16 values (ties to even)
// with their float32 neighbours, float32 and float16 subnormals, ±0, ±Inf,
// NaNs with assorted payloads and signs, the values that round up to Inf,
// and a sweep across all 2^32 patterns.
func halfNarrowInputs() []float32 {
	r := rng(29)
	var bits []uint32
	for exp := uint32(0); exp < 256; exp++ {
		for range 32 {
			m := r.Uint32() & 0x7fffff
			bits = append(bits, exp<<23|m, 0x80000000|exp<<23|m)
		}
	}
	// Halfway points of bfloat16: the low 16 bits are exactly 0x8000; the
	// kept lowest bit decides the way a tie goes.
	for b := uint32(0); b < 0x7f80; b += 1 + b/64 {
		mid := b<<16 | 0x8000
		bits = append(bits, mid, mid-1, mid+1, mid|0x80000000)
	}
	bits = append(bits, 0x7f7f8000, 0x7f7f7fff, 0x7f7e8000, 0xff7f8000) // round up to ±Inf, or not
	// Halfway points of float16, subnormals included: midway between each
	// finite float16 and the next one up (exact in float32).
	for h := uint16(0); h < 0x7c00; h++ {
		lo, hi := float64(tensor.F16(h).Float32()), float64(tensor.F16(h+1).Float32())
		if h == 0x7bff {
			hi = 65536 // where Inf would sit: 65520 ties to even, up to Inf
		}
		mid := math.Float32bits(float32((lo + hi) / 2))
		bits = append(bits, mid, mid-1, mid+1, mid|0x80000000)
	}
	bits = append(bits,
		0, 0x80000000, // ±0
		0x7f800000, 0xff800000, // ±Inf
		1, 0x80000001, 0x007fffff, 0x00400000, // float32 subnormals
		0x33000000, 0x33000001, 0x337fffff, 0xb3000001, // around half the smallest float16 subnormal
		0x477fe000, 0x477fefff, 0x477ff000, 0x47800000, 0x7f7fffff, // 65504 .. beyond
		// NaNs: quiet and signalling, payloads float16 keeps, loses or
		// partly keeps, both signs.
		0x7fc00000, 0xffc00000, 0x7fffffff, 0xffffffff, 0x7f800001, 0xff800001,
		0x7fa00000, 0x7f802000, 0x7f801fff, 0x7fbfe000, 0xffa5a5a5, 0x7fc0ffff, 0x7f80ffff, 0x7f810000,
	)
	for i := uint64(0); i < 1<<32; i += 65521 * 64 { // a prime stride over every pattern
		bits = append(bits, uint32(i)+uint32(i>>32))
	}
	out := make([]float32, len(bits))
	for i, b := range bits {
		out[i] = math.Float32frombits(b)
	}
	return out
}

func TestFloat32ToHalfBitExact(t *testing.T) {
	src := halfNarrowInputs()
	convertTiers(t, func(t *testing.T) {
		for _, off := range []int{0, 1, 7} { // unaligned starts too
			s := src[off:]
			f16 := kernels.Float32ToF16(make([]tensor.F16, len(s)), s)
			bf16 := kernels.Float32ToBF16(make([]tensor.BF16, len(s)), s)
			bad := 0
			for i, v := range s {
				if want := tensor.ToFloat16(v); f16[i] != want && bad < 10 {
					bad++
					t.Errorf("offset %d: Float32ToF16(%#08x) = %#04x, want %#04x", off, math.Float32bits(v), f16[i], want)
				}
				if want := tensor.ToBFloat16(v); bf16[i] != want && bad < 10 {
					bad++
					t.Errorf("offset %d: Float32ToBF16(%#08x) = %#04x, want %#04x", off, math.Float32bits(v), bf16[i], want)
				}
			}
		}
	})
}

func TestHalfToFloat32AllPatterns(t *testing.T) {
	h := make([]tensor.F16, 1<<16+3)
	b := make([]tensor.BF16, 1<<16+3)
	for i := range h {
		h[i], b[i] = tensor.F16(i), tensor.BF16(i)
	}
	convertTiers(t, func(t *testing.T) {
		for _, off := range []int{0, 3} {
			f := kernels.F16ToFloat32(make([]float32, len(h)-off), h[off:])
			g := kernels.BF16ToFloat32(make([]float32, len(b)-off), b[off:])
			bad := 0
			for i := range f {
				x, y := h[off+i], b[off+i]
				if got, want := math.Float32bits(f[i]), math.Float32bits(x.Float32()); got != want && bad < 10 {
					bad++
					t.Errorf("offset %d: F16ToFloat32(%#04x) = %#08x, want %#08x", off, x, got, want)
				}
				if got, want := math.Float32bits(g[i]), math.Float32bits(y.Float32()); got != want && bad < 10 {
					bad++
					t.Errorf("offset %d: BF16ToFloat32(%#04x) = %#08x, want %#08x", off, y, got, want)
				}
			}
		}
	})
}

// TestHalfConvertLengths checks every length 0..70 and a long odd one
// (whole vector blocks, the Go tail, both) and that nothing past len(src)
// in dst is written.
func TestHalfConvertLengths(t *testing.T) {
	r := rng(31)
	pool := halfNarrowInputs()
	const guard = 0x5a5a
	convertTiers(t, func(t *testing.T) {
		for _, n := range append(lengths(71), 1000, 4099) {
			src := make([]float32, n)
			for i := range src {
				src[i] = pool[r.IntN(len(pool))]
			}
			f16 := make([]tensor.F16, n+8)
			bf16 := make([]tensor.BF16, n+8)
			for i := range f16 {
				f16[i], bf16[i] = guard, guard
			}
			kernels.Float32ToF16(f16[:n], src)
			kernels.Float32ToBF16(bf16[:n], src)
			wide16 := kernels.F16ToFloat32(make([]float32, n), f16[:n])
			wideB := kernels.BF16ToFloat32(make([]float32, n), bf16[:n])
			for i := range n + 8 {
				wantH, wantB := tensor.F16(guard), tensor.BF16(guard)
				if i < n {
					wantH, wantB = tensor.ToFloat16(src[i]), tensor.ToBFloat16(src[i])
				}
				if f16[i] != wantH || bf16[i] != wantB {
					t.Fatalf("n=%d: element %d of %#08x: got float16 %#04x bfloat16 %#04x, want %#04x %#04x",
						n, i, math.Float32bits(src[min(i, n-1)]), f16[i], bf16[i], wantH, wantB)
				}
				if i < n && (math.Float32bits(wide16[i]) != math.Float32bits(wantH.Float32()) || math.Float32bits(wideB[i]) != math.Float32bits(wantB.Float32())) {
					t.Fatalf("n=%d: element %d widened to %#08x and %#08x, want %#08x and %#08x",
						n, i, math.Float32bits(wide16[i]), math.Float32bits(wideB[i]), math.Float32bits(wantH.Float32()), math.Float32bits(wantB.Float32()))
				}
			}
		}
	})
}

// lengths returns 0, 1, ..., n-1.
func lengths(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestHalfConvertNoAlloc(t *testing.T) {
	const n = 1000
	f := make([]float32, n)
	h := make([]tensor.F16, n)
	b := make([]tensor.BF16, n)
	convertTiers(t, func(t *testing.T) {
		for name, fn := range map[string]func(){
			"Float32ToF16":  func() { kernels.Float32ToF16(h, f) },
			"F16ToFloat32":  func() { kernels.F16ToFloat32(f, h) },
			"Float32ToBF16": func() { kernels.Float32ToBF16(b, f) },
			"BF16ToFloat32": func() { kernels.BF16ToFloat32(f, b) },
		} {
			if got := testing.AllocsPerRun(20, fn); got != 0 {
				t.Errorf("%s allocates %v times a call, want 0", name, got)
			}
		}
	})
}

// BenchmarkConvert times the four casts over 1M elements on each tier
// (go: the Go loops, the definition) and reports ns per element; the MB/s
// column counts bytes read plus written (6 a element).
func BenchmarkConvert(b *testing.B) {
	const n = 1 << 20
	r := rng(37)
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(r.NormFloat64())
	}
	h := kernels.Float32ToF16(make([]tensor.F16, n), f)
	bh := kernels.Float32ToBF16(make([]tensor.BF16, n), f)
	out := make([]float32, n)
	f16Lanes, bf16Lanes := kernels.ConvertLanes()
	for _, c := range []struct {
		name  string
		avail int
		run   func()
	}{
		{"f32tof16", f16Lanes, func() { kernels.Float32ToF16(h, f) }},
		{"f16tof32", f16Lanes, func() { kernels.F16ToFloat32(out, h) }},
		{"f32tobf16", bf16Lanes, func() { kernels.Float32ToBF16(bh, f) }},
		{"bf16tof32", bf16Lanes, func() { kernels.BF16ToFloat32(out, bh) }},
	} {
		for _, lanes := range []int{0, 8, 16} {
			if lanes > c.avail {
				continue
			}
			name := "go"
			if lanes > 0 {
				name = fmt.Sprintf("x%d", lanes)
			}
			b.Run(c.name+"/"+name, func(b *testing.B) {
				defer kernels.UseConvertLanes(lanes)()
				b.SetBytes(6 * n)
				for b.Loop() {
					c.run()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
			})
		}
	}
}
