package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

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
	causal          bool
	mask            bool    // a random mask, with one row fully masked
	rate            float64 // dropout
	sharp           float32 // q is multiplied by this (0: 1), for peaked softmaxes
}

func (c attnCase) params() kernels.AttentionParams {
	return kernels.AttentionParams{B: c.b, Tq: c.tq, Tk: c.tk, H: c.h, D: c.d, Scale: 1 / math.Sqrt(float64(c.d)),
		Causal: c.causal, DropoutRate: c.rate, DropoutSeed: 0x5eed, DropoutStep: 3}
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
	{name: "Tq33/Tk7/causal", b: 1, tq: 33, tk: 7, h: 3, d: 32, causal: true}, // rows 0..25 see no key
	{name: "Tq130/Tk33/mask", b: 1, tq: 130, tk: 33, h: 2, d: 64, mask: true},
	{name: "Tq33/Tk300/causal/dropout", b: 1, tq: 33, tk: 300, h: 1, d: 32, causal: true, rate: 0.5},
	{name: "T7/D1", b: 3, tq: 7, tk: 7, h: 1, d: 1},
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
					vis := (p.Mask == nil || p.Mask[(b*Tq+i)*Tk+j] != 0) && (!p.Causal || j <= i+Tk-Tq)
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

// TestAttention compares the float32 kernels (tiled: assembly row
// operations and Sgemm's micro-kernel) and the float64 row loop with the
// naive formula on odd sizes, causal and not, masks, Tq != Tk and dropout.
func TestAttention(t *testing.T) {
	for ci, c := range attnCases {
		t.Run(c.name, func(t *testing.T) {
			checkAttnCase(t, c, uint64(100+ci))

			// float64: the row loop, to rounding
			x := newAttnData(c, uint64(100+ci))
			want := attnReference(x)
			p := x.p
			q, k, v, do := f64(x.q), f64(x.k), f64(x.v), f64(x.do)
			o, lse := make([]float64, len(q)), make([]float64, p.B*p.H*p.Tq)
			dq, dk, dv := make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(k))
			kernels.AttentionForward(o, lse, q, k, v, p, nil)
			kernels.AttentionBackward(dq, dk, dv, do, o, lse, q, k, v, p, nil)
			const tol64 = 1e-12
			checkAttnClose(t, "float64 o", o, want.o, want.oMag, tol64)
			checkAttnClose(t, "float64 lse", lse, want.lse, nil, tol64)
			checkAttnClose(t, "float64 dq", dq, want.dq, want.dqMag, tol64)
			checkAttnClose(t, "float64 dk", dk, want.dk, want.dkMag, tol64)
			checkAttnClose(t, "float64 dv", dv, want.dv, want.dvMag, tol64)
		})
	}
}

// TestAttentionTiers runs cases on every micro-kernel tier and row
// implementation this CPU has (AVX-512, AVX2, Go).
func TestAttentionTiers(t *testing.T) {
	cases := []attnCase{attnCases[6], attnCases[9], attnCases[13]}
	for _, tier := range kernels.GemmTierNames() {
		for _, rows := range kernels.AttentionRowNames() {
			t.Run(tier+"/"+rows, func(t *testing.T) {
				defer kernels.UseGemmTier(tier)()
				defer kernels.UseAttentionRows(rows)()
				for ci, c := range cases {
					t.Run(c.name, func(t *testing.T) { checkAttnCase(t, c, uint64(200+ci)) })
				}
			})
		}
	}
}

