package kerneltest

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// attnCase is one attention problem of the suite: sizes, options, and
// whether batch 0's row 1 is fully masked (mask).
type attnCase struct {
	b, tq, tk, h, d int
	causal, mask    bool
	topLeft         bool // CausalTopLeft
	rate            float64
}

// attnCases cover odd sizes (T = 1, 7, 33, 130; D = 1, 7, 32, 64), Tq != Tk
// with causal rows that see nothing, masks with a fully masked row, and
// dropout.
var attnCases = []attnCase{
	{b: 1, tq: 1, tk: 1, h: 1, d: 1},
	{b: 2, tq: 7, tk: 7, h: 2, d: 7, causal: true},
	{b: 1, tq: 33, tk: 130, h: 2, d: 32, mask: true},
	{b: 1, tq: 130, tk: 33, h: 1, d: 64, causal: true, mask: true, rate: 0.2},
	{b: 2, tq: 33, tk: 33, h: 3, d: 8, rate: 0.5},
	{b: 1, tq: 33, tk: 7, h: 2, d: 16, causal: true, topLeft: true},
}

// attnInputs returns the parameters and inputs of c: q and k in [-2, 2),
// v and do in [-1, 1), a mask attending with probability 0.7.
func attnInputs(seed uint64, c attnCase) (p kernels.AttentionParams, q, k, v, do []float32) {
	r := newRand(seed)
	nq, nk := c.b*c.tq*c.h*c.d, c.b*c.tk*c.h*c.d
	p = kernels.AttentionParams{B: c.b, Tq: c.tq, Tk: c.tk, H: c.h, D: c.d, Scale: 1 / math.Sqrt(float64(c.d)),
		Causal: c.causal, CausalTopLeft: c.topLeft, DropoutRate: c.rate, DropoutSeed: seed, DropoutStep: 1}
	q, k = uniform(r, nq, -2, 2), uniform(r, nk, -2, 2)
	v, do = uniform(r, nk, -1, 1), uniform(r, nq, -1, 1)
	if c.mask {
		p.Mask = make([]uint8, c.b*c.tq*c.tk)
		for i := range p.Mask {
			if r.Float64() < 0.7 {
				p.Mask[i] = 1
			}
		}
		if c.tq > 1 {
			clear(p.Mask[c.tk : 2*c.tk])
		}
	}
	return p, q, k, v, do
}

func (c attnCase) String() string {
	s := name("B%d/Tq%d/Tk%d/H%d/D%d", c.b, c.tq, c.tk, c.h, c.d)
	if c.causal {
		s += "/causal"
	}
	if c.topLeft {
		s += "-top-left"
	}
	if c.mask {
		s += "/mask"
	}
	if c.rate > 0 {
		s += name("/dropout%g", c.rate)
	}
	return s
}

// attnWorkspace returns work for the fast kernels' forward and backward
// passes on p with up to threads threads (0: the default pool's; the
// reference ignores it).
func attnWorkspace(p kernels.AttentionParams, threads int) []float32 {
	return make([]float32, max(kernels.AttentionForwardWorkspace(p, threads), kernels.AttentionBackwardWorkspace(p, threads)))
}

// attnScales are the magnitudes of the closeness rule (see the package
// comment): for each output element, the sum of the absolute values of its
// terms, in float64 from the reference's lse.
type attnScales struct{ o, dq, dk, dv []float64 }

