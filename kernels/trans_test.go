package kernels_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// ulps returns |got - want| in units of the float32 spacing at want (the
// subnormal spacing 2^-149 at the least), want the float64 value.
func ulps(got float32, want float64) float64 {
	w := float32(want)
	if got == w || (got != got && want != want) {
		return 0
	}
	if got != got || want != want || math.IsInf(float64(got), 0) || math.IsInf(want, 0) {
		return math.Inf(1)
	}
	spacing := math.Max(float64(math.Nextafter32(float32(math.Abs(want)), float32(math.Inf(1))))-math.Abs(float64(w)), 0x1p-149)
	return math.Abs(float64(got)-want) / spacing
}

// TestTranscendentalULP measures the vector Sigmoid and Tanh against their
// float64 definitions over every 4099th float32 bit pattern (about a
// million values across every exponent, both signs) and a dense run of
// [-10, 10], and checks the bounds docs/kernels.md states: within 3 ulp;
// the saturated, signed-zero, infinite and NaN cases exact.
func TestTranscendentalULP(t *testing.T) {
	if !kernels.MaxSIMD().Transcendental {
		t.Skip("no vector transcendentals on this machine or build")
	}
	defer kernels.SetSIMD(kernels.SetSIMD(kernels.MaxSIMD()))
	var x []float32
	for b := uint64(0); b < 1<<32; b += 4099 {
		x = append(x, math.Float32frombits(uint32(b)))
	}
	for v := -10.0; v < 10; v += 1.0 / 4096 {
		x = append(x, float32(v))
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 0.625, -0.625, math.Nextafter32(0.625, 0), 88, -88, 104, -104, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	sig := kernels.Sigmoid(make([]float32, len(x)), x)
	th := kernels.Tanh(make([]float32, len(x)), x)
	defs := []struct {
		name string
		got  []float32
		def  func(float64) float64
	}{
		{"sigmoid", sig, func(v float64) float64 {
			if v >= 0 {
				return 1 / (1 + math.Exp(-v))
			}
			return math.Exp(v) / (1 + math.Exp(v))
		}},
		{"tanh", th, math.Tanh},
	}
	for _, d := range defs {
		worst, at := 0.0, float32(0)
		for i, v := range x {
			want := d.def(float64(v))
			u := ulps(d.got[i], want)
			if u > worst {
				worst, at = u, v
			}
			exact := math.IsNaN(want) || math.IsInf(float64(v), 0) || v == 0 || float32(want) == 0 || float32(want) == 1 || float32(want) == -1 ||
				d.name == "tanh" && math.Abs(float64(v)) < 1e-4
			if exact && !(math.Float32bits(d.got[i]) == math.Float32bits(float32(want)) || d.got[i] != d.got[i] && want != want) {
				t.Errorf("%s(%v) = %v, want %v exactly", d.name, v, d.got[i], float32(want))
			}
		}
		t.Logf("%s: largest error %.2f ulp, at %v", d.name, worst, at)
		if worst > 3 {
			t.Errorf("%s: %.2f ulp at %v, want at most 3", d.name, worst, at)
		}
	}
}
