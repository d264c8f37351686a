package compile

import (
	"testing"

	"github.com/headroom-ml/headroom/graph"
)

// TestEveryOpIsLowered fails for an op of the graph package that has no
// entry in the lowering table: a lowering registered from its family's
// lower_*.go file, or registerNoInstr with the reason it runs no
// instruction of its own.
func TestEveryOpIsLowered(t *testing.T) {
	for op := graph.Op(1); op < graph.NumOps; op++ {
		l := lowerings[op]
		switch {
		case !l.set:
			t.Errorf("op %s has no lowering: register one in the lower_*.go file of its family (registerNoInstr if it runs no instruction)", op)
		case l.noInstr != "" && (l.lower != nil || l.fusable != nil || l.flops != nil || l.collective):
			t.Errorf("op %s runs no instruction (%s) but its entry says how to lower it", op, l.noInstr)
		case l.fusable != nil && op.Class() != graph.ClassElementwise:
			t.Errorf("op %s may join a fused chain but is not elementwise (class %d)", op, op.Class())
		}
		if Lowered(op) != (l.set && l.noInstr == "") {
			t.Errorf("Lowered(%s) = %v, want %v", op, Lowered(op), !Lowered(op))
		}
	}
}
