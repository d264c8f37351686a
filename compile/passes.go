package compile

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// constant is a value known at compile time: a Constant node's, or a folded one.
type constant struct {
	value tensor.Tensor
}

// prune returns, by node id, whether the node is needed to compute roots.
// Nodes in konst are leaves: their inputs are not needed. Every Input is kept.
func prune(g *graph.Graph, roots []*graph.Node, konst map[int]constant) []bool {
	live := make([]bool, g.Len())
	for _, r := range roots {
		live[r.ID()] = true
	}
	nodes := g.Nodes()
	for id := len(nodes) - 1; id >= 0; id-- {
		if !live[id] {
			continue
		}
		if _, ok := konst[id]; ok {
			continue
		}
		for _, in := range nodes[id].Inputs() {
			live[in.ID()] = true
		}
	}
	for _, n := range g.InputNodes() {
		live[n.ID()] = true
	}
	return live
}

// checkAssigns rejects a read of a variable built after the variable's
// Assign: the step would not know which value it means.
func checkAssigns(g *graph.Graph, live []bool) error {
	assignAt := map[int]*graph.Node{} // variable id -> its Assign
	for _, a := range g.Assigns() {
		assignAt[a.Inputs()[0].ID()] = a
	}
	for _, n := range g.Nodes() {
		if !live[n.ID()] || n.Op() == graph.OpAssign {
			continue
		}
		for _, in := range n.Inputs() {
			if a, ok := assignAt[viewOf(in).ID()]; ok && n.ID() > a.ID() {
				return fmt.Errorf("compile: %s (built at %s) reads variable %q after its assign (built at %s); build every read of a variable before its update", n.Owner(), n.Site(), a.Inputs()[0].Attr().Name, a.Site())
			}
		}
	}
	return nil
}

// viewOf follows Reshape views back to the node that owns the bytes.
func viewOf(n *graph.Node) *graph.Node {
	for n.Op() == graph.OpReshape {
		n = n.Inputs()[0]
	}
	return n
}

func constants(g *graph.Graph, live []bool) map[int]constant {
	konst := map[int]constant{}
	for _, n := range g.Nodes() {
		if live[n.ID()] && n.Op() == graph.OpConstant {
			konst[n.ID()] = constant{n.Attr().Value}
		}
	}
	return konst
}

// foldLimit is the most elements a folded value may have when it is larger
// than its inputs together.
const foldLimit = 4096

// checkCollectives rejects a started collective (all_reduce_start,
// reduce_scatter_start, all_gather_start) read by anything but one wait of
// its kind: its buffer changes under the reader until the wait.
func checkCollectives(g *graph.Graph, live []bool) error {
	waits := map[int]int{}
	for _, c := range g.Nodes() {
		if !live[c.ID()] {
			continue
		}
		for _, in := range c.Inputs() {
			if !in.Op().Started() {
				continue
			}
			if c.Op().WaitsFor() != in.Op() {
				return fmt.Errorf("compile: %s (%s) reads %s (%s) before its wait", c, c.Owner(), in, in.Owner())
			}
			if waits[in.ID()]++; waits[in.ID()] > 1 {
				return fmt.Errorf("compile: %s (%s) has more than one wait", in, in.Owner())
			}
		}
	}
	return nil
}

// collective reports whether op exchanges data with the other processes of
// a data-parallel run (its lowering says so): its value is not a function
// of its inputs here, so it is never folded.
func collective(op graph.Op) bool { return lowerings[op].collective }

// fold evaluates, in id order, every live node whose inputs are all
// constants, using the same instructions the runtime runs.
func fold(g *graph.Graph, live []bool, t Target) (map[int]constant, error) {
	konst := constants(g, live)
	for _, n := range g.Nodes() {
		if !live[n.ID()] || n.Op().Class() == graph.ClassLeaf || n.Op() == graph.OpAssign || len(n.Inputs()) == 0 || collective(n.Op()) ||
			n.Op() == graph.OpPart || n.Op().NumParts() > 0 { // one instruction computes several values: left to the step

			continue
		}
		inBytes := int64(0)
		all := true
		for _, in := range n.Inputs() {
			if _, ok := konst[in.ID()]; !ok {
				all = false
				break
			}
			inBytes += in.Bytes()
		}
		if !all || (n.Shape().Size() > foldLimit && n.Bytes() > inBytes) {
			continue
		}
		if it := lowerNode(n, 0, nil); t.Lower(&it) > 0 {
			continue // needs workspace: left to the step
		}
		out := tensor.New(n.DType(), n.Shape())
		if n.Op() == graph.OpReshape {
			copy(out.Bytes(), konst[n.Inputs()[0].ID()].value.Bytes())
		} else {
			bufs := [][]byte{out.Bytes()}
			ids := make([]int, len(n.Inputs()))
			for i, in := range n.Inputs() {
				ids[i] = len(bufs)
				bufs = append(bufs, konst[in.ID()].value.Bytes())
			}
			ins := lowerNode(n, 0, ids)
			t.Lower(&ins)
			if err := t.Evaluate(&ins, bufs); err != nil {
				return nil, fmt.Errorf("compile: folding constants: %w", err)
			}
		}
		konst[n.ID()] = constant{out}
	}
	return konst, nil
}
