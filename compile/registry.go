package compile

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The lowering table: one entry per op, set by a register call in the
// file of the op's family (lower_elementwise.go, lower_reduce.go,
// lower_linalg.go, lower_softmax.go, lower_movement.go, lower_conv.go,
// lower_vision.go, lower_sequence.go, lower_collective.go,
// lower_leaves.go; fuse.go for the fused chains the fusion pass makes).
// TestEveryOpIsLowered fails for an op without an entry.

// lowering is how compile lowers one op.
type lowering struct {
	set bool // registered
	// noInstr, when set, says why the op runs no instruction of its own
	// (a leaf, a view, a further output); the other fields are unused.
	noInstr string
	// lower completes an instruction whose header lowerNode has set with
	// the op's payload; nil when the header says everything.
	lower func(n *graph.Node, it *Instr)
	// fusable reports whether node n may join a fused elementwise chain
	// (nil: never); the chain's Target runs it step by step (Fused).
	fusable func(n *graph.Node) bool
	// collective: the op exchanges data with the other processes of a
	// data-parallel run, so its value is not a function of its inputs here
	// and it is never folded.
	collective bool
	// flops estimates the floating-point operations of one run of it,
	// whose output has out elements (Program.Cost); nil: out.
	flops func(it *Instr, out float64) float64
}

var lowerings [graph.NumOps]lowering

// register sets op's lowering when the package initializes. A second
// registration of one op is a programming error.
func register(op graph.Op, l lowering) {
	if lowerings[op].set {
		panic(fmt.Sprintf("compile: op %s registered twice", op))
	}
	l.set = true
	lowerings[op] = l
}

// registerNoInstr records that ops run no instruction of their own, and
// why.
func registerNoInstr(why string, ops ...graph.Op) {
	for _, op := range ops {
		register(op, lowering{noInstr: why})
	}
}

// always is the fusable predicate of ops that always may join a chain.
func always(*graph.Node) bool { return true }

// Lowered reports whether compile lowers op to instructions of its own,
// which a Target must run: every op but the leaves, views and further
// outputs, and the fused chains the fusion pass makes.
func Lowered(op graph.Op) bool {
	return op < graph.NumOps && lowerings[op].set && lowerings[op].noInstr == ""
}

// Fusable reports whether op may be a step of a fused chain (Fused.Steps):
// a Target that runs FuseElementwise runs every such op in a chain.
func Fusable(op graph.Op) bool { return op < graph.NumOps && lowerings[op].fusable != nil }

// lowerNode returns the instruction that computes n into buffer out from
// the buffers ins of its inputs, with every size and stride precomputed:
// the header here, the op's payload by its lowering.
func lowerNode(n *graph.Node, out int, ins []int) Instr {
	x := n.Inputs()[0]
	it := Instr{Op: n.Op(), Node: n.ID(), Owner: n.Owner(), Site: n.Site(), DType: n.DType(),
		InDType: x.DType(), Out: out, In: ins, Shape: n.Shape(), Work: -1}
	if l := lowerings[n.Op()]; l.lower != nil {
		l.lower(n, &it)
	}
	return it
}

// UnsupportedError is a program with an instruction its Target does not
// run: the op, its dtypes and the node that needs it. Compile returns it
// before planning, so nothing has been reserved.
type UnsupportedError struct {
	Target  string
	Op      graph.Op
	DType   tensor.DType // the instruction's (its output's)
	InDType tensor.DType // its first operand's
	Owner   string       // the node's owner: its layer and op
	Site    string       // the user's file:line
}

func (e *UnsupportedError) Error() string {
	types := "on " + e.DType.String()
	if e.InDType != e.DType {
		types = fmt.Sprintf("from %s to %s", e.InDType, e.DType)
	}
	return fmt.Sprintf("compile: target %s does not run %s %s (%s, built at %s)", e.Target, e.Op, types, e.Owner, e.Site)
}

// checkSupport returns an *UnsupportedError for the first live node whose
// instruction t does not run (Target.Supports), before anything is
// planned or folded.
func checkSupport(g *graph.Graph, live []bool, t Target) error {
	for _, n := range g.Nodes() {
		if !live[n.ID()] || lowerings[n.Op()].noInstr != "" {
			continue
		}
		if !lowerings[n.Op()].set {
			return fmt.Errorf("compile: op %s (%s, built at %s) has no lowering", n.Op(), n.Owner(), n.Site())
		}
		it := lowerNode(n, 0, nil)
		if !t.Supports(it.Op, it.DType, it.InDType) {
			return &UnsupportedError{Target: t.Name(), Op: it.Op, DType: it.DType, InDType: it.InDType, Owner: n.Owner(), Site: n.Site()}
		}
	}
	return nil
}
