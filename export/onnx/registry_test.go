package onnx

import (
	"testing"

	"github.com/headroom-ml/headroom/graph"
)

// TestEveryOpHasAnExportEntry fails for an op of the graph package without
// an entry in the op table: a translation (batch rule and emitter)
// registered from its family's file, or registerNotExportable with the
// reason Write gives.
func TestEveryOpHasAnExportEntry(t *testing.T) {
	for op := graph.Op(1); op < graph.NumOps; op++ {
		r := rules[op]
		switch {
		case r.emit == nil && r.why == "":
			t.Errorf("op %s has no ONNX entry: register a translation in its family's file, or registerNotExportable with the reason", op)
		case (r.emit == nil) != (r.batch == nil):
			t.Errorf("op %s has an emitter without a batch rule, or the reverse", op)
		case r.emit != nil && r.why != "":
			t.Errorf("op %s has a translation and a reason not to export it (%s)", op, r.why)
		}
	}
}

// TestEveryTranslationIsRun: every op with a translation is in one of the
// models the onnxruntime tests export and run (testModels), so a new
// translation comes with a case there.
func TestEveryTranslationIsRun(t *testing.T) {
	ran := map[graph.Op]bool{}
	for _, m := range testModels(t) {
		g, _, outs := m.build(2)
		live := liveNodes(Model{Graph: g, Outputs: outs})
		for _, n := range g.Nodes() {
			if live[n.ID()] {
				ran[n.Op()] = true
			}
		}
	}
	for op := graph.Op(1); op < graph.NumOps; op++ {
		if rules[op].emit != nil && !ran[op] {
			t.Errorf("op %s has a translation but no test model (testModels) exports it", op)
		}
	}
}
