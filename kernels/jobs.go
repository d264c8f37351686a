package kernels

import (
	"sync"
	"sync/atomic"
)

// Jobs: work other than a single product that runs on a Pool's threads
// (workers.go), so that the convolution and pooling kernels share its
// threads, and its spinning hand-off, with the products around them.
//
//   - jobImages: the two halves of a data-movement kernel split by images
//     (halves.go).
//   - jobConv: Conv2D in float32 as independent regions of output rows: each
//     packs the product's operand for its rows straight from x (convpack.go;
//     or, for narrow window rows, writes its im2col rows into its thread's
//     slot of the workspace) and multiplies it by the filter straight away,
//     while it is in that core's cache, with no barrier between the steps.
//   - jobConvInput: Conv2DBackpropInput in float32 by regions of whole
//     images (col2im of two images never touches the same dx cells): the
//     product dy·filterᵀ into the slot, then col2im into the region's dx.
//   - jobConvFilter: Conv2DBackpropFilter in float32 by two groups of
//     chunks of output rows (summed apart, then added) and, with more than
//     two threads, by rows of dfilter (whole micro-tiles of the product):
//     each region walks its chunks in order, packs the im2col columns of its
//     rows of dfilter for a chunk (straight from x where filterPackedT
//     applies, else into its slot) and adds their product with dy, with no
//     barrier between regions.
//   - jobReluGrad, jobSumRows: ReluGrad in float32 by ranges of elements,
//     SumRows in float32 by blocks of sixteen columns (each column summed
//     over every row in order, as on one thread).
//   - jobFunc: the parts of a caller's function (ParallelOn).
//   - jobWinograd: a convolution product as F(2×2, 3×3) or F(4×4, 3×3) (winograd.go), by
//     chunks of tiles (the forward product) or two groups of them (the
//     filter gradient).
//   - jobMatMul: a matrix product on the register tiles (MatMulTiles,
//     matmul_choice.go), by strips of 32 columns of its result.
//
// A region's results do not depend on the thread or slot that computes it,
// nor on the number of threads: every output element sees the same
// operations in the same order.

type jobKind uint8

const (
	jobImages jobKind = iota
	jobConv
	jobConvInput
	jobConvFilter
	jobReluGrad
	jobSumRows
	jobFunc
	jobWinograd
	jobMatMul
)

// convRegionBytes is the size aimed at for one region's im2col rows: small
// enough to stay in a core's L2 (1 MiB on Zen 4) beside the packed panel of
// the product, large enough that packing the filter and handing the region
// over cost little. (Single-thread times of the reference CNN's
// convolutions were flat from 128 KiB to 4 MiB.)
var convRegionBytes = 256 << 10

// poolJob is one job. The caller fills it (holding its pool's
// calls.jobMu) and passes it to the pool's runJob.
type poolJob struct {
	kind     jobKind
	maxSlots int          // slots the workspace holds (0: no slots needed)
	slots    atomic.Int32 // slots taken so far (runJob, runRegions)

	halves [2]imageTask // jobImages

	// the convolution jobs: x is the input (dy for jobConvInput), filter the
	// filter (dy for jobConvFilter), y the output (dx, dfilter), per the
	// rows of one region or chunk (output rows n·OH+oh, or images for
	// jobConvInput), slot the floats of one slot of work. jobReluGrad: y,
	// x, filter are dst, x, g; jobSumRows: y is dst, x the [per, f] matrix.
	x, filter, y, work []float32
	g                  ConvGeom
	f, per, slot       int
	regions            int // jobConvFilter: the regions dfilter's rows split into
	groups             int // jobConvFilter: the groups of chunks summed apart
	partial            []float32
	packT              bool // jobConvFilter: filterPackedT applies
	// bf16: the products run on MatMulBF16's tier, whose panels hold
	// bfloat16 pairs: A is packed by the tier (from im2col rows), never
	// from the image in float32 layout (packIm2col, packT)
	bf16 bool

	mm      mmShape // jobMatMul (matmul_choice.go): y = op(x)·filter
	wg      wgShape // jobWinograd (winograd.go)
	wgPhase int
	// mom: the forward product also sums the moments of each group of
	// momImages output images into its two rows (momentsGroup) as a chunk
	// that holds the group is written
	mom       []float64
	momImages int

	fn   func(arg any, part int) // jobFunc
	arg  any
	tier gemmTier
	blk  gemmBlocking
}

