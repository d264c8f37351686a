package cpu

import (
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The sequence ops (graph/sequence.go) on the host: attention forward and
// backward with the tiled kernels of package kernels (their blocks and
// per-thread buffers in the instruction's workspace, so the plan counts
// them), the in-place sum of slice gradients and the cache write.
func init() {
	register(graph.OpAttention, kernel{bind: floats(fromBound(attention[float32]), fromBound(attention[float64])), lower: attentionWorkspace})
	register(graph.OpAttentionGrad, kernel{bind: floats(fromBound(attentionGrad[float32]), fromBound(attentionGrad[float64])), lower: attentionGradWorkspace})
	register(graph.OpUnsliceAdd, kernel{bind: floats(fromBound(unsliceAdd[float32]), fromBound(unsliceAdd[float64]))})
	register(graph.OpCacheWrite, kernel{bind: every(fromBound(cacheWrite))})
	register(graph.OpGelu, kernel{bind: floats(splitting(geluPart[float32]), splitting(geluPart[float64]))})
	register(graph.OpGeluGrad, kernel{bind: floats(splitting(geluGradPart[float32]), splitting(geluGradPart[float64]))})
	register(graph.OpLayerNorm, kernel{bind: floats(bindLayerNorm(layerNormPart[float32]), bindLayerNorm(layerNormPart[float64])),
		lower: layerNormWorkspace})
	register(graph.OpLayerNormGrad, kernel{bind: floats(bindLayerNormGrad[float32], bindLayerNormGrad[float64]),
		lower: layerNormGradWorkspace})
	register(graph.OpLSTMCell, kernel{bind: floats(bindCell(lstmCellPart[float32]), bindCell(lstmCellPart[float64])),
		lower: cellWorkspace})
	register(graph.OpLSTMCellGrad, kernel{bind: floats(bindCell(lstmCellGradPart[float32]), bindCell(lstmCellGradPart[float64])),
		lower: cellWorkspace})
	register(graph.OpGRUCell, kernel{bind: floats(bindCell(gruCellPart[float32]), bindCell(gruCellPart[float64])),
		lower: cellWorkspace})
	register(graph.OpGRUCellGrad, kernel{bind: floats(bindCell(gruCellGradPart[float32]), bindCell(gruCellGradPart[float64])),
		lower: cellWorkspace})
}

// gruCellPart runs part p of b.splits of a GRU step's rows: x [, u [,
// hPrev]] -> h, with the activations (its part).
func gruCellPart[T kernels.Float](arg any, p int) {
	b := arg.(*Bound)
	g := b.Matrix
	work := tensor.As[T](b.work)
	acts := part(b, 0, 4*g.Rows*g.Cols, &work)
	var u, hPrev []T
	if len(b.in) > 1 {
		u = tensor.As[T](b.in[1])
	}
	if len(b.in) > 2 {
		hPrev = tensor.As[T](b.in[2])
	}
	lo, hi := p*g.Rows/b.splits, (p+1)*g.Rows/b.splits
	kernels.GRUCellRows(tensor.As[T](b.out), acts, tensor.As[T](b.in[0]), u, hPrev, g.Cols, lo, hi)
}

// gruCellGradPart runs part p of b.splits of a GRU step's gradient: acts,
// dh [, hPrev] -> dx, with du and dhPrev (its parts; dhPrev where the step
// had hPrev).
func gruCellGradPart[T kernels.Float](arg any, p int) {
	b := arg.(*Bound)
	g := b.Matrix
	work := tensor.As[T](b.work)
	du := part(b, 0, 3*g.Rows*g.Cols, &work)
	var hPrev, dhPrev []T
	if len(b.in) > 2 {
		hPrev, dhPrev = tensor.As[T](b.in[2]), part(b, 1, g.Rows*g.Cols, &work)
	}
	lo, hi := p*g.Rows/b.splits, (p+1)*g.Rows/b.splits
	kernels.GRUCellGradRows(tensor.As[T](b.out), du, dhPrev, tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), hPrev, g.Cols, lo, hi)
}

// cellWorkspace: the parts of a recurrent step or its gradient that
// nothing reads, each rows × units × its width: an LSTM step's c and
// activations (1, 5) and its gradient's dcPrev (1, with a previous state);
// a GRU step's activations (4) and its gradient's du (3) and dhPrev (1,
// with a previous state). A step at inference keeps no activations.
func cellWorkspace(t *Target, it *compile.Instr) int64 {
	var widths []int
	switch it.Op {
	case graph.OpLSTMCell:
		widths = []int{1, 5}
	case graph.OpLSTMCellGrad:
		if len(it.In) > 3 {
			widths = []int{1}
		}
	case graph.OpGRUCell:
		widths = []int{4}
	case graph.OpGRUCellGrad:
		widths = []int{3, 0}
		if len(it.In) > 2 {
			widths[1] = 1
		}
	}
	n := 0
	for i, w := range widths {
		if missing(it, i) {
			n += w * it.Matrix.Rows * it.Matrix.Cols
		}
	}
	return int64(n * it.DType.Size())
}

