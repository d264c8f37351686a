package kernels

import "math"

// The tiled float32 attention backward pass (Dao et al. 2022, Algorithm 2;
// FlashAttention-2's order, keys outside). A unit is (b, h) and a group of
// key blocks; for each key block j of the group, with dK_j and dV_j
// accumulated in the slot, it walks the query blocks i that see it:
//
//	S = (Scale·Q_i)·K_jᵀ,  P = e^(S - lse_i)        [br, bc]   recomputed
//	dP = dO_i·V_jᵀ                                  [br, bc]
//	dS = P ⊙ (dP⊙Z - Di),  Di = rowsum(dO_i ⊙ O_i)             attnRows.ds
//	dV_j += (P⊙Z)ᵀ·dO_i,  dK_j += dSᵀ·(Scale·Q_i)   [bc, D]
//	dQ_i += dS·K_j                                  [br, D]    dq = Scale·dQ
//
// dQ of the whole (b, h) is accumulated in the slot too, so no two units
// write the same output: with one group per (b, h) the unit writes its dq
// rows; with more, each group writes its own part to the shared end of the
// workspace, and the parts are added in group order after the pool is
// done, so dq does not depend on which thread computed what.

// attnBwdBufs are the buffers of a backward slot.
type attnBwdBufs struct {
	qp, dop []float32 // Q_i (scaled) and dO_i as A panels [D][MR]
	qb, dob []float32 // Q_i (scaled) and dO_i as B panels [br][NR of td]
	kp, vt  []float32 // K_j and V_j as B panels [D][NR]
	kb      []float32 // K_j as B panels [bc][NR of td]
	s, dp   []float32 // P and dP, then dS, [br, ldS]
	pt, dst []float32 // (P⊙Z)ᵀ and dSᵀ as A panels [br][MR]
	dsp     []float32 // dS as A panels [bc][MR]
	dk, dv  []float32 // dK_j, dV_j accumulators [mk, dPad]
	dq      []float32 // dQ accumulator of the (b, h) [tqPad, dPad]
	di, z   []float32 // Di of every query; Z of one row
}

// bwdLayoutOn returns the backward slot layout over buf (nil: sizes only).
func (pl *attnPlan) bwdLayoutOn(buf []float32) (attnSlot, attnBwdBufs) {
	s := attnSlot{buf: buf}
	D, br := pl.p.D, pl.br
	var w attnBwdBufs
	w.qp, w.dop = s.take(pl.tqPad*D), s.take(pl.tqPad*D)
	w.qb, w.dob = s.take(pl.p.Tq*pl.dPad), s.take(pl.p.Tq*pl.dPad)
	w.kp, w.vt = s.take(pl.ldS*D), s.take(pl.ldS*D)
	w.kb = s.take(pl.bc * pl.dPad)
	w.s, w.dp = s.take(br*pl.ldS), s.take(br*pl.ldS)
	w.pt, w.dst = s.take(pl.mk*br), s.take(pl.mk*br)
	w.dsp = s.take(br * pl.bc)
	w.dk, w.dv = s.take(pl.mk*pl.dPad), s.take(pl.mk*pl.dPad)
	w.dq = s.take(pl.tqPad * pl.dPad)
	w.di, w.z = s.take(pl.p.Tq), s.take(pl.ldS)
	return s, w
}

func (pl *attnPlan) bwdLayout() attnSlot {
	s, _ := pl.bwdLayoutOn(nil)
	return s
}

