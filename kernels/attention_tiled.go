package kernels

import (
	"math"
	"sync/atomic"
)

// The tiled float32 attention (Dao et al. 2022, Algorithm 1, in the loop
// order of FlashAttention-2). For each (b, h) and block of br queries, the
// forward pass walks the keys in blocks of bc:
//
//	S = (Scale·Q_i)·K_jᵀ                [br, bc]   Sgemm's micro-kernel, k = D
//	m' = max(m, rowmax S)                          masked keys are -Inf
//	P = e^(S - m'), l = l·e^(m - m') + rowsum P    attnRows.exp (assembly)
//	O = O·e^(m - m') + (P⊙Z)·V_j        [br, D]    micro-kernel, k = bc
//
// and at the end sets o = O/l and lse = m + log l. The keys of a (b, h)
// are packed once, as the micro-kernel's B panels [D][NR] (K) and [bc][NR]
// (V), and each block of queries once (scaled, as A panels [D][MR]); P is
// packed as A panels [bc][MR] for its product with V. Every buffer lives in
// its thread's slot of the workspace: a block's own buffers, about
// br·(D + 2·bc + D)·4 bytes, stay in L1 and L2 while the packed keys stream
// from L2 or L3. In a causal block the products skip the tiles, and the
// keys of each row tile, that no query of the tile sees (attnProduct).
//
// Work is split into units, (b, h, chunk of query blocks) forward and
// (b, h, group of key blocks) backward, claimed one at a time by the pool's
// threads (ParallelOn, one part per workspace slot), the costliest first. A
// unit's results depend only on the unit, never on the thread or slot that
// computes it, so the outputs are the same on any number of threads.

// Block sizes: at most attnBr query rows by attnBc keys, the sequences cut
// into blocks of equal size rounded up to the tier's MR (queries) and NR
// (keys). (Chosen with BenchmarkAttentionForward/Backward at T = 128 on
// Zen 4, among br 48, 96, 132 and bc 64, 128, 256.)
const (
	attnBr = 96
	attnBc = 128
)

// attnMinUnits is the fewest units the (b, h) pairs are split into, by
// chunks of query blocks (forward) or groups of key blocks (backward), so
// that a small batch still keeps the threads busy. It is a constant, not
// the thread count, so that the groups, and the order their dq parts are
// added in, never depend on the threads.
const attnMinUnits = 16

// attnAlign is the slack kept to align the workspace on a cache line.
const attnAlign = 16

// attnPlan holds the choices of one tiled call: tiers, blocks, paddings
// and the layout of a slot.
type attnPlan struct {
	p      AttentionParams
	ts, td gemmTier // micro-kernels for products n = keys (ts) and n = D (td)
	mr     int      // their common MR
	br, bc int      // queries and keys per block
	ldS    int      // row stride of a score block: bc rounded up to ts.nr
	mk     int      // bc rounded up to MR: the rows of a dK or dV block
	dPad   int      // D rounded up to td.nr: the row stride of O, dK, dV, dQ blocks
	tqPad  int      // Tq rounded up to MR
	ld     int      // H·D, the row stride of q, k, v, o
	scale  float32
	drop   attnDropout

	qBlocks, kBlocks int
	chunks           int // forward: chunks of query blocks per (b, h)
	groups           int // backward: key-block groups per (b, h)

	fwdSlot, bwdSlot, bwdShared int // floats
}

// newAttnPlan returns the plan of a call with p's sizes (D >= 1).
func newAttnPlan(p *AttentionParams) attnPlan {
	ts := gemmActive
	td := ts
	if ts.narrow != nil && p.D <= ts.narrow.nr {
		td = *ts.narrow
	}
	if td.mr != ts.mr {
		panicf("attention: tiers %s and %s have different MR", ts.name, td.name)
	}
	mr := ts.mr
	pl := attnPlan{p: *p, ts: ts, td: td, mr: mr, ld: p.H * p.D, scale: float32(p.Scale), drop: newAttnDropout(p)}
	// blocks as equal as MR and NR allow, so that no block is a sliver
	pl.br = roundUp(ceilDiv(max(p.Tq, 1), ceilDiv(max(p.Tq, 1), attnBr)), mr)
	pl.bc = roundUp(ceilDiv(max(p.Tk, 1), ceilDiv(max(p.Tk, 1), attnBc)), ts.nr)
	pl.ldS = roundUp(pl.bc, ts.nr)
	pl.mk = roundUp(pl.bc, mr)
	pl.dPad = roundUp(p.D, td.nr)
	pl.tqPad = roundUp(p.Tq, mr)
	pl.qBlocks, pl.kBlocks = ceilDiv(p.Tq, pl.br), ceilDiv(p.Tk, pl.bc)
	pl.chunks, pl.groups = 1, 1
	if bh := p.B * p.H; bh > 0 && bh < attnMinUnits {
		pl.chunks = max(1, min(pl.qBlocks, ceilDiv(attnMinUnits, bh)))
		pl.groups = max(1, min(pl.kBlocks, ceilDiv(attnMinUnits, bh)))
	}
	f, b := pl.fwdLayout(), pl.bwdLayout()
	pl.fwdSlot, pl.bwdSlot = f.size(), b.size()
	if pl.groups > 1 {
		pl.bwdShared = p.B * p.H * pl.groups * p.Tq * p.D
	}
	return pl
}

