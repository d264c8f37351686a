package cpu

import (
	"testing"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// TestEveryLoweredOpHasAKernel fails for an op compile lowers to an
// instruction (compile.Lowered) that has no entry in the kernel table, for
// an op compile may fuse (compile.Fusable) without a chain step, and for
// an entry of an op compile never lowers (a kernel nothing can reach).
func TestEveryLoweredOpHasAKernel(t *testing.T) {
	for op := graph.Op(1); op < graph.NumOps; op++ {
		k := &ops[op]
		switch {
		case compile.Lowered(op) && !k.registered():
			t.Errorf("op %s is lowered by compile but has no kernel: register one in its family's file", op)
		case !compile.Lowered(op) && k.registered():
			t.Errorf("op %s has a kernel but compile never lowers it", op)
		}
		if compile.Fusable(op) {
			if s := k.step; s == nil || (s.operands < 3 && (s.f32 == nil || s.f64 == nil)) {
				t.Errorf("op %s may be fused by compile but has no step kernel for float32 and float64", op)
			}
		}
	}
	if last := tensor.DType(numDTypes - 1); !last.Valid() || tensor.DType(numDTypes).Valid() {
		t.Errorf("numDTypes %d does not bound tensor's dtypes", numDTypes)
	}
}
