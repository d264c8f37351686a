package cpu

import (
	"fmt"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The kernel table: one entry per op the host runs, set by a register call
// in the file of the op's family (elementwise.go, cast.go, reduce.go,
// linalg.go, softmax.go, movement.go, conv.go, vision.go, sequence.go,
// collective.go, fused.go). It is the single truth of what the host runs:
// Target.Supports answers from it, Target.Lower and Target.Scratch size
// from it, and Bind takes each instruction's kernel from it.
// TestEveryLoweredOpHasAKernel fails for an op compile lowers that has no
// entry here.

// numDTypes bounds tensor's dtypes: tensor.Bool is the last.
const numDTypes = int(tensor.Bool) + 1

// A binder returns the function that runs b, bound to b's buffers (and,
// for the typed kernels, to typed views of them): chosen once, when the
// program is bound, so that a run calls it directly. nil: no kernel for
// b's dtypes.
type binder func(b *Bound) func() error

// kernel is how the host runs one op.
type kernel struct {
	// bind[dt] binds an instruction of dtype dt (its output's, or its
	// first operand's where byOperand); nil where the host has no kernel.
	bind      [numDTypes]binder
	byOperand bool
	// lower completes an instruction for the host and returns the bytes of
	// workspace it needs (Target.Lower); nil: none.
	lower func(t *Target, it *compile.Instr) int64
	// scratch returns the float32 elements of packing buffers per thread
	// that a float32 instruction needs (Target.Scratch); nil: none.
	scratch func(it *compile.Instr) int
	// step runs the op as one step of a fused chain: every op compile
	// may fuse (compile.Fusable) has one.
	step *stepKernel
}

// stepKernel runs one op of a fused chain over a chunk of elements: dst =
// op(a, b), b unused by a one-operand op. A guard (where) has no function:
// dst = cond ? b : c, cond a one-byte LeafCond leaf.
type stepKernel struct {
	f32      func(dst, a, b []float32)
	f64      func(dst, a, b []float64)
	operands int // 1 or 2; 3 for a guard
}

// ops is the kernel table, by op.
var ops [graph.NumOps]kernel

// register sets op's kernel when the package initializes. A second
// registration of one op is a programming error.
func register(op graph.Op, k kernel) {
	if ops[op].registered() {
		panic(fmt.Sprintf("cpu: op %s registered twice", op))
	}
	ops[op] = k
}

func (k *kernel) registered() bool {
	for _, b := range k.bind {
		if b != nil {
			return true
		}
	}
	return false
}

// binderOf returns the binder of an instruction of op with dtypes dtype
// and in (see compile.Target.Supports), or nil.
func binderOf(op graph.Op, dtype, in tensor.DType) binder {
	if op >= graph.NumOps {
		return nil
	}
	k := &ops[op]
	if k.byOperand {
		dtype = in
	}
	if int(dtype) >= numDTypes {
		return nil
	}
	return k.bind[dtype]
}

// floats binds float32 instructions with f32 and float64 ones with f64.
func floats(f32, f64 binder) [numDTypes]binder {
	var b [numDTypes]binder
	b[tensor.Float32], b[tensor.Float64] = f32, f64
	return b
}

// bySize binds an instruction of any dtype with the binder of its element
// size: data movement, which never looks at the values.
func bySize(b1, b2, b4, b8 binder) [numDTypes]binder {
	var b [numDTypes]binder
	for dt := tensor.DType(1); int(dt) < numDTypes; dt++ {
		b[dt] = [9]binder{1: b1, 2: b2, 4: b4, 8: b8}[dt.Size()]
	}
	return b
}

// every binds an instruction of any dtype with f.
func every(f binder) [numDTypes]binder {
	var b [numDTypes]binder
	for dt := tensor.DType(1); int(dt) < numDTypes; dt++ {
		b[dt] = f
	}
	return b
}

// fromBound adapts a kernel that reads its views from the bound
// instruction when it runs to a binder.
func fromBound(f func(b *Bound) error) binder {
	return func(b *Bound) func() error { return func() error { return f(b) } }
}