// TestAttentionFullyMasked checks the stated convention: a row that sees no
// key has o = 0, lse = -Inf and a dq row of exactly 0, and adds nothing to
// dk and dv.
func TestAttentionFullyMasked(t *testing.T) {
	c := attnCase{name: "masked", b: 2, tq: 9, tk: 40, h: 2, d: 8, mask: true}
	x := newAttnData(c, 5)
	// batch 1: every row masked
	clear(x.p.Mask[c.tq*c.tk:])
	o, lse, dq, dk, dv := runAttn32(x, 0)
	p := x.p
	for b := 0; b < p.B; b++ {
		for i := 0; i < p.Tq; i++ {
			if b == 0 && i != 1 {
				continue // batch 0: only row 1 is fully masked
			}
			for h := 0; h < p.H; h++ {
				if l := lse[(b*p.H+h)*p.Tq+i]; !math.IsInf(float64(l), -1) {
					t.Errorf("lse[b=%d, h=%d, i=%d] = %v, want -Inf", b, h, i, l)
				}
				for d := 0; d < p.D; d++ {
					at := ((b*p.Tq+i)*p.H+h)*p.D + d
					if o[at] != 0 || dq[at] != 0 || math.Signbit(float64(o[at])) {
						t.Fatalf("b=%d i=%d h=%d d=%d: got o %v, dq %v, want +0, 0", b, i, h, d, o[at], dq[at])
					}
				}
			}
		}
	}
	for i := c.tk * c.h * c.d; i < len(dk); i++ { // batch 1's keys get nothing
		if dk[i] != 0 || dv[i] != 0 {
			t.Fatalf("dk[%d] = %v, dv[%d] = %v, want 0 (no query sees the key)", i, dk[i], i, dv[i])
		}
	}
	want := attnReference(x)
	checkAttnClose(t, "dk", dk, want.dk, want.dkMag, attnTol)
	checkAttnClose(t, "dv", dv, want.dv, want.dvMag, attnTol)
}

// TestAttentionThreads checks that the float32 results are the same bits on
// 1, 2 and 3 threads, with one key-block group per (b, h) and with several
// (whose dq parts are added after the pool is done).
func TestAttentionThreads(t *testing.T) {
	cases := []attnCase{
		{name: "groups", b: 1, tq: 200, tk: 300, h: 2, d: 32, causal: true, mask: true, rate: 0.2},
		{name: "one group", b: 4, tq: 130, tk: 130, h: 4, d: 16, causal: true},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newAttnData(c, uint64(300+ci))
			if g := kernels.AttentionGroups(x.p); (g > 1) != (c.name == "groups") {
				t.Fatalf("%d key-block groups: the case does not test what it says", g)
			}
			var first [5][]float32
			for _, threads := range []int{1, 2, 3} {
				restore := kernels.UseThreads(threads)
				o, lse, dq, dk, dv := runAttn32(x, threads)
				restore()
				got := [5][]float32{o, lse, dq, dk, dv}
				if first[0] == nil {
					first = got
					continue
				}
				for n, name := range []string{"o", "lse", "dq", "dk", "dv"} {
					for i := range got[n] {
						if math.Float32bits(got[n][i]) != math.Float32bits(first[n][i]) {
							t.Fatalf("%d threads: %s[%d] = %v, on 1 thread %v", threads, name, i, got[n][i], first[n][i])
						}
					}
				}
			}
		})
	}
}

// TestAttentionNoAllocs checks that both passes allocate nothing with
// their workspace given, on the pool (2 threads) and on the caller alone.
func TestAttentionNoAllocs(t *testing.T) {
	c := attnCase{b: 2, tq: 130, tk: 130, h: 2, d: 32, causal: true, mask: true, rate: 0.1}
	x := newAttnData(c, 9)
	p := x.p
	o, lse := make([]float32, len(x.q)), make([]float32, p.B*p.H*p.Tq)
	dq, dk, dv := make([]float32, len(x.q)), make([]float32, len(x.k)), make([]float32, len(x.k))
	for _, threads := range []int{1, 2} {
		restore := kernels.UseThreads(threads)
		fw := make([]float32, kernels.AttentionForwardWorkspace(p, threads))
		bw := make([]float32, kernels.AttentionBackwardWorkspace(p, threads))
		fwd := func() { kernels.AttentionForward(o, lse, x.q, x.k, x.v, p, fw) }
		bwd := func() { kernels.AttentionBackward(dq, dk, dv, x.do, o, lse, x.q, x.k, x.v, p, bw) }
		fwd()
		bwd()
		if n := testing.AllocsPerRun(20, fwd); n != 0 {
			t.Errorf("%d threads: AttentionForward: %v allocations per call, want 0", threads, n)
		}
		if n := testing.AllocsPerRun(20, bwd); n != 0 {
			t.Errorf("%d threads: AttentionBackward: %v allocations per call, want 0", threads, n)
		}
		restore()
	}
}