func attnMagnitudes(p kernels.AttentionParams, q, k, v, do, lse []float32) attnScales {
	B, Tq, Tk, H, D := p.B, p.Tq, p.Tk, p.H, p.D
	s := attnScales{o: make([]float64, len(q)), dq: make([]float64, len(q)), dk: make([]float64, len(k)), dv: make([]float64, len(k))}
	var z []float64
	if p.DropoutRate > 0 {
		z = kernels.DropoutMask(make([]float64, B*H*Tq*Tk), p.DropoutSeed, p.DropoutStep, p.DropoutRate)
	}
	at := func(b, i, h, d, t int) int { return ((b*t+i)*H+h)*D + d }
	P, Z, dpAbs := make([]float64, Tk), make([]float64, Tk), make([]float64, Tk)
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for i := 0; i < Tq; i++ {
				l := float64(lse[(b*H+h)*Tq+i])
				var dAbs float64
				for j := 0; j < Tk; j++ {
					P[j], Z[j], dpAbs[j] = 0, 1, 0
					if z != nil {
						Z[j] = z[((b*H+h)*Tq+i)*Tk+j]
					}
					if (p.Mask != nil && p.Mask[(b*Tq+i)*Tk+j] == 0) || (p.Causal && !p.CausalTopLeft && j > i+Tk-Tq) || (p.Causal && p.CausalTopLeft && j > i) || math.IsInf(l, -1) {
						continue
					}
					var sc float64
					for d := 0; d < D; d++ {
						sc += float64(q[at(b, i, h, d, Tq)]) * float64(k[at(b, j, h, d, Tk)])
						dpAbs[j] += math.Abs(float64(do[at(b, i, h, d, Tq)]) * float64(v[at(b, j, h, d, Tk)]))
					}
					P[j] = math.Exp(p.Scale*sc - l)
					dAbs += P[j] * Z[j] * dpAbs[j]
				}
				for j := 0; j < Tk; j++ {
					ds := P[j] * (Z[j]*dpAbs[j] + dAbs)
					for d := 0; d < D; d++ {
						qi, kj := at(b, i, h, d, Tq), at(b, j, h, d, Tk)
						s.o[qi] += P[j] * Z[j] * math.Abs(float64(v[kj]))
						s.dv[kj] += P[j] * Z[j] * math.Abs(float64(do[qi]))
						s.dq[qi] += p.Scale * ds * math.Abs(float64(k[kj]))
						s.dk[kj] += p.Scale * ds * math.Abs(float64(q[qi]))
					}
				}
			}
		}
	}
	return s
}

func testAttentionForward(t *testing.T, f, ref AttentionFunc, threads int) {
	for i, c := range attnCases {
		where := c.String()
		p, q, k, v, _ := attnInputs(uint64(60+i), c)
		nq, rows := len(q), p.B*p.H*p.Tq
		want, wantLse := make([]float32, nq), make([]float32, rows)
		ref(want, wantLse, q, k, v, p, nil)
		o, l := newOut32(nq), newOut32(rows)
		qs, ks, vs := clone(q), clone(k), clone(v)
		got := f(o.dst(), l.dst(), q, k, v, p, attnWorkspace(p, threads))
		o.check(t, where, got)
		l.check(t, where+" lse", l.dst())
		unchanged(t, where, "q", qs, q)
		unchanged(t, where, "k", ks, k)
		unchanged(t, where, "v", vs, v)
		scales := attnMagnitudes(p, q, k, v, make([]float32, nq), wantLse)
		compare(t, where+" o", got, want, scales.o)
		compare(t, where+" lse", l.dst(), wantLse, nil)
	}
}

func testAttentionBackward(t *testing.T, f, ref AttentionGradFunc, fwd AttentionFunc, threads int) {
	for i, c := range attnCases {
		where := c.String()
		p, q, k, v, do := attnInputs(uint64(80+i), c)
		nq, nk, rows := len(q), len(k), p.B*p.H*p.Tq
		o, lse := make([]float32, nq), make([]float32, rows)
		fwd(o, lse, q, k, v, p, nil)
		wq, wk, wv := make([]float32, nq), make([]float32, nk), make([]float32, nk)
		ref(wq, wk, wv, do, o, lse, q, k, v, p, nil)
		dq, dk, dv := newOut32(nq), newOut32(nk), newOut32(nk)
		ins := [][]float32{do, o, lse, q, k, v}
		before := make([][]float32, len(ins))
		for n, x := range ins {
			before[n] = clone(x)
		}
		got := f(dq.dst(), dk.dst(), dv.dst(), do, o, lse, q, k, v, p, attnWorkspace(p, threads))
		dq.check(t, where, got)
		dk.check(t, where+" dk", dk.dst())
		dv.check(t, where+" dv", dv.dst())
		for n, what := range []string{"do", "o", "lse", "q", "k", "v"} {
			unchanged(t, where, what, before[n], ins[n])
		}
		scales := attnMagnitudes(p, q, k, v, do, lse)
		compare(t, where+" dq", got, wq, scales.dq)
		compare(t, where+" dk", dk.dst(), wk, scales.dk)
		compare(t, where+" dv", dv.dst(), wv, scales.dv)
	}
}
