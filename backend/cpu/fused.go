package cpu

import (
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The fused chains compile's fusion pass makes (compile.Fused) on the
// host: each step runs the chunk kernel of its op (kernel.step), taken
// from the table when the chain is bound.
func init() {
	register(graph.OpFused, kernel{lower: lowerFused, bind: floats(
		bindFused(func(k *stepKernel) func(dst, a, b []float32) { return k.f32 }),
		bindFused(func(k *stepKernel) func(dst, a, b []float64) { return k.f64 }))})
}

// lowerFused sets a chain's chunk and threads and returns its workspace:
// registers and staged leaves, for each thread.
func lowerFused(t *Target, it *compile.Instr) int64 {
	f := it.Fused
	size := tensor.Shape(it.Shape).Size()
	f.Chunk, f.Threads = max(1, min(FusedChunk, size)), 1
	if size >= ParallelMin {
		f.Threads = t.threads
	}
	return int64(fusedScratchElems(f) * it.DType.Size())
}

// fusedScratchElems returns the workspace elements the chain needs: for
// each thread, its registers and a chunk for each leaf that is not read in
// place.
func fusedScratchElems(f *compile.Fused) int {
	return slotElems(f) * max(1, f.Threads)
}

func slotElems(f *compile.Fused) int {
	n := f.Regs
	for _, l := range f.Leaves {
		if inWorkspace(l.Kind) {
			n++
		}
	}
	return n * f.Chunk
}

// inWorkspace reports whether a leaf of kind k is staged in a workspace
// chunk (scalars and periodic leaves); full leaves are read in place and a
// condition is one byte read once.
func inWorkspace(k compile.LeafKind) bool {
	return k == compile.LeafScalar || k == compile.LeafPeriodic
}

// fusedRun is a fused chain bound to typed views of its buffers and to
// the chunk kernel of each step.
type fusedRun[T kernels.Float] struct {
	f      *compile.Fused
	total  int // the output's elements
	out    []T
	work   []T
	leaves [][]T    // each leaf's elements (nil for a condition)
	conds  [][]byte // each condition leaf's byte (nil for the others)
	slot   []int    // workspace slot of each staged leaf
	steps  []fusedStep[T]
	part   func(arg any, t int) // fusedPart[T], made once when bound
	pool   *kernels.Pool
}

// fusedStep is a step of a chain bound to its chunk kernel: dst = run(a,
// b), or for a guard (run nil) dst = cond ? b : c.
type fusedStep[T kernels.Float] struct {
	run      func(dst, a, b []T)
	operands int
	dst      int
	a, b, c  int
}

// bindFused binds a chain, each step to the chunk kernel pick takes from
// its op's step kernel.
func bindFused[T kernels.Float](pick func(k *stepKernel) func(dst, a, b []T)) binder {
	return func(b *Bound) func() error {
		f := b.Fused
		r := &fusedRun[T]{pool: b.pool, f: f, total: tensor.Shape(b.Shape).Size(), out: tensor.As[T](b.out), work: tensor.As[T](b.work),
			leaves: make([][]T, len(b.in)), conds: make([][]byte, len(b.in)), slot: make([]int, len(b.in)), part: fusedPart[T]}
		slot := 0
		for i, l := range f.Leaves {
			if l.Kind == compile.LeafCond {
				r.conds[i] = b.in[i]
			} else {
				r.leaves[i] = tensor.As[T](b.in[i])
			}
			if inWorkspace(l.Kind) {
				r.slot[i] = slot
				slot++
			}
		}
		r.steps = make([]fusedStep[T], len(f.Steps))
		for i, s := range f.Steps {
			k := ops[s.Op].step
			if k == nil {
				return nil // not an op a chain runs: Bind reports it
			}
			r.steps[i] = fusedStep[T]{run: pick(k), operands: k.operands, dst: s.Dst, a: s.A, b: s.B, c: s.C}
		}
		return r.run
	}
}

// run runs the chain split over its threads, as parts on the kernels'
// worker pool (kernels.ParallelOn); part t uses the registers of slot t.
// Nothing is allocated.
func (r *fusedRun[T]) run() error {
	if r.f.Threads <= 1 || r.total < ParallelMin {
		r.runRange(0, r.total, 0)
		return nil
	}
	kernels.ParallelOn(r.pool, r.f.Threads, r.part, r)
	return nil
}

// fusedPart runs part t of the chain arg (a *fusedRun[T]) over its
// threads' parts.
func fusedPart[T kernels.Float](arg any, t int) {
	r := arg.(*fusedRun[T])
	total := r.total
	// split on chunk boundaries so periodic leaves stay aligned per chunk
	per := (total/r.f.Threads + r.f.Chunk - 1) / r.f.Chunk * r.f.Chunk
	lo := min(t*per, total)
	r.runRange(lo, min(lo+per, total), t)
}

// runRange runs the chain over elements [lo, hi) with the registers of
// thread slot.
func (r *fusedRun[T]) runRange(lo, hi, slot int) {
	f := r.f
	out := r.out
	work := r.work[slot*slotElems(f) : (slot+1)*slotElems(f)]
	leaves := r.leaves
	// Registers and broadcast leaves live in the workspace, one chunk each.
	chunk := f.Chunk
	reg := func(x int) []T { return work[x*chunk : (x+1)*chunk] }
	leafReg := func(k int) []T { return work[(f.Regs+r.slot[k])*chunk : (f.Regs+r.slot[k]+1)*chunk] }
	// A periodic leaf whose period divides the chunk reads the same
	// segment in every chunk (chunks start at multiples of the chunk, see
	// fusedPart): it is staged once, like a scalar.
	staged := func(l compile.FusedLeaf) bool {
		return l.Kind == compile.LeafPeriodic && chunk%l.Period == 0 && lo%chunk == 0
	}
	for k, l := range f.Leaves {
		switch {
		case l.Kind == compile.LeafScalar:
			kernels.Fill(leafReg(k), leaves[k][0])
		case staged(l):
			src, dst := leaves[k], leafReg(k)
			for j := 0; j < chunk; j += l.Period {
				copy(dst[j:j+l.Period], src)
			}
		}
	}
	for i := lo; i < hi; i += chunk {
		n := min(chunk, hi-i)
		operand := func(x int) []T {
			if x >= 0 {
				return reg(x)[:n]
			}
			k := -x - 1
			switch f.Leaves[k].Kind {
			case compile.LeafFull:
				return leaves[k][i : i+n]
			case compile.LeafScalar:
				return leafReg(k)[:n]
			}
			if staged(f.Leaves[k]) {
				return leafReg(k)[:n]
			}
			// periodic: copy the segment(s) of the period this chunk covers
			src, dst := leaves[k], leafReg(k)[:n]
			p := f.Leaves[k].Period
			for j := 0; j < n; {
				at := (i + j) % p
				c := copy(dst[j:], src[at:])
				j += c
			}
			return dst
		}
		for _, s := range r.steps {
			var dst []T
			if s.dst < 0 {
				dst = out[i : i+n]
			} else {
				dst = reg(s.dst)[:n]
			}
			if s.run == nil { // a guard
				src := operand(s.c)
				if r.conds[-s.a-1][0] != 0 {
					src = operand(s.b)
				}
				copy(dst, src) // a no-op when dst is src (an assign in place)
				continue
			}
			a := operand(s.a)
			var b []T
			if s.operands > 1 {
				b = operand(s.b)
			}
			s.run(dst, a, b)
		}
	}
}