// attnBackward32 is AttentionBackwardOn's tiled float32 path (D >= 1) on
// pool.
func attnBackward32(pool *Pool, fn string, dq, dk, dv, do, o, lse, q, k, v []float32, p *AttentionParams, work []float32) {
	if p.B == 0 || p.H == 0 {
		return
	}
	if p.Tq == 0 || p.Tk == 0 {
		clear(dq)
		clear(dk)
		clear(dv)
		return
	}
	pool.calls.attnMu.Lock()
	defer pool.calls.attnMu.Unlock()
	c := &pool.calls.attn
	defer c.reset()
	c.pl = newAttnPlan(p)
	pl := &c.pl
	work, slots := attnSlots(pool, fn, work, pl.bwdShared, pl.bwdSlot)
	c.rows, c.slot, c.work = attnRows, pl.bwdSlot, work[pl.bwdShared:]
	c.dq, c.dk, c.dv, c.do, c.o, c.lse, c.q, c.k, c.v = dq, dk, dv, do, o, lse, q, k, v
	if pl.groups > 1 {
		c.dq = work[:pl.bwdShared] // the groups' parts: [B, H, groups, Tq, D]
	}
	c.units = p.B * p.H * pl.groups
	c.next.Store(0)
	ParallelOn(pool, slots, attnBackwardPart, c)
	if pl.groups > 1 {
		attnSumGroups(dq, c.dq, pl)
	}
}

// attnSumGroups sets dq = Scale·Σ_g part_g, adding the groups' parts in
// order.
func attnSumGroups(dq, parts []float32, pl *attnPlan) {
	p := &pl.p
	D, G := p.D, pl.groups
	for bh := 0; bh < p.B*p.H; bh++ {
		b, h := bh/p.H, bh%p.H
		for i := 0; i < p.Tq; i++ {
			d := dq[(b*p.Tq+i)*pl.ld+h*D:][:D]
			copy(d, parts[(bh*G*p.Tq+i)*D:][:D])
			for g := 1; g < G; g++ {
				for x, v := range parts[((bh*G+g)*p.Tq+i)*D:][:D] {
					d[x] += v
				}
			}
			for x := range d {
				d[x] *= pl.scale
			}
		}
	}
}

// attnBackwardPart computes units on slot part until none is left.
func attnBackwardPart(arg any, part int) {
	c := arg.(*attnState)
	_, w := c.pl.bwdLayoutOn(c.slotBuf(part))
	for {
		u, ok := c.claim()
		if !ok {
			return
		}
		c.backwardUnit(&w, u)
	}
}