// poolCalls holds a Pool's calls in progress, one of each kind at a time,
// so that handing one to the pool's threads allocates nothing. The job in
// flight (job, guarded by jobMu) is held from filling it to the end of
// runJob, so callers on other goroutines wait; the small jobs
// (elementwise, ParallelOn) only try jobMu and run on their own goroutine
// when it is held, so that a call made from inside a job's part cannot
// deadlock. The others are the operands of the kernels that split their
// work with ParallelOn (attention, the depthwise and direct convolutions,
// Moments), each guarded by its own mutex.
type poolCalls struct {
	jobMu sync.Mutex
	job   poolJob

	attnMu sync.Mutex
	attn   attnState // attention_tiled.go

	dwMu sync.Mutex
	dw32 dwJob[float32] // vision_conv.go
	dw64 dwJob[float64]

	directMu sync.Mutex
	direct   directJob // vision_direct.go
	// directOffs are the direct tiles' tap offsets, a slot per part
	directOffs []directOffs

	momentsMu sync.Mutex
	moments32 momentsJob[float32] // vision_ops.go
	moments64 momentsJob[float64]
	sums32    sumsJob[float32] // vision_ops.go, under momentsMu
	sums64    sumsJob[float64]
}

// part computes region r of j with the packing buffers ws and scratch slot.
func (j *poolJob) part(ws *gemmWorkspace, r, slot int) {
	switch j.kind {
	case jobFunc:
		j.fn(j.arg, r)
	case jobWinograd:
		j.wgPart(ws, r, slot)
	case jobMatMul:
		j.mmPart(r)
	case jobImages:
		j.halves[r].run()
	case jobConv:
		g, k := j.g, j.g.KH*j.g.KW*j.g.C
		q0 := r * j.per
		q1 := min(q0+j.per, g.N*g.OH)
		rows := (q1 - q0) * g.OW
		if packFromImage && !j.bf16 && k <= j.blk.kc && g.KW*g.C >= 16 {
			// one block of K, window rows of 16 floats or more: pack A from
			// x (convpack.go), in the loops of gemmCall.region
			c := j.call(j.y[q0*g.OW*j.f:q1*g.OW*j.f], nil, j.filter, rows, j.f, k, false, false)
			mr, nr := c.tier.mr, c.tier.nr
			mcs := blockSize(rows, c.blk.mc, mr)
			ncs := blockSize(c.n, c.blk.nc, nr)
			for ic := 0; ic < rows; ic += mcs {
				mc := min(mcs, rows-ic)
				packIm2col(ws.a, j.x, j.work[slot*j.slot:(slot+1)*j.slot], g, q0*g.OW+ic, mc, mr, c.tier.scatterA)
				for jc := 0; jc < c.n; jc += ncs {
					nc := min(ncs, c.n-jc)
					c.packB(ws.b, 0, k, jc, nc, nr)
					c.macroKernel(ws, ws.b, ic, mc, jc, nc, k, false)
				}
			}
			return
		}
		cols := j.work[slot*j.slot : slot*j.slot+rows*k]
		im2colRows(cols, j.x, g, q0, q1)
		c := j.call(j.y[q0*g.OW*j.f:q1*g.OW*j.f], cols, j.filter, rows, j.f, k, false, false)
		c.region(ws, 0, c.m, 0, c.n)
	case jobConvInput:
		g, k := j.g, j.g.KH*j.g.KW*j.g.C
		n0 := r * j.per
		nb := min(j.per, g.N-n0)
		per, img := g.OH*g.OW, g.H*g.W*g.C
		rows := nb * per
		cols := j.work[slot*j.slot : slot*j.slot+rows*k]
		// [rows, f]·[K, f]ᵀ -> [rows, K]
		c := j.call(cols, j.x[n0*per*j.f:(n0+nb)*per*j.f], j.filter, rows, k, j.f, false, true)
		c.region(ws, 0, c.m, 0, c.n)
		clear(j.y[n0*img : (n0+nb)*img])
		col2im(j.y, cols, g, n0, nb)
	case jobReluGrad:
		// regions of whole simdBlocks: y = dst, x = x, filter = g
		blocks := len(j.y) / simdBlock
		lo, hi := blocks*r/j.regions*simdBlock, blocks*(r+1)/j.regions*simdBlock
		reluGradSIMD(j.y[lo:hi], j.x[lo:hi], j.filter[lo:hi])
	case jobSumRows:
		// y = dst, x = x [per rows, f columns]; regions of 16-column blocks
		blocks := j.f / 16
		lo, hi := blocks*r/j.regions*16, blocks*(r+1)/j.regions*16
		if lo < hi {
			sumColsSIMD(j.y[lo:hi], j.x[lo:], j.per, j.f, (hi-lo)/16)
		}
	case jobConvFilter:
		// region r: rows [a, b) of dfilter (slice r % regions) over the
		// chunks of row group r / regions, into dfilter (group 0) or the
		// group's partial sum
		g, k := j.g, j.g.KH*j.g.KW*j.g.C
		tiles := ceilDiv(k, j.tier.mr)
		sl, group := r%j.regions, r/j.regions
		a, b := tiles*sl/j.regions*j.tier.mr, min(tiles*(sl+1)/j.regions*j.tier.mr, k)
		if a >= b {
			return
		}
		dst := j.y
		if group > 0 {
			dst = j.partial[(group-1)*k*j.f : group*k*j.f]
		}
		dst = dst[a*j.f : b*j.f]
		chunks := ceilDiv(g.N*g.OH, j.per)
		c0, c1 := chunks*group/j.groups, chunks*(group+1)/j.groups
		if c0 == c1 {
			clear(dst)
		}
		for ch := c0; ch < c1; ch++ {
			q0 := ch * j.per
			q1 := min(q0+j.per, g.N*g.OH)
			rows := (q1 - q0) * g.OW
			if j.packT && rows <= j.blk.kc && b-a <= j.blk.mc {
				j.filterPackedT(ws, dst, q0, q1, a, b, ch > c0)
				continue
			}
			cols := j.work[slot*j.slot : slot*j.slot+rows*(b-a)]
			im2colCols(cols, j.x, g, q0, q1, a, b)
			// [rows, b-a]ᵀ·[rows, f] -> rows [a, b) of [K, f], accumulated over chunks
			c := j.call(dst, cols, j.filter[q0*g.OW*j.f:q1*g.OW*j.f], b-a, j.f, rows, true, false)
			c.accumulate = ch > c0
			c.region(ws, 0, b-a, 0, j.f)
		}
	}
}

