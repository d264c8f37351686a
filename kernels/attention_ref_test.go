package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// The attention tests' problems and the naive formula they are checked
// against (attention_test.go).

// attnTol is the tolerance of the float32 attention kernels against the
// float64 formula: |got - want| <= attnTol·max(1, S), where S is the sum of
// the absolute values of the terms that make up the element (for o_i,
// Σ_j P_ij·Z_ij·|v_j|; for the gradients, the same with |dS| bounded by
// P·(|dP| + |Di|) term by term). It is the forward error bound of a float32
// sum with room for e^x's few ulps and the rounding of the scores: a
// blocked or reordered sum passes, a wrong or missing term does not.
const attnTol = 1e-5

// attnCase is one attention problem of the tests.
type attnCase struct {
	name            string
	b, tq, tk, h, d int
	causal, topLeft bool
	mask            bool    // a random mask, with one row fully masked
	rate            float64 // dropout
	sharp           float32 // q is multiplied by this (0: 1), for peaked softmaxes
	scale           float64 // Scale (0: 1/√D)
}

func (c attnCase) params() kernels.AttentionParams {
	scale := c.scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(c.d))
	}
	return kernels.AttentionParams{B: c.b, Tq: c.tq, Tk: c.tk, H: c.h, D: c.d, Scale: scale,
		Causal: c.causal, CausalTopLeft: c.topLeft, DropoutRate: c.rate, DropoutSeed: 0x5eed, DropoutStep: 3}
}

var attnCases = []attnCase{
	{name: "T1", b: 1, tq: 1, tk: 1, h: 1, d: 1},
	{name: "T7/D8/causal", b: 2, tq: 7, tk: 7, h: 2, d: 8, causal: true},
	{name: "T33/D32", b: 1, tq: 33, tk: 33, h: 4, d: 32},
	{name: "T33/D32/mask", b: 2, tq: 33, tk: 33, h: 3, d: 32, mask: true},
	{name: "T130/D64/causal", b: 1, tq: 130, tk: 130, h: 2, d: 64, causal: true},
	{name: "T130/D32/mask/sharp", b: 2, tq: 130, tk: 130, h: 1, d: 32, mask: true, sharp: 8},
	{name: "T130/D8/causal/mask/dropout", b: 1, tq: 130, tk: 130, h: 2, d: 8, causal: true, mask: true, rate: 0.1},
	{name: "T33/D32/dropout", b: 2, tq: 33, tk: 33, h: 2, d: 32, rate: 0.3},
	{name: "Tq7/Tk33/causal", b: 2, tq: 7, tk: 33, h: 2, d: 8, causal: true},
	{name: "Tq33/Tk7/causal", b: 1, tq: 33, tk: 7, h: 3, d: 32, causal: true},                        // rows 0..25 see no key
	{name: "Tq7/Tk33/causal-top-left", b: 2, tq: 7, tk: 33, h: 2, d: 8, causal: true, topLeft: true}, // keys 7.. unseen
	{name: "Tq130/Tk33/causal-top-left/mask", b: 1, tq: 130, tk: 33, h: 2, d: 32, causal: true, topLeft: true, mask: true},
	{name: "Tq130/Tk33/mask", b: 1, tq: 130, tk: 33, h: 2, d: 64, mask: true},
	{name: "Tq33/Tk300/causal/dropout", b: 1, tq: 33, tk: 300, h: 1, d: 32, causal: true, rate: 0.5},
	{name: "T7/D1", b: 3, tq: 7, tk: 7, h: 1, d: 1},
	{name: "T33/D8/negative-scale/causal", b: 1, tq: 33, tk: 33, h: 2, d: 8, causal: true, scale: -0.7},
	{name: "T33/D65/causal", b: 1, tq: 33, tk: 33, h: 2, d: 65, causal: true, sharp: 3},
	{name: "B4H4/T33/D16/causal", b: 4, tq: 33, tk: 33, h: 4, d: 16, causal: true},
}

// attnData is the inputs of one case: q, k, v, do (and p's mask).
type attnData struct {
	p           kernels.AttentionParams
	q, k, v, do []float32
}