// bindCell binds an LSTM or GRU step or its gradient over parts of its
// rows: one part below geluSplit elements of state (rows × units), as
// gelu splits, one per thread from there on. Rows are independent, so the
// bits do not depend on the split.
func bindCell(part func(arg any, p int)) binder {
	return func(b *Bound) func() error {
		return func() error {
			g := b.Matrix
			b.splits = 1
			if g.Rows*g.Cols >= geluSplit {
				b.splits = min(b.pool.Threads(), g.Rows)
			}
			kernels.ParallelOn(b.pool, b.splits, part, b)
			return nil
		}
	}
}

// lstmCellPart runs part p of b.splits of an LSTM step's rows: z [,
// cPrev] -> h, with c and the activations (its parts).
func lstmCellPart[T kernels.Float](arg any, p int) {
	b := arg.(*Bound)
	g := b.Matrix
	work := tensor.As[T](b.work)
	c := part(b, 0, g.Rows*g.Cols, &work)
	acts := part(b, 1, 5*g.Rows*g.Cols, &work)
	var cPrev []T
	if len(b.in) == 2 {
		cPrev = tensor.As[T](b.in[1])
	}
	lo, hi := p*g.Rows/b.splits, (p+1)*g.Rows/b.splits
	kernels.LSTMCellRows(tensor.As[T](b.out), c, acts, tensor.As[T](b.in[0]), cPrev, g.Cols, lo, hi)
}

// lstmCellGradPart runs part p of b.splits of an LSTM step's gradient:
// acts, dh, dc [, cPrev] -> dz, with dcPrev (its part) when there is a
// previous state.
func lstmCellGradPart[T kernels.Float](arg any, p int) {
	b := arg.(*Bound)
	g := b.Matrix
	var cPrev, dcPrev []T
	if len(b.in) == 4 {
		work := tensor.As[T](b.work)
		cPrev, dcPrev = tensor.As[T](b.in[3]), part(b, 0, g.Rows*g.Cols, &work)
	}
	lo, hi := p*g.Rows/b.splits, (p+1)*g.Rows/b.splits
	kernels.LSTMCellGradRows(tensor.As[T](b.out), dcPrev, tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), tensor.As[T](b.in[2]), cPrev, g.Cols, lo, hi)
}

// layerNormWorkspace: mean and rstd where nothing reads them.
func layerNormWorkspace(t *Target, it *compile.Instr) int64 {
	n := int64(0)
	for i := range 2 {
		if missing(it, i) {
			n += int64(it.Matrix.Rows)
		}
	}
	return n * int64(it.DType.Size())
}

// layerNormGradWorkspace: float64 partial sums of dgamma and dbeta, and
// dgamma and dbeta where nothing reads them.
func layerNormGradWorkspace(t *Target, it *compile.Instr) int64 {
	n := int64(lnChunks(it.Matrix.Rows)*2*it.Matrix.Cols) * 8
	for i := range 2 {
		if missing(it, i) {
			n += int64(it.Matrix.Cols * it.DType.Size())
		}
	}
	return n
}

// attentionWorkspace: the lse where only the backward pass would read it,
// and the tiled kernel's blocks.
func attentionWorkspace(t *Target, it *compile.Instr) int64 {
	p := attnParams(it)
	n := int64(0)
	if missing(it, 0) {
		n += int64(p.B * p.H * p.Tq)
	}
	if it.DType == tensor.Float32 {
		n += int64(kernels.AttentionForwardWorkspace(p, t.threads))
	}
	return n * int64(it.DType.Size())
}

// attentionGradWorkspace: dk and dv where nothing reads them, and the
// tiled kernel's blocks.
func attentionGradWorkspace(t *Target, it *compile.Instr) int64 {
	p := attnParams(it)
	n := int64(0)
	for i := range 2 {
		if missing(it, i) {
			n += int64(p.B * p.Tk * p.H * p.D)
		}
	}
	if it.DType == tensor.Float32 {
		n += int64(kernels.AttentionBackwardWorkspace(p, t.threads))
	}
	return n * int64(it.DType.Size())
}

