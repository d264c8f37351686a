package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// TestFloat32LoopsBitExact checks the float32 elementwise kernels, whose
// long runs go through assembly, against scalar float32 arithmetic written
// here, bit for bit, at lengths around the 32-element block, at unaligned
// starts and in place.
func TestFloat32LoopsBitExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -1e-40}
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 3)
			if rng.IntN(9) == 0 {
				x[i] = specials[rng.IntN(len(specials))]
			}
		}
		return x
	}
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
	}
	type vv struct {
		name string
		op   kernels.BinaryOp
		f    func(a, b float32) float32
	}
	ops := []vv{
		{"add", kernels.Add, func(a, b float32) float32 { return a + b }},
		{"sub", kernels.Sub, func(a, b float32) float32 { return a - b }},
		{"mul", kernels.Mul, func(a, b float32) float32 { return a * b }},
		{"div", kernels.Div, func(a, b float32) float32 { return a / b }},
	}
	for _, n := range []int{31, 32, 33, 64, 95, 100, 1023, 4096} {
		for _, off := range []int{0, 1, 3} {
			a, b := fill(n + off)[off:], fill(n + off)[off:]
			s := float32(rng.NormFloat64())
			for _, o := range ops {
				got := kernels.Binary(o.op, make([]float32, n), a, b)
				vs := kernels.BinaryScalar(o.op, make([]float32, n), a, s)
				sv := kernels.ScalarBinary(o.op, make([]float32, n), s, b)
				inplace := kernels.Binary(o.op, append([]float32(nil), a...), append([]float32(nil), a...), b)
				for i := 0; i < n; i++ {
					if w := o.f(a[i], b[i]); !same(got[i], w) || !same(inplace[i], w) {
						t.Fatalf("%s n=%d off=%d [%d]: %v %s %v = %v (in place %v), want %v", o.name, n, off, i, a[i], o.name, b[i], got[i], inplace[i], w)
					}
					if w := o.f(a[i], s); !same(vs[i], w) {
						t.Fatalf("%s vector-scalar n=%d [%d]: got %v, want %v", o.name, n, i, vs[i], w)
					}
					if w := o.f(s, b[i]); !same(sv[i], w) {
						t.Fatalf("%s scalar-vector n=%d [%d]: got %v, want %v", o.name, n, i, sv[i], w)
					}
				}
			}
			// the gates' gradients: a as the sigmoid's or tanh's output y,
			// b as the upstream gradient, and in place over either
			sg := kernels.SigmoidGrad(make([]float32, n), a, b)
			tg := kernels.TanhGrad(make([]float32, n), a, b)
			sgy := kernels.SigmoidGrad(append([]float32(nil), a...), append([]float32(nil), a...), b)
			tgg := kernels.TanhGrad(append([]float32(nil), b...), a, append([]float32(nil), b...))
			for i := 0; i < n; i++ {
				ws, wt := b[i]*a[i]*(1-a[i]), b[i]*(1-a[i]*a[i])
				if !same(sg[i], ws) || !same(sgy[i], ws) {
					t.Fatalf("sigmoid grad n=%d off=%d [%d]: y %v g %v: got %v (in place %v), want %v", n, off, i, a[i], b[i], sg[i], sgy[i], ws)
				}
				if !same(tg[i], wt) || !same(tgg[i], wt) {
					t.Fatalf("tanh grad n=%d off=%d [%d]: y %v g %v: got %v (in place %v), want %v", n, off, i, a[i], b[i], tg[i], tgg[i], wt)
				}
			}
			relu := kernels.Relu(make([]float32, n), a)
			grad := kernels.ReluGrad(make([]float32, n), a, b)
			sq := kernels.Sqrt(make([]float32, n), a)
			for i := 0; i < n; i++ {
				wr := a[i]
				if wr <= 0 {
					wr = 0
				}
				wg := float32(0)
				if a[i] > 0 {
					wg = b[i]
				}
				ws := float32(math.Sqrt(float64(a[i])))
				if !same(relu[i], wr) && !(relu[i] == 0 && wr == 0) {
					t.Fatalf("relu n=%d [%d]: relu(%v) = %v, want %v", n, i, a[i], relu[i], wr)
				}
				if !same(grad[i], wg) && !(grad[i] == 0 && wg == 0) {
					t.Fatalf("relu grad n=%d [%d]: x %v g %v: got %v, want %v", n, i, a[i], b[i], grad[i], wg)
				}
				if !same(sq[i], ws) {
					t.Fatalf("sqrt n=%d [%d]: sqrt(%v) = %v, want %v", n, i, a[i], sq[i], ws)
				}
			}
		}
	}
}
