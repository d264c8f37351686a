package autodiff

import "github.com/headroom-ml/headroom/graph"

// The leaves, the side effect (graph/leaves.go) and the collectives
// (graph/gradops.go) have no rules: a leaf ends the sweep (a variable's
// gradient is what Grad returns), Assign has no value to differentiate,
// and train builds the collectives for gradients, after differentiation.
func init() {
	registerNoRule("a leaf: the sweep ends here", graph.OpInput, graph.OpVariable, graph.OpConstant)
	registerNoRule("a side effect: an assign has no value to differentiate", graph.OpAssign)
	registerNoRule("a collective of data-parallel training, built for gradients after differentiation",
		graph.OpAllReduce, graph.OpReduceScatter, graph.OpAllGather, graph.OpAllReduceStart, graph.OpAllReduceWait,
		graph.OpReduceScatterStart, graph.OpReduceScatterWait, graph.OpAllGatherStart, graph.OpAllGatherWait)
}
