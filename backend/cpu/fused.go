package cpu

import (
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

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

// runFused runs the chain over elements [lo, hi) with the registers of
// thread slot.
func runFused[T kernels.Float](b *Bound, lo, hi, slot int) {
	f := b.Fused
	out := tensor.As[T](b.out)
	work := tensor.As[T](b.work)
	work = work[slot*slotElems(f) : (slot+1)*slotElems(f)]
	leaves := b.leafViews
	// Registers and broadcast leaves live in the workspace, one chunk each.
	chunk := f.Chunk
	reg := func(r int) []T { return work[r*chunk : (r+1)*chunk] }
	leafReg := func(k int) []T { return work[(f.Regs+b.leafSlot[k])*chunk : (f.Regs+b.leafSlot[k]+1)*chunk] }
	// A periodic leaf whose period divides the chunk reads the same
	// segment in every chunk (chunks start at multiples of the chunk, see
	// fusedPart): it is staged once, like a scalar.
	staged := func(l compile.FusedLeaf) bool {
		return l.Kind == compile.LeafPeriodic && chunk%l.Period == 0 && lo%chunk == 0
	}
	for k, l := range f.Leaves {
		switch {
		case l.Kind == compile.LeafScalar:
			kernels.Fill(leafReg(k), tensor.As[T](leaves[k])[0])
		case staged(l):
			src, dst := tensor.As[T](leaves[k]), leafReg(k)
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
				return tensor.As[T](leaves[k])[i : i+n]
			case compile.LeafScalar:
				return leafReg(k)[:n]
			}
			if staged(f.Leaves[k]) {
				return leafReg(k)[:n]
			}
			// periodic: copy the segment(s) of the period this chunk covers
			src, dst := tensor.As[T](leaves[k]), leafReg(k)[:n]
			p := f.Leaves[k].Period
			for j := 0; j < n; {
				at := (i + j) % p
				c := copy(dst[j:], src[at:])
				j += c
			}
			return dst
		}
		for _, s := range f.Steps {
			var dst []T
			if s.Dst < 0 {
				dst = out[i : i+n]
			} else {
				dst = reg(s.Dst)[:n]
			}
			if s.Op == graph.OpWhere {
				src := operand(s.C)
				if leaves[-s.A-1][0] != 0 {
					src = operand(s.B)
				}
				copy(dst, src) // a no-op when dst is src (an assign in place)
				continue
			}
			a := operand(s.A)
			switch s.Op {
			case graph.OpNeg:
				kernels.Neg(dst, a)
			case graph.OpExp:
				kernels.Exp(dst, a)
			case graph.OpLog:
				kernels.Log(dst, a)
			case graph.OpSqrt:
				kernels.Sqrt(dst, a)
			case graph.OpRelu:
				kernels.Relu(dst, a)
			case graph.OpSigmoid:
				kernels.Sigmoid(dst, a)
			case graph.OpTanh:
				kernels.Tanh(dst, a)
			case graph.OpErf:
				kernels.Erf(dst, a)
			case graph.OpAbs:
				kernels.Abs(dst, a)
			case graph.OpReluGrad:
				kernels.ReluGrad(dst, a, operand(s.B))
			case graph.OpSigmoidGrad:
				kernels.SigmoidGrad(dst, a, operand(s.B))
			case graph.OpTanhGrad:
				kernels.TanhGrad(dst, a, operand(s.B))
			default:
				kernels.Binary(binaryOp(s.Op), dst, a, operand(s.B))
			}
		}
	}
}

// fusedParallel runs b's chain split over its threads, as parts on the
// kernels' worker pool (kernels.Parallel); part t uses the registers of
// slot t. Nothing is allocated.
func (b *Bound) fusedParallel() {
	total := tensor.Shape(b.Shape).Size()
	threads := b.Fused.Threads
	if threads <= 1 || total < ParallelMin {
		b.fusedRange(0, total, 0)
		return
	}
	kernels.Parallel(threads, fusedPart, b)
}

// fusedPart runs part t of the chain of arg (a *Bound) over threads parts.
func fusedPart(arg any, t int) {
	b := arg.(*Bound)
	total := tensor.Shape(b.Shape).Size()
	// split on chunk boundaries so periodic leaves stay aligned per chunk
	per := (total/b.Fused.Threads + b.Fused.Chunk - 1) / b.Fused.Chunk * b.Fused.Chunk
	lo := min(t*per, total)
	b.fusedRange(lo, min(lo+per, total), t)
}

func (b *Bound) fusedRange(lo, hi, slot int) {
	if b.DType == tensor.Float32 {
		runFused[float32](b, lo, hi, slot)
	} else {
		runFused[float64](b, lo, hi, slot)
	}
}