func newAttnData(c attnCase, seed uint64) attnData {
	r := rng(seed)
	p := c.params()
	nq, nk := c.b*c.tq*c.h*c.d, c.b*c.tk*c.h*c.d
	x := attnData{p: p, q: randScaled(r, nq, 2), k: randScaled(r, nk, 2), v: testutil.RandFloat32s(r, nk), do: testutil.RandFloat32s(r, nq)}
	if c.sharp != 0 {
		for i := range x.q {
			x.q[i] *= c.sharp
		}
	}
	if c.mask {
		m := make([]uint8, c.b*c.tq*c.tk)
		for i := range m {
			if r.Float64() < 0.7 {
				m[i] = 1
			}
		}
		// row 1 of batch 0 sees nothing, row 2 only its last key
		if c.tq > 2 {
			clear(m[c.tk : 2*c.tk])
			clear(m[2*c.tk : 3*c.tk])
			m[3*c.tk-1] = 1
		}
		x.p.Mask = m
	}
	return x
}

func randScaled(r *rand.Rand, n int, s float32) []float32 {
	x := testutil.RandFloat32s(r, n)
	for i := range x {
		x[i] *= s
	}
	return x
}

// attnRef is the naive formula in float64 with the probabilities
// materialized, and the magnitudes of attnTol.
type attnRef struct {
	o, lse, dq, dk, dv        []float64
	oMag, dqMag, dkMag, dvMag []float64
}

// attnReference computes the forward and backward passes of x by the
// definition: S = Scale·QKᵀ, P = softmax over the visible keys (0 where
// none is), O = (P⊙Z)V, and for the gradients dP = (dO·Vᵀ)⊙Z,
// dS = P⊙(dP - rowsum(P⊙dP)) (the softmax Jacobian, not the Di shortcut
// of the kernels), dQ = Scale·dS·K, dK = Scale·dSᵀ·Q, dV = (P⊙Z)ᵀ·dO.
// Z comes from kernels.DropoutMask over the [B, H, Tq, Tk] probabilities.
func attnReference(x attnData) attnRef {
	p := x.p
	B, Tq, Tk, H, D := p.B, p.Tq, p.Tk, p.H, p.D
	nq, nk := B*Tq*H*D, B*Tk*H*D
	r := attnRef{o: make([]float64, nq), lse: make([]float64, B*H*Tq), dq: make([]float64, nq),
		dk: make([]float64, nk), dv: make([]float64, nk), oMag: make([]float64, nq),
		dqMag: make([]float64, nq), dkMag: make([]float64, nk), dvMag: make([]float64, nk)}
	var z []float64
	if p.DropoutRate > 0 {
		z = kernels.DropoutMask(make([]float64, B*H*Tq*Tk), p.DropoutSeed, p.DropoutStep, p.DropoutRate)
	}
	qi := func(b, i, h, d int) int { return ((b*Tq+i)*H+h)*D + d }
	ki := func(b, j, h, d int) int { return ((b*Tk+j)*H+h)*D + d }
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			P := make([][]float64, Tq)
			Z := make([][]float64, Tq)
			for i := 0; i < Tq; i++ {
				P[i], Z[i] = make([]float64, Tk), make([]float64, Tk)
				s := make([]float64, Tk)
				mx := math.Inf(-1)
				for j := 0; j < Tk; j++ {
					Z[i][j] = 1
					if z != nil {
						Z[i][j] = z[((b*H+h)*Tq+i)*Tk+j]
					}
					vis := (p.Mask == nil || p.Mask[(b*Tq+i)*Tk+j] != 0) && (!p.Causal || j <= i+causalOffset(p))
					if !vis {
						s[j] = math.Inf(-1)
						continue
					}
					for d := 0; d < D; d++ {
						s[j] += float64(x.q[qi(b, i, h, d)]) * float64(x.k[ki(b, j, h, d)])
					}
					s[j] *= p.Scale
					mx = max(mx, s[j])
				}
				row := (b*H+h)*Tq + i
				if math.IsInf(mx, -1) {
					r.lse[row] = mx
					continue
				}
				var sum float64
				for j := range s {
					sum += math.Exp(s[j] - mx)
				}
				for j := range s {
					P[i][j] = math.Exp(s[j]-mx) / sum
				}
				r.lse[row] = mx + math.Log(sum)
			}
			for i := 0; i < Tq; i++ {
				// forward
				for j := 0; j < Tk; j++ {
					pz := P[i][j] * Z[i][j]
					for d := 0; d < D; d++ {
						v := float64(x.v[ki(b, j, h, d)])
						r.o[qi(b, i, h, d)] += pz * v
						r.oMag[qi(b, i, h, d)] += math.Abs(pz * v)
					}
				}
				// backward: dP, dS of row i
				dp, dpAbs := make([]float64, Tk), make([]float64, Tk)
				var pdp, dAbs float64
				for j := 0; j < Tk; j++ {
					for d := 0; d < D; d++ {
						t := float64(x.do[qi(b, i, h, d)]) * float64(x.v[ki(b, j, h, d)])
						dp[j] += t
						dpAbs[j] += math.Abs(t)
					}
					dp[j] *= Z[i][j]
					pdp += P[i][j] * dp[j]
					dAbs += P[i][j] * Z[i][j] * dpAbs[j]
				}
				for j := 0; j < Tk; j++ {
					ds := P[i][j] * (dp[j] - pdp)
					dsMag := P[i][j] * (Z[i][j]*dpAbs[j] + dAbs)
					pz := P[i][j] * Z[i][j]
					for d := 0; d < D; d++ {
						kv, qv, dov := float64(x.k[ki(b, j, h, d)]), float64(x.q[qi(b, i, h, d)]), float64(x.do[qi(b, i, h, d)])
						r.dq[qi(b, i, h, d)] += p.Scale * ds * kv
						r.dqMag[qi(b, i, h, d)] += p.Scale * dsMag * math.Abs(kv)
						r.dk[ki(b, j, h, d)] += p.Scale * ds * qv
						r.dkMag[ki(b, j, h, d)] += p.Scale * dsMag * math.Abs(qv)
						r.dv[ki(b, j, h, d)] += pz * dov
						r.dvMag[ki(b, j, h, d)] += math.Abs(pz * dov)
					}
				}
			}
		}
	}
	return r
}

