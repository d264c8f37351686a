package kernels

import (
	"fmt"
	"unsafe"
)

// Scratch is packing memory for the matrix products (Sgemm, MatMulBF16 and
// the float32 convolutions' products) that a caller reserves and gives to a
// Pool (SetScratch), so that the packing buffers are on the caller's ledger
// and in its plan instead of the Go heap: one region per thread, each
// PerThread floats, 64-byte aligned.
//
// A product packs into its pool's Scratch when its thread's region holds
// the product's blocks (PackFloats); otherwise the thread falls back to
// buffers of its own on the Go heap, made once (ScratchMisses counts the
// products that did so). A Scratch must be given to one pool at a time:
// that pool's products, which run one at a time, are the only ones that
// touch it.
type Scratch struct {
	threads   [][]float32
	perThread int
}

// ScratchBytes returns the bytes of a Scratch of threads regions of
// perThread floats each (alignment slack included).
func ScratchBytes(perThread, threads int) int64 {
	return int64(threads) * (int64(perThread)*4 + 64)
}

// NewScratch carves buf (at least ScratchBytes(perThread, threads) bytes)
// into threads regions of perThread floats. It panics if buf is short.
func NewScratch(buf []byte, perThread, threads int) *Scratch {
	if int64(len(buf)) < ScratchBytes(perThread, threads) {
		panicf("NewScratch: %d bytes for %d threads of %d floats, want %d", len(buf), threads, perThread, ScratchBytes(perThread, threads))
	}
	s := &Scratch{perThread: perThread}
	for t := 0; t < threads; t++ {
		part := buf[int64(t)*(int64(perThread)*4+64):]
		off := 0
		for uintptr(unsafe.Pointer(unsafe.SliceData(part[off:])))%64 != 0 {
			off++
		}
		s.threads = append(s.threads, unsafe.Slice((*float32)(unsafe.Pointer(&part[off])), perThread))
	}
	return s
}

// String describes the scratch.
func (s *Scratch) String() string {
	return fmt.Sprintf("kernels.Scratch{%d threads x %d floats}", len(s.threads), s.perThread)
}

// SetScratch makes s the packing memory of p's products from now on (nil:
// none, the threads' own buffers). It waits for a product in progress to
// finish. s's memory must stay valid until p no longer has it (SetScratch
// of another, ReleaseScratch or Close).
func (p *Pool) SetScratch(s *Scratch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scratch = s
}

// ReleaseScratch takes s from p if p has it: after it returns, no product
// of p touches s's memory. It does nothing if p has another Scratch or
// none (so it is safe after Close).
func (p *Pool) ReleaseScratch(s *Scratch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.scratch == s {
		p.scratch = nil
	}
}

// Scratch returns p's Scratch (nil: none).
func (p *Pool) Scratch() *Scratch {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.scratch
}

// ScratchMisses returns how many products (and convolution jobs) of p so
// far packed into the threads' own buffers on the Go heap, because p's
// Scratch did not hold them or p had none: 0 over a training run means its
// packing memory was all on the run's ledger.
func (p *Pool) ScratchMisses() int64 { return p.misses.Load() }

// packSize is what one thread packs for a product: the floats of its A
// panel and of its B block.
type packSize struct{ a, b int }

// floats returns the floats of a thread's region holding s: each buffer
// aligned to 16 floats, and the edge tile.
func (s packSize) floats() int {
	if s.a == 0 && s.b == 0 {
		return 0
	}
	return roundUp(s.a, 16) + roundUp(s.b, 16) + gemmMaxMR*gemmMaxNR
}

// packNeed returns what one thread of an m×k by k×n product on tier and
// blk packs at most: blockSize gives blocks of at most the block size
// rounded to the tile, and never more than the whole product rounded so.
func packNeed(tier gemmTier, blk gemmBlocking, m, n, k int) packSize {
	if m <= 0 || n <= 0 || k <= 0 {
		return packSize{}
	}
	mr, nr := tier.mr, tier.nr
	mc := min(roundUp(m, mr), roundUp(blk.mc, mr))
	nc := min(roundUp(n, nr), roundUp(blk.nc, nr))
	kc := min(k, blk.kc)
	return packSize{a: mc * kc, b: kc * nc}
}