// filterPackedT adds (or, without acc, sets) dst = rows [a, b) of
// im2col(x)ᵀ·dy over output rows [q0, q1) as gemmCall.region would for one
// block of each size, with the A panel packed straight from x by
// packT12SIMD: each micro-panel holds twelve consecutive columns of the
// im2col matrix, twelve contiguous floats of one window row of x at each
// position (j.packT: no padding, MR = 12, window rows and K multiples of
// twelve).
func (j *poolJob) filterPackedT(ws *gemmWorkspace, dst []float32, q0, q1, a, b int, acc bool) {
	g, f := j.g, j.f
	rowLen, img := g.KW*g.C, g.H*g.W*g.C
	rows := (q1 - q0) * g.OW
	c := j.call(dst, nil, j.filter[q0*g.OW*f:q1*g.OW*f], b-a, f, rows, true, false)
	panel := 12 * rows
	for q := q0; q < q1; q++ {
		n, oh := q/g.OH, q%g.OH
		p := (q - q0) * g.OW
		for kh := 0; kh < g.KH; kh++ {
			s0, s1 := max(a, kh*rowLen), min(b, (kh+1)*rowLen)
			if s0 >= s1 {
				continue
			}
			src := j.x[n*img+(oh*g.SH+kh)*g.W*g.C+s0-kh*rowLen:]
			packT12SIMD(ws.a[(s0-a)/12*panel+12*p:], panel, src, g.SW*g.C, g.OW, (s1-s0)/12)
		}
	}
	nr := c.tier.nr
	ncs := blockSize(f, c.blk.nc, nr)
	for jc := 0; jc < f; jc += ncs {
		nc := min(ncs, f-jc)
		c.packB(ws.b, 0, rows, jc, nc, nr)
		c.macroKernel(ws, ws.b, 0, b-a, jc, nc, rows, acc)
	}
}

// call returns the product dst = op(a)·op(b) ([m, n], inner size k) on j's
// tier, for gemmCall.region.
func (j *poolJob) call(dst, a, b []float32, m, n, k int, transA, transB bool) gemmCall {
	return gemmCall{tier: j.tier, blk: j.blk, dst: dst, a: a, b: b, m: m, n: n, k: k, transA: transA, transB: transB}
}

