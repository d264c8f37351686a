package kernels

import (
	"math"
	"unsafe"
)

// Attention: scaled dot-product attention over heads (Vaswani et al. 2017,
// "Attention Is All You Need", §3.2), computed without materializing the
// Tq×Tk probabilities. The forward pass keeps, per query row, the running
// maximum and sum of the softmax while it walks the keys block by block and
// saves only their log-sum-exp; the backward pass recomputes each block of
// probabilities from it (Rabe and Staats 2021, "Self-attention Does Not
// Need O(n²) Memory"; Dao et al. 2022, "FlashAttention", Algorithms 1 and
// 2, with the loop order of Dao 2023, "FlashAttention-2", §3.1: queries
// outside in the forward pass, keys outside in the backward pass).
//
// Layouts, row-major, as a dense projection reshaped to heads gives them
// (no transpose):
//
//	q, o, do, dq:  [B, Tq, H, D]
//	k, v, dk, dv:  [B, Tk, H, D]
//	lse:           [B, H, Tq]    log Σ_j e^(s_ij) over the visible keys of row i
//	Mask:          [B, Tq, Tk]   uint8, 1 = attend (Keras' attention_mask), shared by the heads
//
// For batch b, head h, query i and key j, with s_ij = Scale·q_i·k_j:
//
//	visible(i, j) = Mask[b, i, j] != 0 (when Mask is set) and, when Causal,
//	                j <= i + off
//	P_ij = e^(s_ij - lse_i) for visible j, 0 otherwise
//	o_i  = Σ_j P_ij·Z_ij·v_j
//
// The causal offset off is Tk - Tq, the bottom-right alignment of
// FlashAttention (2.1 on) and PyTorch's causal_lower_right: the last query
// sees every key, as a block of queries appended to a cache of Tk - Tq keys
// does. With CausalTopLeft it is 0, the alignment of Keras'
// use_causal_mask (band_part of a [T, S] matrix of ones) and PyTorch's
// is_causal. The two agree when Tq == Tk. A row with no visible key (fully
// masked, or a causal row with i + off < 0) has o_i = 0, lse_i = -Inf and
// contributes nothing to the gradients: its dq row is 0.
//
// Dropout on the probabilities (Z above, 1 where no dropout): Z_ij is 0
// with probability DropoutRate, else 1/(1-DropoutRate), and is a pure
// function of the seed, step and element, so the backward pass regenerates
// the forward pass's mask, as FlashAttention does: Z[b, h, i, j] is element
// ((b·H + h)·Tq + i)·Tk + j of DropoutMask(z, DropoutSeed, DropoutStep,
// DropoutRate) for a z of B·H·Tq·Tk elements. lse is computed before dropout.

// AttentionParams describes one attention call: its sizes and options.
type AttentionParams struct {
	B, Tq, Tk, H, D int // batch, query and key lengths, heads, head size

	// Scale multiplies the scores q·k; usually 1/√D.
	Scale float64
	// Causal hides from query i the keys j > i + Tk - Tq, or, with
	// CausalTopLeft, the keys j > i.
	Causal, CausalTopLeft bool
	// Mask, when not nil, is [B, Tq, Tk]: query i of batch b sees key j only
	// where Mask[b, i, j] != 0.
	Mask []uint8

	// DropoutRate in [0, 1] drops each probability with that probability
	// (0: no dropout), scaling the others by 1/(1-rate); DropoutSeed and
	// DropoutStep choose the mask (see the comment above).
	DropoutRate float64
	DropoutSeed uint64
	DropoutStep int64
}

// checkAttnForward panics unless p is valid (checkAttention) and the
// lengths of the forward pass's operands are those of p's layouts.
func checkAttnForward(fn string, p *AttentionParams, o, lse, q, k, v int) {
	nq, nk, rows := checkAttention(fn, p)
	checkLen(fn, "q", q, nq)
	checkLen(fn, "k", k, nk)
	checkLen(fn, "v", v, nk)
	checkLen(fn, "o", o, nq)
	checkLen(fn, "lse", lse, rows)
}