func (c *gemmCall) packNeed(m, n, k int) packSize { return packNeed(c.tier, c.blk, m, n, k) }

// packNeed returns what one thread of the job packs at most.
func (j *poolJob) packNeed() packSize {
	g, k := j.g, j.g.KH*j.g.KW*j.g.C
	switch j.kind {
	case jobConv: // per·OW rows of im2col · [K, f]
		return packNeed(j.tier, j.blk, j.per*g.OW, j.f, k)
	case jobConvInput: // [rows, f] · [K, f]ᵀ
		return packNeed(j.tier, j.blk, j.per*g.OH*g.OW, k, j.f)
	case jobConvFilter: // rows of dfilter [<= K] over chunks of per·OW rows
		return packNeed(j.tier, j.blk, k, j.f, j.per*g.OW)
	case jobWinograd: // [tiles, cin]·[cin, cout], or [tiles, cin]ᵀ·[tiles, cout]
		if j.wg.filterGrad {
			return packNeed(j.tier, j.blk, j.wg.cin, j.wg.cout, j.per)
		}
		return packNeed(j.tier, j.blk, j.per, j.wg.cout, j.wg.cin)
	}
	return packSize{}
}

// pack sets every thread's packing buffers for a product or job that packs
// n per thread: a region of p's Scratch when it holds n, else the thread's
// own (made on first need). p.mu is held.
func (p *Pool) pack(n packSize) {
	need := n.floats()
	missed := false
	for t := 0; t < p.threads; t++ {
		switch {
		case need == 0:
			p.cur[t] = gemmWorkspace{}
		case p.scratch != nil && t < len(p.scratch.threads) && need <= p.scratch.perThread:
			buf := p.scratch.threads[t]
			a, b := roundUp(n.a, 16), roundUp(n.b, 16)
			p.cur[t] = gemmWorkspace{a: buf[:n.a:n.a], b: buf[a : a+n.b : a+n.b], c: buf[a+b : a+b+gemmMaxMR*gemmMaxNR]}
		default:
			if p.own[t] == nil {
				p.own[t] = newGemmWorkspace()
			}
			p.cur[t] = *p.own[t]
			missed = true
		}
	}
	if missed {
		p.misses.Add(1)
	}
}

// PackFloats returns the floats of packing buffers one thread needs for a
// float32 product (MatMul, Sgemm) of an m×k by k×n product, or MatMulBF16
// with bf16: what a Scratch's PerThread must hold for it.
func PackFloats(m, n, k int, bf16 bool) int {
	tier, blk, ok := gemmSetup(n, bf16)
	if !ok {
		return 0 // products run elsewhere (the openblas tag)
	}
	return packNeed(tier, blk, m, n, k).floats()
}

// ConvPackFloats returns the floats of packing buffers one thread needs for
// Conv2D, Conv2DBackpropInput or Conv2DBackpropFilter (or their BF16
// versions) in float32 of geometry g with f filters: a bound over the
// products their jobs run, whatever workspace they are given.
func ConvPackFloats(g ConvGeom, f int, bf16 bool) int {
	k := g.KH * g.KW * g.C
	rows := g.N * g.OH * g.OW
	if g.General() { // float32 products of one group (vision_conv.go)
		if g.depthwise() {
			return 0
		}
		k, f, bf16 = k/g.groups(), f/g.groups(), false
	}
	need := 0
	for _, p := range [][3]int{{rows, f, k}, {rows, k, f}, {k, f, rows}} {
		tier, blk, ok := gemmSetup(p[1], bf16)
		if !ok {
			return 0
		}
		need = max(need, packNeed(tier, blk, p[0], p[1], p[2]).floats())
	}
	if !bf16 && WinogradOK(g) {
		need = max(need, winogradPack(g, f))
	}
	return need
}