// causalOffset is the stated rule: query i sees key j <= i + offset.
func causalOffset(p kernels.AttentionParams) int {
	if p.CausalTopLeft {
		return 0
	}
	return p.Tk - p.Tq
}

// checkAttnClose fails t unless |got - want| <= tol·max(1, mag) everywhere
// (infinities must match exactly).
func checkAttnClose[T kernels.Float](t *testing.T, what string, got []T, want, mag []float64, tol float64) {
	t.Helper()
	for i, w := range want {
		g := float64(got[i])
		if g == w {
			continue
		}
		m := 1.0
		if mag != nil {
			m = max(1, mag[i])
		} else {
			m = max(1, math.Abs(w))
		}
		if !(math.Abs(g-w) <= tol*m) {
			t.Fatalf("%s[%d]: got %v, want %v (|diff| %.3g > %g·%.3g)", what, i, g, w, math.Abs(g-w), tol, m)
		}
	}
}

// runAttn32 runs the float32 kernels on x with workspace for threads.
func runAttn32(x attnData, threads int) (o, lse, dq, dk, dv []float32) {
	p := x.p
	nq, nk := len(x.q), len(x.k)
	o, lse = make([]float32, nq), make([]float32, p.B*p.H*p.Tq)
	dq, dk, dv = make([]float32, nq), make([]float32, nk), make([]float32, nk)
	work := make([]float32, max(kernels.AttentionForwardWorkspace(p, threads), kernels.AttentionBackwardWorkspace(p, threads)))
	kernels.AttentionForward(o, lse, x.q, x.k, x.v, p, work)
	kernels.AttentionBackward(dq, dk, dv, x.do, o, lse, x.q, x.k, x.v, p, work)
	return
}

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// checkAttnCase compares the float32 kernels on c with the reference.
func checkAttnCase(t *testing.T, c attnCase, seed uint64) {
	t.Helper()
	x := newAttnData(c, seed)
	want := attnReference(x)
	o, lse, dq, dk, dv := runAttn32(x, 0)
	checkAttnClose(t, "o", o, want.o, want.oMag, attnTol)
	checkAttnClose(t, "lse", lse, want.lse, nil, attnTol)
	checkAttnClose(t, "dq", dq, want.dq, want.dqMag, attnTol)
	checkAttnClose(t, "dk", dk, want.dk, want.dkMag, attnTol)
	checkAttnClose(t, "dv", dv, want.dv, want.dvMag, attnTol)
}