// checkAttnBackward is checkAttnForward for the backward pass's operands.
func checkAttnBackward(fn string, p *AttentionParams, dq, dk, dv, do, o, lse, q, k, v int) {
	checkAttnForward(fn, p, o, lse, q, k, v)
	nq, nk, _ := checkAttention(fn, p)
	checkLen(fn, "do", do, nq)
	checkLen(fn, "dq", dq, nq)
	checkLen(fn, "dk", dk, nk)
	checkLen(fn, "dv", dv, nk)
}

// checkAttention panics unless the sizes are non-negative and the options
// valid, and returns the lengths of a [B, Tq, H, D] tensor, a [B, Tk, H, D]
// tensor and lse.
func checkAttention(fn string, p *AttentionParams) (nq, nk, rows int) {
	if p.B < 0 || p.Tq < 0 || p.Tk < 0 || p.H < 0 || p.D < 0 {
		panicf("%s: negative size B=%d Tq=%d Tk=%d H=%d D=%d", fn, p.B, p.Tq, p.Tk, p.H, p.D)
	}
	if !(p.DropoutRate >= 0 && p.DropoutRate <= 1) {
		panicf("%s: dropout rate %v, want it in [0, 1]", fn, p.DropoutRate)
	}
	if p.Mask != nil {
		checkLen(fn, "Mask", len(p.Mask), p.B*p.Tq*p.Tk)
	}
	return p.B * p.Tq * p.H * p.D, p.B * p.Tk * p.H * p.D, p.B * p.H * p.Tq
}

// AttentionForwardOn sets o to the attention of q over k and v and lse to
// the log-sum-exp of each row's scores (the statistics AttentionBackward
// needs), as described above, and returns o. o and lse must not overlap
// the inputs.
//
// float32 (and types defined on it) runs the tiled kernel
// (attention_tiled.go): blocks of queries against blocks of keys with the
// products on Sgemm's micro-kernel and e^x in assembly, split over pool's
// threads by (b, h) and, when B·H is small, chunks of query blocks; work
// holds AttentionForwardWorkspace(p, n) floats for up to n threads (more
// threads than work has room for are not used). Its result does not
// depend on the number of threads; calls on one pool from several
// goroutines run one after another. Other types run the row loop of
// AttentionForwardRef, which needs no workspace (work may be nil); it is
// meant for gradient checks in float64. It allocates nothing. It panics if
// a size is negative, a length does not match or work is too small.
func AttentionForwardOn[T Float](pool *Pool, o, lse, q, k, v []T, p AttentionParams, work []T) []T {
	const fn = "AttentionForward"
	checkAttnForward(fn, &p, len(o), len(lse), len(q), len(k), len(v))
	var zero T
	if unsafe.Sizeof(zero) == 4 && attnTiled(&p) {
		attnForward32(pool, fn, float32s(o), float32s(lse), float32s(q), float32s(k), float32s(v), &p, float32s(work))
		return o
	}
	attnForwardRows(o, lse, q, k, v, &p)
	return o
}

// AttentionBackwardOn sets dq, dk and dv to the gradients of a loss
// through AttentionForward, given do = ∂loss/∂o and the forward pass's o and lse
// (and the same q, k, v and p), and returns dq. Each block of
// probabilities is recomputed from lse (Dao et al. 2022, Algorithm 2):
//
//	dV_j = Σ_i P_ij·Z_ij·do_i
//	dS_ij = P_ij·(Z_ij·do_i·v_j - Σ_d do_i·o_i)
//	dq_i = Scale·Σ_j dS_ij·k_j     dk_j = Scale·Σ_i dS_ij·q_i
//
// The outputs must not overlap the inputs or each other. float32 runs the
// tiled kernel, split over pool's threads by (b, h) and, when B·H is
// small, by groups of key blocks whose dq parts are added in a fixed order;
// work holds AttentionBackwardWorkspace(p, n) floats for up to n threads,
// and the result does not depend on the number of threads. Other types run
// a row-by-row loop that needs no workspace. It allocates nothing. It
// panics if a size is negative, a length does not match or work is too
// small.
func AttentionBackwardOn[T Float](pool *Pool, dq, dk, dv, do, o, lse, q, k, v []T, p AttentionParams, work []T) []T {
	const fn = "AttentionBackward"
	checkAttnBackward(fn, &p, len(dq), len(dk), len(dv), len(do), len(o), len(lse), len(q), len(k), len(v))
	var zero T
	if unsafe.Sizeof(zero) == 4 && attnTiled(&p) {
		attnBackward32(pool, fn, float32s(dq), float32s(dk), float32s(dv), float32s(do), float32s(o), float32s(lse),
			float32s(q), float32s(k), float32s(v), &p, float32s(work))
		return dq
	}
	attnBackwardRows(dq, dk, dv, do, o, lse, q, k, v, &p)
	return dq
}

