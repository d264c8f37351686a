package onnx

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
)

// The op table: one entry per op, set by a register call in the file of
// the op's family (elementwise.go, reduce.go, softmax.go, linalg.go,
// movement.go, conv.go, vision.go, sequence.go; the leaves and the
// training step's effects here). An entry is a translation, or the
// statement that the op is not exportable and why, which Write returns as
// the *UnsupportedError's Why. TestEveryOpHasAnExportEntry fails for an op
// without one.

// rule is how one graph op is exported: batch returns the batch axis of
// the node's value (see batch.go), emit appends the ONNX nodes that compute
// it and returns the name of the value.
type rule struct {
	batch func(c *converter, n *graph.Node) (int, error)
	emit  func(c *converter, n *graph.Node) (string, error)
	// product: an int8 export quantizes the op's computed operands
	// (Quantized) and stores its weights as int8.
	product bool
	// why the op is not exportable (batch and emit nil).
	why string
}

var rules [graph.NumOps]rule

// register sets op's translation when the package initializes. A second
// registration of one op is a programming error.
func register(op graph.Op, r rule) {
	if old := rules[op]; old.emit != nil || old.why != "" {
		panic(fmt.Sprintf("onnx: op %s registered twice", op))
	}
	rules[op] = r
}

// registerNotExportable records that ops are not exported, and why.
func registerNotExportable(why string, ops ...graph.Op) {
	for _, op := range ops {
		register(op, rule{why: why})
	}
}

// trainingOnly is why a training step's gradient ops are not exported.
const trainingOnly = "an op of a training step's backward pass: export the inference graph"

// The leaves are graph inputs and initializers; a training step's effects
// are not exported.
func init() {
	register(graph.OpInput, rule{batch: batchLeaf, emit: emitLeaf})
	register(graph.OpVariable, rule{batch: batchLeaf, emit: emitLeaf})
	register(graph.OpConstant, rule{batch: batchLeaf, emit: emitLeaf})
	registerNotExportable("a training step's variable update: export the inference graph", graph.OpAssign)
	registerNotExportable("a collective of data-parallel training: export the inference graph",
		graph.OpAllReduce, graph.OpReduceScatter, graph.OpAllGather, graph.OpAllReduceStart, graph.OpAllReduceWait,
		graph.OpReduceScatterStart, graph.OpReduceScatterWait, graph.OpAllGatherStart, graph.OpAllGatherWait)
}

// emitLeaf: an Input is a graph input (named in newConverter); a Variable
// or Constant becomes an initializer when first read (in).
func emitLeaf(c *converter, n *graph.Node) (string, error) { return c.value[n.ID()], nil }
