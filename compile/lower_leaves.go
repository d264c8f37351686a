package compile

import (
	"github.com/headroom-ml/headroom/graph"
)

// The leaves and the side effect (graph/leaves.go): leaves are buffers,
// not instructions; an Assign runs a copy only where its value could not
// be written straight into the variable (buffers.go).
func init() {
	registerNoInstr("a leaf: a buffer of the plan, fed, persistent or constant", graph.OpInput, graph.OpVariable, graph.OpConstant)
	// variable, value -> the value copied into the variable's buffer
	register(graph.OpAssign, lowering{})
}