// backwardUnit computes unit u: (b, h) = u mod B·H and key-block group
// u / B·H (the first groups, which more queries see when causal, first).
func (c *attnState) backwardUnit(w *attnBwdBufs, u int) {
	pl, p := &c.pl, &c.pl.p
	ts, td, mr, ldS, dPad := &pl.ts, &pl.td, pl.mr, pl.ldS, pl.dPad
	bh := u % (p.B * p.H)
	b, h, g := bh/p.H, bh%p.H, u/(p.B*p.H)
	D, ld := p.D, pl.ld
	off := attnOffset(p)

	// Di = rowsum(dO ⊙ O) for every query of (b, h), and its query blocks
	// packed once
	di := w.di[:p.Tq]
	for i := range di {
		r := (b*p.Tq+i)*ld + h*D
		di[i] = dot(c.do[r:r+D], c.o[r:r+D])
	}
	for i0 := 0; i0 < p.Tq; i0 += pl.br {
		qb := min(pl.br, p.Tq-i0)
		qOff := (b*p.Tq+i0)*ld + h*D
		qp, qbp := w.qp[i0*D:], w.qb[i0*dPad:]
		attnPackRows(qp, c.q[qOff:], ld, qb, D, mr, ts.scatterA)
		attnScale(qp[:roundUp(qb, mr)*D], pl.scale)
		attnPackRows(w.dop[i0*D:], c.do[qOff:], ld, qb, D, mr, ts.scatterA)
		attnPackCols(qbp, c.q[qOff:], ld, qb, D, td.nr, td.gatherB)
		attnScale(qbp[:qb*dPad], pl.scale)
		attnPackCols(w.dob[i0*dPad:], c.do[qOff:], ld, qb, D, td.nr, td.gatherB)
	}
	clear(w.dq[:pl.tqPad*dPad])
	for kj := pl.kBlocks * g / pl.groups; kj < pl.kBlocks*(g+1)/pl.groups; kj++ {
		j0 := kj * pl.bc
		kb := min(pl.bc, p.Tk-j0)
		mk := roundUp(kb, mr)
		kOff := (b*p.Tk+j0)*ld + h*D
		attnPackRows(w.kp, c.k[kOff:], ld, kb, D, ts.nr, ts.scatterB)
		attnPackRows(w.vt, c.v[kOff:], ld, kb, D, ts.nr, ts.scatterB)
		attnPackCols(w.kb, c.k[kOff:], ld, kb, D, td.nr, td.gatherB)
		clear(w.dk[:mk*dPad])
		clear(w.dv[:mk*dPad])
		qStart := 0
		if p.Causal {
			qStart = max(0, j0-off) / pl.br // the first block with a query i + off >= j0
		}
		for qi := qStart; qi < pl.qBlocks; qi++ {
			i0 := qi * pl.br
			qb := min(pl.br, p.Tq-i0)
			mp := roundUp(qb, mr)
			diag := attnNoDiag
			if p.Causal {
				diag = i0 + off - j0
			}
			attnProduct(ts, w.s, ldS, w.qp[i0*D:], w.kp, mp, kb, D, false, diag)
			attnProduct(ts, w.dp, ldS, w.dop[i0*D:], w.vt, mp, kb, D, false, diag)
			for r := 0; r < qb; r++ {
				i := i0 + r
				row, drow := w.s[r*ldS:r*ldS+kb], w.dp[r*ldS:r*ldS+kb]
				n := attnVisible(p, i, j0, kb)
				lse := c.lse[bh*p.Tq+i]
				if n == 0 || math.IsInf(float64(lse), -1) {
					clear(row)
					clear(drow)
					continue
				}
				if p.Mask != nil {
					c.rows.mask(row[:n], p.Mask[(b*p.Tq+i)*p.Tk+j0:])
				}
				c.rows.exp(row[:n], lse)
				clear(row[n:])
				var z []float32
				if pl.drop.on {
					z = w.z[:n]
					for j := range z {
						z[j] = 1
					}
					pl.drop.apply(&c.rows, z, (bh*p.Tq+i)*p.Tk+j0)
					attnMulTo(drow[:n], drow, z)
				}
				c.rows.ds(drow[:n], row, di[i])
				clear(drow[n:])
				if z != nil {
					attnMulTo(row[:n], row, z)
				}
			}
			attnPackCols(w.pt, w.s, ldS, qb, kb, mr, ts.gatherA)
			attnPackCols(w.dst, w.dp, ldS, qb, kb, mr, ts.gatherA)
			attnPackRows(w.dsp, w.dp, ldS, qb, kb, mr, ts.scatterA)
			attnProductT(td, w.dv, dPad, w.pt, w.dob[i0*dPad:], mk, D, qb, diag)
			attnProductT(td, w.dk, dPad, w.dst, w.qb[i0*dPad:], mk, D, qb, diag)
			attnProductK(td, w.dq[i0*dPad:], dPad, w.dsp, w.kb, mp, D, kb, true, diag)
		}
		for r := 0; r < kb; r++ {
			copy(c.dk[kOff+r*ld:kOff+r*ld+D], w.dk[r*dPad:])
			copy(c.dv[kOff+r*ld:kOff+r*ld+D], w.dv[r*dPad:])
		}
	}
	if pl.groups > 1 {
		part := c.dq[(bh*pl.groups+g)*p.Tq*D:][:p.Tq*D]
		for i := 0; i < p.Tq; i++ {
			copy(part[i*D:i*D+D], w.dq[i*dPad:])
		}
		return
	}
	for i := 0; i < p.Tq; i++ {
		attnScaleTo(c.dq[(b*p.Tq+i)*ld+h*D:][:D], w.dq[i*dPad:], pl.scale)
	}
}