// AttentionForwardRef is AttentionForward on the reference loop, in any
// Float: the definition the fast kernels are tested against (kerneltest).
// Row by row, it finds the maximum score over the visible keys, then sums
// e^(s - max) and the weighted values in T; it needs no workspace (work is
// ignored and may be nil) and runs on the calling goroutine.
func AttentionForwardRef[T Float](o, lse, q, k, v []T, p AttentionParams, work []T) []T {
	const fn = "AttentionForwardRef"
	checkAttnForward(fn, &p, len(o), len(lse), len(q), len(k), len(v))
	attnForwardRows(o, lse, q, k, v, &p)
	return o
}

// AttentionBackwardRef is AttentionBackward on the reference loop, in any
// Float: for each query row and visible key, P from lse, then the three
// gradients' terms, summed in T. work is ignored and may be nil.
func AttentionBackwardRef[T Float](dq, dk, dv, do, o, lse, q, k, v []T, p AttentionParams, work []T) []T {
	const fn = "AttentionBackwardRef"
	checkAttnBackward(fn, &p, len(dq), len(dk), len(dv), len(do), len(o), len(lse), len(q), len(k), len(v))
	attnBackwardRows(dq, dk, dv, do, o, lse, q, k, v, &p)
	return dq
}

// attnTiled reports whether the float32 call runs the tiled kernel: every
// size but D may be 0 there; D = 0 (scores all 0) runs the row loop.
func attnTiled(p *AttentionParams) bool { return p.D > 0 }

// AttentionForwardWorkspace returns the float32s of work AttentionForward
// needs in float32 with p's sizes to use up to threads threads (<= 0: the
// default pool's Threads(); an engine passes its own pool's). It does not
// depend on Mask or dropout.
func AttentionForwardWorkspace(p AttentionParams, threads int) int {
	if threads <= 0 {
		threads = defaultPool.Threads()
	}
	if !attnTiled(&p) {
		return 0
	}
	pl := newAttnPlan(&p)
	return attnAlign + threads*pl.fwdSlot
}

// AttentionBackwardWorkspace returns the float32s of work
// AttentionBackward needs in float32 with p's sizes to use up to threads
// threads (<= 0: the default pool's Threads(); an engine passes its own
// pool's).
func AttentionBackwardWorkspace(p AttentionParams, threads int) int {
	if threads <= 0 {
		threads = defaultPool.Threads()
	}
	if !attnTiled(&p) {
		return 0
	}
	pl := newAttnPlan(&p)
	return attnAlign + pl.bwdShared + threads*pl.bwdSlot
}

// attnDropout draws the dropout mask Z of the comment above.
type attnDropout struct {
	on        bool
	base      uint64  // the stream of (seed, step), as in DropoutMask
	threshold uint64  // dropped when the top 53 bits of the draw are below it
	keep      float32 // 1/(1-rate), or 0 when rate is 1
	keep64    float64
}

func newAttnDropout(p *AttentionParams) attnDropout {
	if p.DropoutRate == 0 {
		return attnDropout{}
	}
	d := attnDropout{on: true, threshold: uint64(p.DropoutRate * (1 << 53))}
	if p.DropoutRate < 1 {
		d.keep64 = 1 / (1 - p.DropoutRate)
		d.keep = float32(d.keep64)
	}
	d.base = mix64(p.DropoutSeed ^ mix64(uint64(p.DropoutStep)+0x9e3779b97f4a7c15))
	return d
}

// attnGamma is the Weyl increment of DropoutMask's draws.
const attnGamma = 0x9e3779b97f4a7c15

// z returns Z for element e of the [B, H, Tq, Tk] probabilities, in float64.
func (d *attnDropout) z(e int) float64 {
	if mix64(d.base+uint64(e)*attnGamma)>>11 < d.threshold {
		return 0
	}
	return d.keep64
}