// attnSlot carves one thread's slot of the workspace into buffers, each
// starting on a cache line (the slot size is a multiple of 16 floats).
type attnSlot struct {
	buf []float32
	off int
}

func (s *attnSlot) take(n int) []float32 {
	n = roundUp(n, 16)
	var b []float32
	if s.buf != nil {
		b = s.buf[s.off : s.off+n : s.off+n]
	}
	s.off += n
	return b
}

func (s *attnSlot) size() int { return s.off }

// attnFwdBufs are the buffers of a forward slot.
type attnFwdBufs struct {
	kp, vp             []float32 // every key block of (b, h), packed
	qp, s, pp, o, m, l []float32 // one query block
}

// fwdLayoutOn returns the forward slot layout over buf (nil: sizes only).
func (pl *attnPlan) fwdLayoutOn(buf []float32) (attnSlot, attnFwdBufs) {
	s := attnSlot{buf: buf}
	D := pl.p.D
	var w attnFwdBufs
	w.kp = s.take(roundUp(pl.p.Tk, pl.ts.nr) * D) // K_j as B panels [D][NR] at j0·D
	w.vp = s.take(pl.p.Tk * pl.dPad)              // V_j as B panels [bc][NR of td] at j0·dPad
	w.qp = s.take(pl.br * D)                      // Q_i as A panels [D][MR], scaled
	w.s = s.take(pl.br * pl.ldS)                  // scores, then P
	w.pp = s.take(pl.br * pl.bc)                  // P as A panels [bc][MR]
	w.o = s.take(pl.br * pl.dPad)                 // O accumulator
	w.m, w.l = s.take(pl.br), s.take(pl.br)
	return s, w
}

func (pl *attnPlan) fwdLayout() attnSlot {
	s, _ := pl.fwdLayoutOn(nil)
	return s
}

// attnState is the call in progress: the plan, the operands and the next
// unit to claim. One call runs at a time on a pool (its calls.attnMu); it
// lives in the pool so that handing it to ParallelOn allocates nothing.
type attnState struct {
	pl    attnPlan
	rows  attnRowOps
	slot  int // floats per slot
	work  []float32
	units int
	next  atomic.Int64

	o, lse, q, k, v, do, dq, dk, dv []float32
}

// reset drops the call's slices, so that the state keeps no operand alive.
func (c *attnState) reset() {
	c.pl = attnPlan{}
	c.work = nil
	c.o, c.lse, c.q, c.k, c.v, c.do, c.dq, c.dk, c.dv = nil, nil, nil, nil, nil, nil, nil, nil, nil
}

// slotBuf returns the floats of slot i.
func (c *attnState) slotBuf(i int) []float32 { return c.work[i*c.slot : (i+1)*c.slot] }

// claim returns the next unit to compute, or false when none is left.
func (c *attnState) claim() (int, bool) {
	u := int(c.next.Add(1)) - 1
	return u, u < c.units
}

// attnSlots returns the slots of work (aligned) that a call on pool p uses:
// at most p.Threads(), at least one; it panics if work holds none.
func attnSlots(p *Pool, fn string, work []float32, shared, slot int) ([]float32, int) {
	if len(work) < attnAlign+shared+slot {
		panicf("%s: work has %d floats, want at least %d", fn, len(work), attnAlign+shared+slot)
	}
	work = alignFloats(work)
	n := min(p.Threads(), (len(work)-shared)/slot)
	return work, n
}

// attnForward32 is AttentionForwardOn's tiled float32 path (D >= 1) on
// pool.
func attnForward32(pool *Pool, fn string, o, lse, q, k, v []float32, p *AttentionParams, work []float32) {
	if p.B == 0 || p.H == 0 || p.Tq == 0 {
		return
	}
	pool.calls.attnMu.Lock()
	defer pool.calls.attnMu.Unlock()
	c := &pool.calls.attn
	defer c.reset()
	c.pl = newAttnPlan(p)
	work, slots := attnSlots(pool, fn, work, 0, c.pl.fwdSlot)
	c.rows, c.slot, c.work = attnRows, c.pl.fwdSlot, work
	c.o, c.lse, c.q, c.k, c.v = o, lse, q, k, v
	c.units = p.B * p.H * c.pl.chunks
	c.next.Store(0)
	ParallelOn(pool, slots, attnForwardPart, c)
}

// attnForwardPart computes units on slot part until none is left.
func attnForwardPart(arg any, part int) {
	c := arg.(*attnState)
	_, w := c.pl.fwdLayoutOn(c.slotBuf(part))
	for {
		u, ok := c.claim()
		if !ok {
			return
		}
		c.forwardUnit(&w, u)
	}
}