// missing reports whether part i+1 of it has no buffer (nothing reads it).
func missing(it *compile.Instr, i int) bool { return i >= len(it.Parts) || it.Parts[i] < 0 }

// attnParams converts the instruction's geometry (without the mask and the
// step, which are bound at run time).
func attnParams(it *compile.Instr) kernels.AttentionParams {
	a := it.Attention
	return kernels.AttentionParams{B: a.B, Tq: a.Tq, Tk: a.Tk, H: a.H, D: a.D, Scale: a.Scale,
		Causal: a.Causal != graph.NotCausal, CausalTopLeft: a.Causal == graph.CausalTopLeft,
		DropoutRate: a.Rate, DropoutSeed: a.Seed}
}

// boundParams is attnParams with the mask and the step of this run.
func (b *Bound) boundParams() kernels.AttentionParams {
	p := attnParams(b.Instr)
	if a := b.Attention; a.MaskIn >= 0 {
		p.Mask = b.in[a.MaskIn]
	}
	if a := b.Attention; a.StepIn >= 0 {
		p.DropoutStep = tensor.As[int64](b.in[a.StepIn])[0]
	}
	return p
}

// part returns part i+1's buffer, or, when nothing reads it, the next n
// elements of the workspace (taken from *work).
func part[T kernels.Float](b *Bound, i, n int, work *[]T) []T {
	if i < len(b.more) && b.more[i] != nil {
		return tensor.As[T](b.more[i])
	}
	p := (*work)[:n:n]
	*work = (*work)[n:]
	return p
}

func attention[T kernels.Float](b *Bound) error {
	p := b.boundParams()
	work := tensor.As[T](b.work)
	lse := part(b, 0, p.B*p.H*p.Tq, &work)
	kernels.AttentionForwardOn(b.pool, tensor.As[T](b.out), lse, tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), tensor.As[T](b.in[2]), p, work)
	return nil
}

// attentionGrad reads q, k, v, o, lse, do and writes dq (its output), dk
// and dv (its parts).
func attentionGrad[T kernels.Float](b *Bound) error {
	p := b.boundParams()
	work := tensor.As[T](b.work)
	nk := p.B * p.Tk * p.H * p.D
	dk := part(b, 0, nk, &work)
	dv := part(b, 1, nk, &work)
	in := func(i int) []T { return tensor.As[T](b.in[i]) }
	kernels.AttentionBackwardOn(b.pool, tensor.As[T](b.out), dk, dv, in(5), in(3), in(4), in(0), in(1), in(2), p, work)
	return nil
}

// unsliceAdd writes acc with x added at Starts; in place when the output
// is acc's buffer.
func unsliceAdd[T kernels.Float](b *Bound) error {
	out, acc := tensor.As[T](b.out), tensor.As[T](b.in[0])
	if &out[0] != &acc[0] {
		copy(out, acc)
	}
	kernels.AddRegion(out, tensor.As[T](b.in[1]), b.Shape, b.Move.Starts, b.Move.Ends)
	return nil
}

// cacheWrite writes x [B, n, ...] over rows [pos, pos+n) of the cache
// [B, L, ...]; in place when the output is the cache's buffer.
func cacheWrite(b *Bound) error {
	out, cache, x := b.out, b.in[0], b.in[1]
	pos := int(tensor.As[int32](b.in[2])[0])
	L, n := b.Shape[1], b.Move.XShape[1]
	if pos < 0 || pos+n > L {
		return b.fail("position %d: %d rows do not fit a cache of %d", pos, n, L)
	}
	if len(out) > 0 && len(x) > 0 && &out[0] == &x[0] {
		return nil // n == L: the output is x itself
	}
	if len(out) > 0 && &out[0] != &cache[0] {
		copy(out, cache)
	}
	row := len(out) / max(1, b.Shape[0]*L) // bytes of one position
	for i := 0; i < b.Shape[0]; i++ {
		copy(out[(i*L+pos)*row:(i*L+pos+n)*row], x[i*n*row:(i+1)*n*row])
	}
	return nil
}

// geluSplit is the element count from which gelu and its gradient are
// split over the kernels' threads.
const geluSplit = 1 << 15

// splitting binds an op that runs part over its elements, in parts on the
// kernels' threads when there are many (split).
func splitting(part func(arg any, p int)) binder {
	return func(b *Bound) func() error {
		return func() error {
			split(b, part)
			return nil
		}
	}
}