// gemmSetup returns the tier and blocking Sgemm (with bf16, MatMulBF16)
// uses for a product with n columns, and false when products run elsewhere
// (sgemmExternal).
func gemmSetup(n int, bf16 bool) (gemmTier, gemmBlocking, bool) {
	tier := gemmActive
	if bf16 {
		tier = bgemmTier(n)
	} else if tier.narrow != nil && n <= tier.narrow.nr {
		tier = *tier.narrow
	}
	blk := tier.blk
	if gemmBlockOverride != nil {
		blk = *gemmBlockOverride
	}
	return tier, blk, sgemmExternal == nil
}

// convRegions returns the rows of one region, unit floats of im2col each,
// that fit both convRegionBytes and work (at least one), and the number of
// slots work holds.
func convRegions(unit, lenWork int) (per, slots int) {
	per = max(1, min(convRegionBytes/(4*unit), lenWork/unit))
	return per, lenWork / (per * unit)
}

// conv2DJob is Conv2D in float32 as a jobConv (with bf16, its products on
// bfloat16 operands), or false if products run elsewhere.
func conv2DJob(p *Pool, dst, x, filter, work []float32, g ConvGeom, f int, bf16 bool) bool {
	tier, blk, ok := gemmSetup(f, bf16)
	if !ok {
		return false
	}
	k := g.KH * g.KW * g.C
	per, slots := convRegions(g.OW*k, len(work))
	if rows := g.N * g.OH; ceilDiv(rows, per) > maxRegions {
		// fewer, larger regions (runJob's bound): still at most an image's
		// rows while N <= maxRegions, which work holds
		per = ceilDiv(rows, maxRegions)
		slots = len(work) / (per * g.OW * k)
	}
	p.calls.jobMu.Lock()
	defer p.calls.jobMu.Unlock()
	j := &p.calls.job
	*j = poolJob{kind: jobConv, maxSlots: slots, x: x, filter: filter, y: dst, work: work,
		g: g, f: f, per: per, slot: per * g.OW * k, tier: tier, blk: blk, bf16: bf16}
	p.runJob(j, ceilDiv(g.N*g.OH, per))
	*j = poolJob{} // drop the caller's slices
	return true
}

// conv2DInputJob is Conv2DBackpropInput in float32 as a jobConvInput (with
// bf16, its products on bfloat16 operands), or false if products run
// elsewhere.
func conv2DInputJob(p *Pool, dx, dy, filter, work []float32, g ConvGeom, f int, bf16 bool) bool {
	k := g.KH * g.KW * g.C
	tier, blk, ok := gemmSetup(k, bf16)
	if !ok {
		return false
	}
	per, slots := convRegions(g.OH*g.OW*k, len(work))
	p.calls.jobMu.Lock()
	defer p.calls.jobMu.Unlock()
	j := &p.calls.job
	*j = poolJob{kind: jobConvInput, maxSlots: slots, x: dy, filter: filter, y: dx, work: work,
		g: g, f: f, per: per, slot: per * g.OH * g.OW * k, tier: tier, blk: blk}
	p.runJob(j, ceilDiv(g.N, per))
	*j = poolJob{}
	return true
}

// conv2DFilterJob is Conv2DBackpropFilter in float32 as a jobConvFilter
// (with bf16, its products on bfloat16 operands), or false if products run
// elsewhere.
func conv2DFilterJob(p *Pool, dfilter, x, dy, work []float32, g ConvGeom, f int, bf16 bool) bool {
	k := g.KH * g.KW * g.C
	tier, blk, ok := gemmSetup(f, bf16)
	if !ok {
		return false
	}
	// The chunks split in two groups, whose sums add at the end, on any
	// number of threads, so the result does not depend on the threads; each
	// thread then packs only its own rows of dy, and a filter of one
	// micro-tile of rows (a first layer: K = KH·KW·C of a few channels)
	// splits too. More threads split the rows of dfilter as well. The
	// second group's sum takes the end of work.
	groups := 1
	var partial []float32
	if g.N*g.OH >= 2 && len(work)-k*f >= g.OW*k {
		groups = 2
		partial = work[len(work)-k*f:]
		work = work[:len(work)-k*f]
	}
	packT := !bf16 && packFromImage && simdPool && tier.mr == 12 && k%12 == 0 && g.KW*g.C%12 == 0 &&
		g.PadTop == 0 && g.PadLeft == 0 && g.PadBottom() == 0 && g.PadRight() == 0
	per, slots := convRegions(g.OW*k, len(work))
	if packT {
		per = min(per, max(1, blk.kc/g.OW)) // a chunk's rows in one block of the product
	}
	if groups > 1 {
		per = min(per, ceilDiv(g.N*g.OH, groups)) // a chunk for each group at least
	}
	regions := max(1, min(ceilDiv(p.Threads(), groups), ceilDiv(k, tier.mr)))
	p.calls.jobMu.Lock()
	defer p.calls.jobMu.Unlock()
	j := &p.calls.job
	// x is the input, filter holds dy, y is dfilter
	*j = poolJob{kind: jobConvFilter, maxSlots: slots, x: x, filter: dy, y: dfilter, work: work,
		g: g, f: f, per: per, slot: per * g.OW * k, regions: regions, groups: groups, partial: partial,
		packT: packT, tier: tier, blk: blk}
	p.runJob(j, regions*groups)
	*j = poolJob{}
	for gr := 1; gr < groups; gr++ {
		for i, v := range partial[(gr-1)*k*f : gr*k*f] {
			dfilter[i] += v
		}
	}
	return true
}

