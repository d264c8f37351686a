package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
)

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

// TestAttentionSuite runs the shared suite (kerneltest) on the tiled
// float32 kernels on every micro-kernel tier and row implementation this
// CPU has, on pools of 1 and 3 threads (under the race detector, fewer:
// see poolThreads).
func TestAttentionSuite(t *testing.T) {
	for ti, tier := range kernels.GemmTierNames() {
		for ri, rows := range kernels.AttentionRowNames() {
			if raceEnabled && ri != ti {
				continue // under the race detector, each tier with its own row implementation
			}
			forEachPool(t, tier+"/"+rows, func(t *testing.T, p *kernels.Pool) {
				defer kernels.UseGemmTier(tier)()
				defer kernels.UseAttentionRows(rows)()
				on := onPool(p)
				kerneltest.Run(t, kerneltest.Impl{Name: "attention", Threads: on.Threads,
					AttentionForward: on.AttentionForward, AttentionBackward: on.AttentionBackward})
			})
		}
	}
}

// TestAttentionTiers runs cases on every micro-kernel tier and row
// implementation this CPU has (AVX-512, AVX2, Go).
func TestAttentionTiers(t *testing.T) {
	var cases []attnCase
	for _, c := range attnCases {
		switch c.name {
		case "T130/D8/causal/mask/dropout", "Tq33/Tk7/causal", "Tq130/Tk33/causal-top-left/mask", "T33/D65/causal":
			cases = append(cases, c)
		}
	}
	if len(cases) != 4 {
		t.Fatalf("found %d of the 4 cases", len(cases))
	}
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
					n = max(0, min(p.Tk, i%p.Tq+causalOffset(p)+1))
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