// geluPart runs part p of b.splits of a gelu.
func geluPart[T kernels.Float](arg any, p int) {
	b := arg.(*Bound)
	n := len(b.out) / b.DType.Size()
	lo, hi := p*n/b.splits, (p+1)*n/b.splits
	kernels.Gelu(tensor.As[T](b.out)[lo:hi], tensor.As[T](b.in[0])[lo:hi])
}

// geluGradPart runs part p of b.splits of a gelu's gradient.
func geluGradPart[T kernels.Float](arg any, p int) {
	b := arg.(*Bound)
	n := len(b.out) / b.DType.Size()
	lo, hi := p*n/b.splits, (p+1)*n/b.splits
	kernels.GeluGrad(tensor.As[T](b.out)[lo:hi], tensor.As[T](b.in[0])[lo:hi], tensor.As[T](b.in[1])[lo:hi])
}

// split runs part over the instruction's elements, in parts on the kernels'
// threads when there are many. It allocates nothing: part is a function
// value made when the program was bound (a generic instantiation's is a
// closure over its dictionary, allocated where it is made).
func split(b *Bound, part func(arg any, p int)) {
	b.splits = 1
	if len(b.out)/b.DType.Size() >= geluSplit {
		b.splits = b.pool.Threads()
	}
	kernels.ParallelOn(b.pool, b.splits, part, b)
}

// lnChunks is how many parts the rows of a layer norm are split into: a
// fixed count, not the threads', so that the gradient's partial sums, and
// the order they are added in, never depend on the threads.
func lnChunks(rows int) int { return max(1, min(rows, 16)) }

// bindLayerNorm binds a layer norm over chunks of its rows (part).
func bindLayerNorm(part func(arg any, p int)) binder {
	return func(b *Bound) func() error {
		return func() error {
			b.splits = lnChunks(b.Matrix.Rows)
			kernels.ParallelOn(b.pool, b.splits, part, b)
			return nil
		}
	}
}

// layerNormPart normalizes chunk p of b.splits of the rows.
func layerNormPart[T kernels.Float](arg any, p int) {
	b := arg.(*Bound)
	work := tensor.As[T](b.work)
	g := b.Matrix
	mean := part(b, 0, g.Rows, &work)
	rstd := part(b, 1, g.Rows, &work)
	lo, hi := p*g.Rows/b.splits, (p+1)*g.Rows/b.splits
	kernels.LayerNormRows(tensor.As[T](b.out), mean, rstd, tensor.As[T](b.in[0]), tensor.As[T](b.in[1]), tensor.As[T](b.in[2]), g.Cols, g.Eps, lo, hi)
}

// bindLayerNormGrad binds the gradient of a layer norm: it reads x, gamma,
// mean, rstd and dy and writes dx (its output), dgamma and dbeta (its
// parts); each chunk of rows adds its terms to partial sums of its own in
// the workspace, which are then added up in chunk order.
func bindLayerNormGrad[T kernels.Float](b *Bound) func() error {
	chunk := layerNormGradPart[T] // made once, here
	return func() error {
		b.splits = lnChunks(b.Matrix.Rows)
		sums := tensor.As[float64](b.work[:b.splits*2*b.Matrix.Cols*8])
		clear(sums)
		kernels.ParallelOn(b.pool, b.splits, chunk, b)
		layerNormGradSums[T](b, sums)
		return nil
	}
}

// layerNormGradSums adds the chunks' partial sums, in chunk order, into
// dgamma and dbeta.
func layerNormGradSums[T kernels.Float](b *Bound, sums []float64) {
	C := b.Matrix.Cols
	rest := tensor.As[T](b.work[b.splits*2*C*8:])
	dg := part(b, 0, C, &rest)
	db := part(b, 1, C, &rest)
	for j := 0; j < C; j++ {
		var g, s float64
		for p := 0; p < b.splits; p++ {
			g += sums[p*2*C+j]
			s += sums[p*2*C+C+j]
		}
		dg[j], db[j] = T(g), T(s)
	}
}

// layerNormGradPart computes chunk p of b.splits of the rows.
func layerNormGradPart[T kernels.Float](arg any, p int) {
	b := arg.(*Bound)
	C, rows := b.Matrix.Cols, b.Matrix.Rows
	sums := tensor.As[float64](b.work[p*2*C*8 : (p+1)*2*C*8])
	lo, hi := p*rows/b.splits, (p+1)*rows/b.splits
	in := func(i int) []T { return tensor.As[T](b.in[i]) }
	kernels.LayerNormGradRows(tensor.As[T](b.out), sums[:C], sums[C:], in(4), in(0), in(1), in(2), in(3), C, lo, hi)
}
