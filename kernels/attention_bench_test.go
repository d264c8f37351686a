package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// attnBenchShapes are the sizes of issue 16: the reference GPT (4 heads of
// 32, T = 128, batch 32) and long contexts.
var attnBenchShapes = []struct{ b, h, t, d int }{
	{32, 4, 128, 32},
	{8, 4, 1024, 32},
	{8, 4, 2048, 32},
}

// attnFlops is the work of one forward pass counted as FlashAttention's
// benchmarks do: the two products, 4·B·H·Tq·Tk·D, halved when causal. The
// backward pass counts 2.5 times as much (five products, S recomputed).
func attnFlops(p kernels.AttentionParams) float64 {
	f := 4 * float64(p.B) * float64(p.H) * float64(p.Tq) * float64(p.Tk) * float64(p.D)
	if p.Causal {
		f /= 2
	}
	return f
}

// benchAttention times the forward (or backward) pass on every shape,
// causal and not (and, at T = 128, causal with dropout 0.1), on 1 and 2
// threads, and reports GFLOP/s.
func benchAttention(b *testing.B, backward bool) {
	for _, s := range attnBenchShapes {
		for _, mode := range []string{"causal", "full", "causal-dropout"} {
			if mode == "causal-dropout" && s.t != 128 {
				continue // dropout's cost is per probability: one size shows it
			}
			causal := mode != "full"
			for _, threads := range []int{1, 2} {
				name := fmt.Sprintf("B%dH%dT%dD%d/%s/%dT", s.b, s.h, s.t, s.d, mode, threads)
				b.Run(name, func(b *testing.B) {
					defer kernels.UseThreads(threads)()
					p := kernels.AttentionParams{B: s.b, Tq: s.t, Tk: s.t, H: s.h, D: s.d, Scale: 1 / math.Sqrt(float64(s.d)), Causal: causal}
					if mode == "causal-dropout" {
						p.DropoutRate, p.DropoutSeed = 0.1, 7
					}
					r := rng(41)
					n := s.b * s.t * s.h * s.d
					q, k, v, do := testutil.RandFloat32s(r, n), testutil.RandFloat32s(r, n), testutil.RandFloat32s(r, n), testutil.RandFloat32s(r, n)
					o, lse := make([]float32, n), make([]float32, s.b*s.h*s.t)
					dq, dk, dv := make([]float32, n), make([]float32, n), make([]float32, n)
					work := make([]float32, max(kernels.AttentionForwardWorkspace(p, threads), kernels.AttentionBackwardWorkspace(p, threads)))
					kernels.AttentionForward(o, lse, q, k, v, p, work)
					flops := attnFlops(p)
					run := func() { kernels.AttentionForward(o, lse, q, k, v, p, work) }
					if backward {
						flops *= 2.5
						run = func() { kernels.AttentionBackward(dq, dk, dv, do, o, lse, q, k, v, p, work) }
					}
					run()
					b.ResetTimer()
					for b.Loop() {
						run()
					}
					b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

func BenchmarkAttentionForward(b *testing.B)  { benchAttention(b, false) }
func BenchmarkAttentionBackward(b *testing.B) { benchAttention(b, true) }

// BenchmarkAttentionNaive is the formula composed from the package's other
// kernels, at the GPT's size, for comparison: q, k, v transposed to
// [B, H, T, D], per head S = Scale·QKᵀ and O = PV on Sgemm, the causal
// mask and Softmax over the materialized [T, T] block, o transposed back
// (forward); dP = dO·Vᵀ, dV = Pᵀ·dO, SoftmaxGrad, dQ = Scale·dS·K,
// dK = Scale·dSᵀ·Q (backward, from the saved P). GFLOP/s counts the same
// work as BenchmarkAttentionForward and Backward.
func BenchmarkAttentionNaive(b *testing.B) {
	s := attnBenchShapes[0]
	for _, pass := range []string{"forward", "backward"} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("B%dH%dT%dD%d/causal/%s/%dT", s.b, s.h, s.t, s.d, pass, threads), func(b *testing.B) {
				defer kernels.UseThreads(threads)()
				B, H, T, D := s.b, s.h, s.t, s.d
				p := kernels.AttentionParams{B: B, Tq: T, Tk: T, H: H, D: D, Scale: 1 / math.Sqrt(float64(D)), Causal: true}
				n := B * T * H * D
				r := rng(41)
				q, k, v, do := testutil.RandFloat32s(r, n), testutil.RandFloat32s(r, n), testutil.RandFloat32s(r, n), testutil.RandFloat32s(r, n)
				qh, kh, vh, doh, oh := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
				dqh, dkh, dvh := make([]float32, n), make([]float32, n), make([]float32, n)
				o, dq, dk, dv := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
				P, dP := make([]float32, B*H*T*T), make([]float32, T*T)
				toHeads, fromHeads := []int{0, 2, 1, 3}, []int{0, 2, 1, 3}
				shape, headShape := []int{B, T, H, D}, []int{B, H, T, D}
				scale := float32(p.Scale)
				negInf := float32(math.Inf(-1))
				forward := func() {
					kernels.Transpose(qh, q, shape, toHeads)
					kernels.Transpose(kh, k, shape, toHeads)
					kernels.Transpose(vh, v, shape, toHeads)
					for bh := 0; bh < B*H; bh++ {
						S := P[bh*T*T : (bh+1)*T*T]
						kernels.Sgemm(S, qh[bh*T*D:(bh+1)*T*D], kh[bh*T*D:(bh+1)*T*D], T, T, D, false, true, false)
						for i := 0; i < T; i++ {
							row := S[i*T : (i+1)*T]
							for j := range row {
								row[j] *= scale
								if j > i {
									row[j] = negInf
								}
							}
						}
						kernels.Softmax(S, S, T, T)
						kernels.Sgemm(oh[bh*T*D:(bh+1)*T*D], S, vh[bh*T*D:(bh+1)*T*D], T, D, T, false, false, false)
					}
					kernels.Transpose(o, oh, headShape, fromHeads)
				}
				backward := func() {
					kernels.Transpose(doh, do, shape, toHeads)
					for bh := 0; bh < B*H; bh++ {
						S := P[bh*T*T : (bh+1)*T*T]
						hq, hk, hv, hdo := qh[bh*T*D:(bh+1)*T*D], kh[bh*T*D:(bh+1)*T*D], vh[bh*T*D:(bh+1)*T*D], doh[bh*T*D:(bh+1)*T*D]
						kernels.Sgemm(dP, hdo, hv, T, T, D, false, true, false)
						kernels.Sgemm(dvh[bh*T*D:(bh+1)*T*D], S, hdo, T, D, T, true, false, false)
						kernels.SoftmaxGrad(dP, S, dP, T, T)
						for i := range dP {
							dP[i] *= scale
						}
						kernels.Sgemm(dqh[bh*T*D:(bh+1)*T*D], dP, hk, T, D, T, false, false, false)
						kernels.Sgemm(dkh[bh*T*D:(bh+1)*T*D], dP, hq, T, D, T, true, false, false)
					}
					kernels.Transpose(dq, dqh, headShape, fromHeads)
					kernels.Transpose(dk, dkh, headShape, fromHeads)
					kernels.Transpose(dv, dvh, headShape, fromHeads)
				}
				forward()
				flops, run := attnFlops(p), forward
				if pass == "backward" {
					flops, run = 2.5*flops, backward
				}
				run()
				b.ResetTimer()
				for b.Loop() {
					run()
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