// TestAttentionGradient checks the float64 backward pass against central
// differences of loss = Σ w⊙o (w random), with a causal mask, a boolean
// mask and dropout (the mask is a fixed function of the seed, so the loss
// is smooth in q, k, v).
func TestAttentionGradient(t *testing.T) {
	c := attnCase{b: 1, tq: 5, tk: 6, h: 2, d: 3, causal: true, mask: true, rate: 0.25}
	x := newAttnData(c, 21)
	p := x.p
	q, k, v := f64(x.q), f64(x.k), f64(x.v)
	w := testutil.RandFloats(rng(22), len(q))
	o, lse := make([]float64, len(q)), make([]float64, p.B*p.H*p.Tq)
	loss := func() float64 {
		kernels.AttentionForward(o, lse, q, k, v, p, nil)
		var s float64
		for i := range o {
			s += w[i] * o[i]
		}
		return s
	}
	loss()
	dq, dk, dv := make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(k))
	kernels.AttentionBackward(dq, dk, dv, w, o, lse, q, k, v, p, nil)
	for _, g := range []struct {
		name      string
		x, analyt []float64
	}{{"q", q, dq}, {"k", k, dk}, {"v", v, dv}} {
		num := testutil.NumericGrad(func([]float64) float64 { return loss() }, g.x, 1e-6)
		if e := testutil.RelErr(g.analyt, num); e > 1e-6 {
			t.Errorf("d%s: relative error %.3g against central differences, want <= 1e-6\nanalytic %v\nnumeric  %v", g.name, e, g.analyt, num)
		}
	}
}