// apply multiplies row[j] by Z for elements e0 + j with rows' drop.
func (d *attnDropout) apply(rows *attnRowOps, row []float32, e0 int) {
	rows.drop(row, d.base+uint64(e0)*attnGamma, d.threshold, d.keep)
}

// attnOffset returns the causal offset: query i sees keys j <= i + offset.
func attnOffset(p *AttentionParams) int {
	if p.CausalTopLeft {
		return 0
	}
	return p.Tk - p.Tq
}

// attnVisible returns how many of the keys [j0, j0+n) query i sees under
// the causal rule (all n without it); a Mask may hide some of them.
func attnVisible(p *AttentionParams, i, j0, n int) int {
	if !p.Causal {
		return n
	}
	return max(0, min(n, i+attnOffset(p)+1-j0))
}

// attnForwardRows is AttentionForward row by row in T: two passes over the
// keys per query (the maximum, then the sum and the output), no workspace.
func attnForwardRows[T Float](o, lse, q, k, v []T, p *AttentionParams) {
	ld, D := p.H*p.D, p.D
	drop := newAttnDropout(p)
	for b := 0; b < p.B; b++ {
		for h := 0; h < p.H; h++ {
			for i := 0; i < p.Tq; i++ {
				qi := q[(b*p.Tq+i)*ld+h*D:][:D]
				oi := o[(b*p.Tq+i)*ld+h*D:][:D]
				row := (b*p.H+h)*p.Tq + i
				n := attnVisible(p, i, 0, p.Tk)
				m := math.Inf(-1)
				for j := 0; j < n; j++ {
					if p.Mask == nil || p.Mask[(b*p.Tq+i)*p.Tk+j] != 0 {
						m = max(m, p.Scale*float64(dot(qi, k[(b*p.Tk+j)*ld+h*D:][:D])))
					}
				}
				clear(oi)
				if math.IsInf(m, -1) {
					lse[row] = T(m)
					continue
				}
				var l float64
				for j := 0; j < n; j++ {
					if p.Mask != nil && p.Mask[(b*p.Tq+i)*p.Tk+j] == 0 {
						continue
					}
					e := math.Exp(p.Scale*float64(dot(qi, k[(b*p.Tk+j)*ld+h*D:][:D])) - m)
					l += e
					if drop.on {
						e *= drop.z(row*p.Tk + j)
					}
					axpy(oi, T(e), v[(b*p.Tk+j)*ld+h*D:][:D])
				}
				for d := range oi {
					oi[d] = T(float64(oi[d]) / l)
				}
				lse[row] = T(m + math.Log(l))
			}
		}
	}
}

// attnBackwardRows is AttentionBackward row by row in T.
func attnBackwardRows[T Float](dq, dk, dv, do, o, lse, q, k, v []T, p *AttentionParams) {
	ld, D := p.H*p.D, p.D
	drop := newAttnDropout(p)
	clear(dk)
	clear(dv)
	for b := 0; b < p.B; b++ {
		for h := 0; h < p.H; h++ {
			for i := 0; i < p.Tq; i++ {
				off := (b*p.Tq+i)*ld + h*D
				qi, doi, dqi := q[off:][:D], do[off:][:D], dq[off:][:D]
				row := (b*p.H+h)*p.Tq + i
				clear(dqi)
				l := float64(lse[row])
				if math.IsInf(l, -1) {
					continue
				}
				di := dot(doi, o[off:][:D])
				n := attnVisible(p, i, 0, p.Tk)
				for j := 0; j < n; j++ {
					if p.Mask != nil && p.Mask[(b*p.Tq+i)*p.Tk+j] == 0 {
						continue
					}
					kOff := (b*p.Tk+j)*ld + h*D
					kj, vj := k[kOff:][:D], v[kOff:][:D]
					pij := T(math.Exp(p.Scale*float64(dot(qi, kj)) - l))
					z := T(1)
					if drop.on {
						z = T(drop.z(row*p.Tk + j))
					}
					axpy(dv[kOff:][:D], pij*z, doi)
					ds := pij * (z*dot(doi, vj) - di) * T(p.Scale)
					axpy(dqi, ds, kj)
					axpy(dk[kOff:][:D], ds, qi)
				}
			}
		}
	}
}