// forwardUnit computes unit u: (b, h) = u mod B·H and chunk u / B·H of
// its query blocks, counted from the last (which sees the most keys when
// causal). It packs the keys its queries see once, then runs each query
// block against them.
func (c *attnState) forwardUnit(w *attnFwdBufs, u int) {
	pl, p := &c.pl, &c.pl.p
	ts, td := &pl.ts, &pl.td
	bh := u % (p.B * p.H)
	b, h := bh/p.H, bh%p.H
	ch := pl.chunks - 1 - u/(p.B*p.H)
	q0, q1 := pl.qBlocks*ch/pl.chunks, pl.qBlocks*(ch+1)/pl.chunks
	kEnd := p.Tk
	if p.Causal {
		kEnd = max(0, min(p.Tk, min(q1*pl.br, p.Tq)+attnOffset(p))) // the last row's visible keys
	}
	for j0 := 0; j0 < kEnd; j0 += pl.bc {
		kb := min(pl.bc, kEnd-j0)
		kOff := (b*p.Tk+j0)*pl.ld + h*p.D
		attnPackRows(w.kp[j0*p.D:], c.k[kOff:], pl.ld, kb, p.D, ts.nr, ts.scatterB)
		attnPackCols(w.vp[j0*pl.dPad:], c.v[kOff:], pl.ld, kb, p.D, td.nr, td.gatherB)
	}
	for qi := q1 - 1; qi >= q0; qi-- {
		c.forwardBlock(w, b, h, qi*pl.br)
	}
}

// forwardBlock computes the query block of (b, h) that starts at row i0,
// with the keys packed in w.
func (c *attnState) forwardBlock(w *attnFwdBufs, b, h, i0 int) {
	pl, p := &c.pl, &c.pl.p
	ts, td, mr, ldS, dPad := &pl.ts, &pl.td, pl.mr, pl.ldS, pl.dPad
	bh := b*p.H + h
	qb := min(pl.br, p.Tq-i0)
	mp := roundUp(qb, mr)
	D, ld := p.D, pl.ld
	qOff := (b*p.Tq+i0)*ld + h*D

	attnPackRows(w.qp, c.q[qOff:], ld, qb, D, mr, ts.scatterA)
	attnScale(w.qp[:mp*D], pl.scale)
	clear(w.o[:mp*dPad])
	m, l := w.m[:qb], w.l[:qb]
	for r := range m {
		m[r], l[r] = float32(math.Inf(-1)), 0
	}
	kEnd := p.Tk
	if p.Causal {
		kEnd = max(0, min(p.Tk, i0+qb+attnOffset(p))) // the last row's visible keys
	}
	for j0 := 0; j0 < kEnd; j0 += pl.bc {
		kb := min(pl.bc, kEnd-j0)
		diag := attnNoDiag
		if p.Causal {
			diag = i0 + attnOffset(p) - j0
		}
		attnProduct(ts, w.s, ldS, w.qp, w.kp[j0*D:], mp, kb, D, false, diag)
		for r := 0; r < qb; r++ {
			i := i0 + r
			row := w.s[r*ldS : r*ldS+kb]
			n := attnVisible(p, i, j0, kb)
			if p.Mask != nil {
				c.rows.mask(row[:n], p.Mask[(b*p.Tq+i)*p.Tk+j0:])
			}
			mx := float32(math.Inf(-1))
			if n > 0 {
				mx = c.rows.max(row[:n])
			}
			if math.IsInf(float64(mx), -1) {
				clear(row) // nothing visible in this block
				continue
			}
			mOld := m[r]
			mNew := max(mOld, mx)
			sum := c.rows.exp(row[:n], mNew)
			clear(row[n:])
			if mNew != mOld && !math.IsInf(float64(mOld), -1) {
				// rescale what the earlier blocks summed to the new maximum
				a := float32(math.Exp(float64(mOld - mNew)))
				l[r] *= a
				attnScaleTo(w.o[r*dPad:r*dPad+D], w.o[r*dPad:r*dPad+D], a)
			}
			l[r] += sum
			m[r] = mNew
			if pl.drop.on {
				pl.drop.apply(&c.rows, row[:n], (bh*p.Tq+i)*p.Tk+j0)
			}
		}
		attnPackRows(w.pp, w.s, ldS, qb, kb, mr, ts.scatterA)
		attnProductK(td, w.o, dPad, w.pp, w.vp[j0*dPad:], mp, D, kb, true, diag)
	}
	for r := 0; r < qb; r++ {
		or := c.o[qOff+r*ld : qOff+r*ld+D]
		if l[r] == 0 {
			clear(or) // no visible key
			continue
		}
		attnScaleTo(or, w.o[r*dPad:r*dPad+D], 1/l[r])
	}
	// the logarithms in a loop of their own, so that their latencies overlap
	for r, lr := range l {
		lse := float32(math.Inf(-1))
		if lr != 0 {
			lse = float32(float64(m[r]) + attnLog(lr))
		}
		c.lse[bh*p.Tq+i0+r] = lse
	}
}
