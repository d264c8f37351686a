package autodiff

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
)

// Grad appends to loss's graph the gradient of loss with respect to each
// node in wrt and returns them in order. It panics with a *graph.Error when
// loss is not a float scalar or a needed op has no rule; graph.Catch or
// compile.Build turn that into an error.
func Grad(loss *graph.Node, wrt ...*graph.Node) []*graph.Node {
	g := loss.Graph()
	if loss.Shape().Rank() != 0 || (loss.DType() != 0 && !loss.DType().IsFloat()) {
		panic(&graph.Error{Op: loss.Op(), Owner: loss.Owner(), Msg: fmt.Sprintf("loss must be a float scalar, got %s%v", loss.DType(), loss.Shape())})
	}
	old := g.SetPhase(graph.Backward)
	defer g.SetPhase(old)

	// needs[id]: node id lies on a path from some w to the loss.
	n := loss.ID() + 1
	fromW := make([]bool, n)
	for _, w := range wrt {
		if w.Graph() != g {
			panic(&graph.Error{Op: w.Op(), Owner: w.Owner(), Msg: "gradient with respect to a node of another graph"})
		}
		if w.ID() < n {
			fromW[w.ID()] = true
		}
	}
	nodes := g.Nodes()
	for id := 0; id < n; id++ {
		if fromW[id] {
			continue
		}
		for _, in := range nodes[id].Inputs() {
			if fromW[in.ID()] {
				fromW[id] = true
				break
			}
		}
	}
	toLoss := make([]bool, n)
	toLoss[loss.ID()] = true
	for id := n - 1; id >= 0; id-- {
		if !toLoss[id] {
			continue
		}
		for _, in := range nodes[id].Inputs() {
			toLoss[in.ID()] = true
		}
	}

	adj := make([]*graph.Node, n)
	adj[loss.ID()] = g.Scalar(1, loss.DType())
	for id := n - 1; id >= 0; id-- {
		node, gy := nodes[id], adj[id]
		if gy == nil || !fromW[id] || !toLoss[id] || len(node.Inputs()) == 0 {
			continue
		}
		r := rules[node.Op()]
		if r == nil {
			panic(&graph.Error{Op: node.Op(), Owner: node.Owner(), Site: node.Site(), Msg: "has no gradient rule"})
		}
		g.PushScope("grad/" + node.Owner())
		gxs := r(node, gy)
		g.PopScope()
		for i, in := range node.Inputs() {
			if i >= len(gxs) || gxs[i] == nil || !fromW[in.ID()] {
				continue
			}
			gx := gxs[i]
			if !gx.Shape().Equal(in.Shape()) || gx.DType() != in.DType() {
				panic(&graph.Error{Op: node.Op(), Owner: node.Owner(), Msg: fmt.Sprintf("gradient rule gave %s%v for input %s%v", gx.DType(), gx.Shape(), in.DType(), in.Shape())})
			}
			if adj[in.ID()] == nil {
				adj[in.ID()] = gx
			} else {
				g.PushScope("grad/" + in.Owner())
				adj[in.ID()] = graph.Add(adj[in.ID()], gx)
				g.PopScope()
			}
		}
	}

	out := make([]*graph.Node, len(wrt))
	for i, w := range wrt {
		if w.ID() < n && adj[w.ID()] != nil {
			out[i] = adj[w.ID()]
			continue
		}
		out[i] = g.Full(0, w.DType(), w.Shape()) // the loss does not depend on w
	}
	return out
}

// Differentiable reports whether op has a VJP rule that passes gradients to
// some input (the gradient checks use it to prove they cover every rule).
func Differentiable(op graph.Op) bool {
	if rules[op] == nil {
		return false
	}
	switch op {
	case graph.OpEqual, graph.OpNotEqual, graph.OpLess, graph.OpLessEqual, graph.OpGreater, graph.OpGreaterEqual, graph.OpOneHot, graph.OpDropoutMask:
		return false
	}
	return true
}
