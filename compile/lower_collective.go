package compile

import (
	"github.com/headroom-ml/headroom/graph"
)

// The lowering of the collectives (graph/gradops.go): their header says
// everything but the link of a wait (all_reduce_wait, reduce_scatter_wait,
// all_gather_wait) to its start, which lower sets once the instructions
// are numbered. None is ever folded.
func init() {
	for _, op := range []graph.Op{graph.OpAllReduce, graph.OpReduceScatter, graph.OpAllGather, graph.OpAllReduceStart, graph.OpAllReduceWait,
		graph.OpReduceScatterStart, graph.OpReduceScatterWait, graph.OpAllGatherStart, graph.OpAllGatherWait} {
		register(op, lowering{collective: true})
	}
}