// TestAttentionRowOps checks every implementation of the row operations
// against float64: e^x within 2 ulps (exactly 0 at -Inf, +Inf above the
// range, NaN for NaN), the sum, the maximum, ds, masks and dropout (as
// DropoutMask) exactly; every length from 0 to 40 (the assembly's partial last
// vector) and nothing written past n.
func TestAttentionRowOps(t *testing.T) {
	r := rng(31)
	specials := []float32{float32(math.Inf(-1)), -200, -103.9, -87.5, -87.3, -20, -1e-7, 0, 1e-7, 0.5, 80, 88.7, 89, 200, inf32}
	for _, name := range kernels.AttentionRowNames() {
		t.Run(name, func(t *testing.T) {
			for n := 0; n <= 40; n++ {
				x := make([]float32, n+8)
				for j := range x {
					x[j] = float32(-60*r.Float64() + 2)
				}
				if n > 0 {
					x[r.IntN(n)] = specials[n%len(specials)]
				}
				sub := float32(r.Float64())
				row := append([]float32(nil), x...)
				sum := kernels.AttentionRowExp(name, row[:n], sub)
				var want float64
				for j := 0; j < n; j++ {
					e := math.Exp(float64(x[j] - sub))
					want += float64(float32(e))
					got := float64(row[j])
					switch {
					case e > math.MaxFloat32:
						if !math.IsInf(got, 1) {
							t.Fatalf("n=%d: e^%v = %v, want +Inf", n, x[j]-sub, got)
						}
					case e < 0x1p-126:
						if got < 0 || math.Abs(got-e) > 0x1p-149 {
							t.Fatalf("n=%d: e^%v = %v, want %v (to a subnormal ulp)", n, x[j]-sub, got, e)
						}
					default:
						if ulps := math.Abs(got-e) / ulp32(e); ulps > 2 {
							t.Fatalf("n=%d: e^%v = %v, want %v (%.2f ulps)", n, x[j]-sub, got, e, ulps)
						}
					}
				}
				for j := n; j < len(x); j++ {
					if row[j] != x[j] {
						t.Fatalf("n=%d: exp wrote row[%d]", n, j)
					}
				}
				if !(math.Abs(float64(sum)-want) <= 1e-6*want) && !(math.IsInf(want, 1) && math.IsInf(float64(sum), 1)) {
					t.Fatalf("n=%d: sum %v, want %v", n, sum, want)
				}
				if n > 0 {
					mx := float32(math.Inf(-1))
					for _, v := range x[:n] {
						mx = max(mx, v)
					}
					if got := kernels.AttentionRowMax(name, x[:n]); got != mx {
						t.Fatalf("n=%d: max %v, want %v", n, got, mx)
					}
				}
				p, ds := testutil.RandFloat32s(r, n+8), testutil.RandFloat32s(r, n+8)
				got := append([]float32(nil), ds...)
				di := float32(r.Float64())
				kernels.AttentionRowDS(name, got[:n], p, di)
				for j := range ds {
					w := ds[j]
					if j < n {
						w = p[j] * (ds[j] - di)
					}
					if got[j] != w {
						t.Fatalf("n=%d: ds[%d] = %v, want %v", n, j, got[j], w)
					}
				}
			}
			// masks: -Inf where the mask is 0, nothing read or written past n
			for n := 0; n <= 40; n++ {
				x := testutil.RandFloat32s(r, n+8)
				m := make([]uint8, n)
				for j := range m {
					m[j] = uint8(r.IntN(3))
				}
				row := append([]float32(nil), x...)
				kernels.AttentionRowMask(name, row[:n], m)
				for j := range x {
					want := x[j]
					if j < n && m[j] == 0 {
						want = float32(math.Inf(-1))
					}
					if row[j] != want {
						t.Fatalf("n=%d: mask row[%d] = %v, want %v", n, j, row[j], want)
					}
				}
			}
			// dropout: DropoutMask's draws, from any element on
			for _, rate := range []float64{0.1, 0.5, 1} {
				for n := 0; n <= 40; n++ {
					e0 := r.IntN(1000)
					mask := kernels.DropoutMask(make([]float32, e0+n+8), 77, 5, rate)
					x := testutil.RandFloat32s(r, n+8)
					row := append([]float32(nil), x...)
					kernels.AttentionRowDrop(name, row[:n], 77, 5, rate, e0)
					for j := range x {
						want := x[j]
						if j < n {
							want = x[j] * mask[e0+j]
						}
						if row[j] != want {
							t.Fatalf("rate %v n=%d e0=%d: dropout row[%d] = %v, want %v", rate, n, e0, j, row[j], want)
						}
					}
				}
			}
			// NaN propagates through exp
			row := []float32{1, nan32, 2}
			if s := kernels.AttentionRowExp(name, row, 0); !isNaN32(row[1]) || !isNaN32(s) {
				t.Errorf("exp of NaN: row %v, sum %v, want NaN in both", row, s)
			}
		})
	}
}

// ulp32 returns the spacing of float32 values at |x| (a normal float32).
func ulp32(x float64) float64 {
	f := float32(math.Abs(x))
	return float64(math.Float32frombits(math.Float32bits(f)+1) - f)
}

// TestAttentionPanics checks the programmer errors.
func TestAttentionPanics(t *testing.T) {
	p := kernels.AttentionParams{B: 1, Tq: 4, Tk: 5, H: 2, D: 8, Scale: 1}
	q, k := make([]float32, 64), make([]float32, 80)
	o, lse := make([]float32, 64), make([]float32, 8)
	work := make([]float32, kernels.AttentionForwardWorkspace(p, 1))
	mustPanic(t, "len(k)", func() { kernels.AttentionForward(o, lse, q, q, k, p, work) })
	mustPanic(t, "len(lse)", func() { kernels.AttentionForward(o, lse[:7], q, k, k, p, work) })
	mustPanic(t, "work has", func() { kernels.AttentionForward(o, lse, q, k, k, p, work[:len(work)-1]) })
	bad := p
	bad.DropoutRate = 1.5
	mustPanic(t, "dropout rate", func() { kernels.AttentionForward(o, lse, q, k, k, bad, work) })
	bad = p
	bad.Mask = make([]uint8, 19)
	mustPanic(t, "len(Mask)", func() { kernels.AttentionForward(o, lse, q, k, k, bad, work) })
	bad = p
	bad.Tq = -1
	mustPanic(t, "negative size", func() { kernels.AttentionForward(o, lse, q, k, k, bad, work) })
	mustPanic(t, "len(dv)", func() {
		kernels.AttentionBackward(q, k, q, q, o, lse, q, k, k, p, make([]float32, kernels.AttentionBackwardWorkspace(p, 1)))
	})
}