// packFromImage turns on the products that pack their A panels straight
// from the image (packIm2col, filterPackedT); tests turn it off to compare.
var packFromImage = true

// parallelMin is the least number of elements an elementwise job splits.
const parallelMin = 1 << 16

// reluGradJob computes ReluGrad over the whole SIMD blocks of dst on pool
// p and returns how many elements it did (0: none, the caller does all).
func reluGradJob(p *Pool, dst, x, g []float32) int {
	n := len(dst) &^ (simdBlock - 1)
	if n < parallelMin || !simdF32 || p.Threads() < 2 || !p.calls.jobMu.TryLock() {
		return 0
	}
	defer p.calls.jobMu.Unlock()
	j := &p.calls.job
	*j = poolJob{kind: jobReluGrad, y: dst[:n], x: x[:n], filter: g[:n], regions: 2}
	p.runJob(j, 2)
	*j = poolJob{}
	return n
}

// sumRowsFast sets dst to SumRows(x) ([rows, cols]) with the assembly
// column sums, on pool p when the matrix is large, and returns true; or
// returns false, doing nothing, where the assembly does not run.
func sumRowsFast(p *Pool, dst, x []float32, rows, cols int) bool {
	c16 := cols &^ 15
	if c16 == 0 || rows == 0 || !simdPool {
		return false
	}
	if rows*cols >= parallelMin && c16 >= 32 && p.Threads() >= 2 && p.calls.jobMu.TryLock() {
		j := &p.calls.job
		*j = poolJob{kind: jobSumRows, y: dst, x: x, per: rows, f: cols, regions: 2}
		p.runJob(j, 2)
		*j = poolJob{}
		p.calls.jobMu.Unlock()
	} else {
		sumColsSIMD(dst, x, rows, cols, c16/16)
	}
	// the last columns, in Go, in the same order
	if c16 < cols {
		tail := dst[c16:]
		clear(tail)
		for r := 0; r < rows; r++ {
			for c, v := range x[r*cols+c16 : r*cols+cols] {
				tail[c] += v
			}
		}
	}
	return true
}

// ParallelOn calls fn(arg, part) for every part < parts on pool p, the
// calling goroutine taking parts too, and returns when every call has
// returned; parts run at once on different threads, in no set order.
// Handing a part to a spinning pool thread takes about a microsecond, and
// the call allocates nothing when arg holds a pointer. Where p is busy with
// another caller's job, or has one thread, the calls run here, in order.
// fn must not call ParallelOn, MatMulOn or the convolutions on p (their
// products would wait for the pool); the elementwise kernels are fine. It
// panics if parts exceeds 65535.
func ParallelOn(p *Pool, parts int, fn func(arg any, part int), arg any) {
	if parts > 0xffff {
		panicf("Parallel: %d parts, want at most 65535", parts)
	}
	if parts < 2 || p.Threads() < 2 || !p.calls.jobMu.TryLock() {
		for i := 0; i < parts; i++ {
			fn(arg, i)
		}
		return
	}
	defer p.calls.jobMu.Unlock()
	j := &p.calls.job
	*j = poolJob{kind: jobFunc, fn: fn, arg: arg}
	p.runJob(j, parts)
	*j = poolJob{}
}
