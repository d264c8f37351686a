package autodiff

import (
	"testing"

	"github.com/headroom-ml/headroom/graph"
)

// TestEveryOpHasAVJPEntry fails for an op of the graph package without an
// entry in the VJP table: a rule registered from its family's file, a
// rule that passes no gradient (registerZero), or the statement that it
// has none and why (registerNoRule: internal gradient ops, leaves,
// collectives). TestGradientsCoverEveryRule then checks every rule against
// central differences.
func TestEveryOpHasAVJPEntry(t *testing.T) {
	for op := graph.Op(1); op < graph.NumOps; op++ {
		e := rules[op]
		switch {
		case e.rule == nil && e.why == "":
			t.Errorf("op %s has no VJP entry: register a rule in its family's file, or registerNoRule with the reason", op)
		case e.rule != nil && e.why != "":
			t.Errorf("op %s has a rule and a reason to have none (%s)", op, e.why)
		}
	}
}