// TestAttentionEmpty checks sizes of zero: no keys gives o = 0 and
// lse = -Inf; D = 0 gives lse = log(visible keys).
func TestAttentionEmpty(t *testing.T) {
	for _, p := range []kernels.AttentionParams{
		{B: 2, Tq: 3, Tk: 0, H: 2, D: 4, Scale: 1},
		{B: 2, Tq: 3, Tk: 5, H: 2, D: 0, Scale: 1, Causal: true},
		{B: 0, Tq: 3, Tk: 5, H: 2, D: 4, Scale: 1},
		{B: 1, Tq: 0, Tk: 5, H: 2, D: 4, Scale: 1},
	} {
		t.Run(fmt.Sprintf("B%d/Tq%d/Tk%d/D%d", p.B, p.Tq, p.Tk, p.D), func(t *testing.T) {
			nq, nk := p.B*p.Tq*p.H*p.D, p.B*p.Tk*p.H*p.D
			o, lse := make([]float32, nq), make([]float32, p.B*p.H*p.Tq)
			for i := range o {
				o[i] = 7
			}
			work := make([]float32, max(kernels.AttentionForwardWorkspace(p, 0), kernels.AttentionBackwardWorkspace(p, 0)))
			kernels.AttentionForward(o, lse, make([]float32, nq), make([]float32, nk), make([]float32, nk), p, work)
			for i, v := range o {
				if v != 0 {
					t.Fatalf("o[%d] = %v, want 0", i, v)
				}
			}
			for i, l := range lse {
				n := p.Tk
				if p.Causal {
					n = max(0, min(p.Tk, i%p.Tq+p.Tk-p.Tq+1))
				}
				want := math.Log(float64(n))
				if math.Abs(float64(l)-want) > 1e-6 {
					t.Fatalf("lse[%d] = %v, want %v", i, l, want)
				}
			}
			dq, dk, dv := make([]float32, nq), make([]float32, nk), make([]float32, nk)
			for i := range dk {
				dk[i], dv[i] = 7, 7
			}
			kernels.AttentionBackward(dq, dk, dv, o, o, lse, make([]float32, nq), make([]float32, nk), make([]float32, nk), p, work)
			for i := range dk {
				if dk[i] != 0 || dv[i] != 0 {
					t.Fatalf("dk[%d] = %v, dv[%d] = %v, want 0", i, dk[i], i, dv[i])
				}
			}
		})
	}
}

// TestAttentionLog checks the forward pass's logarithm of the row sums
// against math.Log over the float32 range.
func TestAttentionLog(t *testing.T) {
	r := rng(51)
	xs := []float32{1, 2, 0.5, math.Sqrt2, 1.4142135, 1.4142137, 3, 128, 2048, 0x1p-126, math.MaxFloat32, 0, 1e-45, inf32, nan32}
	for range 10000 {
		xs = append(xs, float32(math.Exp(r.Float64()*170-85)))
	}
	for _, x := range xs {
		got, want := kernels.AttentionLog(x), math.Log(float64(x))
		if got != want && !(math.Abs(got-want) <= 1e-9*max(1, math.Abs(want))) && !(got != got && want != want) {
			t.Fatalf("log %v = %v, want %v", x, got, want)
		}
	}
}
