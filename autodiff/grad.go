package autodiff

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Options configure GradWith.
type Options struct {
	// Keep, when set, says which forward values the backward pass may read
	// as saved activations. Any other forward value a gradient rule needs is
	// recomputed in the backward pass from kept values (and leaves), just
	// before it is needed: rematerialization, or gradient checkpointing
	// (Chen, Xu, Zhang and Guestrin, "Training Deep Nets with Sublinear
	// Memory Cost", 2016). Recomputed values are built once per backward
	// pass and shared by the rules that need them.
	Keep func(n *graph.Node) bool
	// OnGrad, when set, is called with i and the gradient of wrt[i] as soon
	// as that gradient is final in the reverse sweep (all its uses are
	// differentiated), so that the caller can build the parameter's update
	// right there: updates interleave with the backward pass and each
	// gradient dies at its update instead of all living until the end.
	OnGrad func(i int, grad *graph.Node)
	// Lower, when set, maps a forward value to a lower-precision copy of it
	// (or nil): the backward pass then reads an up-cast of the copy instead
	// of keeping the value (mixed precision's 16-bit saved activations).
	Lower func(n *graph.Node) *graph.Node
	// Refetch, when set, may give for a forward value x the value the
	// backward pass reads instead (nil: none), built when first needed and
	// shared by every rule that reads x: ZeRO stage 3 gathers a layer's
	// parameters again for its backward pass (prefetching the next layer's)
	// rather than keeping the forward's gathered copy.
	Refetch func(x *graph.Node) *graph.Node
}

// vjp is the state of one backward pass that rules read forward values
// through.
type vjp struct {
	keep    func(*graph.Node) bool
	lower   func(*graph.Node) *graph.Node
	refetch func(*graph.Node) *graph.Node
	remat   map[*graph.Node]*graph.Node
	up      map[upKey]*graph.Node // the backward pass's up-casts of 16-bit values
	slotOf  map[*graph.Node]int   // a slice's gradient source: the id of the value it is a slice of (stacked.go)
	partGy  map[int][]*graph.Node // a multi-output op's id -> the gradients of its parts 1, 2, ... (nil: none)
}

// partGrad returns the gradient of part i of n (1 <= i), or nil when the
// loss does not depend on it: for the rules that take their parts'
// gradients (registerParts).
func (c *vjp) partGrad(n *graph.Node, i int) *graph.Node {
	if gs := c.partGy[n.ID()]; i-1 < len(gs) {
		return gs[i-1]
	}
	return nil
}

// upKey names an up-cast: a 16-bit value and the dtype it widens to.
type upKey struct {
	low *graph.Node
	dt  tensor.DType
}

// upcast returns low widened to dt, built once per backward pass: a layer's
// 16-bit output is widened for its own rule (relu's gradient reads its
// output) and for the next layer's (max pooling's gradient reads its
// input), and both must read one buffer, not two copies of it.
func (c *vjp) upcast(low *graph.Node, dt tensor.DType) *graph.Node {
	k := upKey{low, dt}
	if r, ok := c.up[k]; ok {
		return r
	}
	g := low.Graph()
	g.PushScope("upcast")
	r := graph.Cast(low, dt)
	g.PopScope()
	c.up[k] = r
	return r
}

// in returns input i of n as a value the backward pass may read.
func (c *vjp) in(n *graph.Node, i int) *graph.Node { return c.val(n.Inputs()[i]) }

// val returns x, or its recomputation when x is a forward value that is not
// kept.
func (c *vjp) val(x *graph.Node) *graph.Node {
	if x.Phase() != graph.Forward || x.Op().Class() == graph.ClassLeaf {
		return x
	}
	if r, ok := c.remat[x]; ok {
		return r
	}
	if c.refetch != nil {
		if r := c.refetch(x); r != nil {
			c.remat[x] = r
			return r
		}
	}
	if x.Op() == graph.OpPart {
		// a further output of a multi-output op (layer norm's row
		// statistics, attention's log-sum-exp): the recomputed op's own
		// when the op is recomputed, else the forward op's (small, kept;
		// the op's main output may be read as its 16-bit copy instead)
		p := x.Inputs()[0]
		if r := c.val(p); r != p && r.Op() == p.Op() {
			return graph.PartOf(r, x.Attr().Part)
		}
		return x
	}
	if c.lower != nil {
		if x.DType() == tensor.BFloat16 || x.DType() == tensor.Float16 {
			return x // the 16-bit copies are what mixed precision keeps
		}
		if low := c.lower(x); low != nil {
			r := c.upcast(c.val(low), x.DType())
			c.remat[x] = r
			return r
		}
		// an up-cast of a 16-bit value is recomputed, not kept
		if x.Op() == graph.OpCast && (x.Inputs()[0].DType() == tensor.BFloat16 || x.Inputs()[0].DType() == tensor.Float16) {
			r := c.upcast(c.val(x.Inputs()[0]), x.DType())
			c.remat[x] = r
			return r
		}
	}
	if c.keep == nil || c.keep(x) {
		return x
	}
	return c.recompute(x)
}

// recompute builds x again from values the backward pass may read.
func (c *vjp) recompute(x *graph.Node) *graph.Node {
	ins := make([]*graph.Node, len(x.Inputs()))
	for i, in := range x.Inputs() {
		ins[i] = c.val(in)
	}
	g := x.Graph()
	g.PushScope("remat")
	site := g.SetSite(x.Site())
	r := graph.Recompute(x, ins...)
	g.SetSite(site)
	g.PopScope()
	c.remat[x] = r
	return r
}

// Grad appends to loss's graph the gradient of loss with respect to each
// node in wrt and returns them in order. It panics with a *graph.Error when
// loss is not a float scalar or a needed op has no rule; graph.Catch or
// compile.Build turn that into an error.
func Grad(loss *graph.Node, wrt ...*graph.Node) []*graph.Node {
	return GradWith(loss, Options{}, wrt...)
}

// GradWith is Grad with options (rematerialization).
func GradWith(loss *graph.Node, opt Options, wrt ...*graph.Node) []*graph.Node {
	c := &vjp{keep: opt.Keep, lower: opt.Lower, refetch: opt.Refetch, remat: map[*graph.Node]*graph.Node{}, up: map[upKey]*graph.Node{}, slotOf: map[*graph.Node]int{},
		partGy: map[int][]*graph.Node{}}
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

	// done[id] lists the wrt whose gradient is final once the sweep has
	// processed node id: the smallest id among their differentiated readers.
	done := map[int][]int{}
	var noReader []int
	for i, w := range wrt {
		first := -1
		for id := w.ID() + 1; id < n; id++ {
			if !fromW[id] || !toLoss[id] {
				continue
			}
			for _, in := range nodes[id].Inputs() {
				if in == w {
					first = id
					break
				}
			}
			if first >= 0 {
				break
			}
		}
		if first < 0 {
			noReader = append(noReader, i)
			continue
		}
		done[first] = append(done[first], i)
	}
	adj := make([]*graph.Node, n)
	final := make([]*graph.Node, len(wrt))
	// firstReader is the smallest id among the differentiated readers of
	// node x: once the sweep has processed it, x's gradient is final.
	firstReader := func(x *graph.Node) int {
		for id := x.ID() + 1; id < n; id++ {
			if !fromW[id] || !toLoss[id] {
				continue
			}
			for _, in := range nodes[id].Inputs() {
				if in == x {
					return id
				}
			}
		}
		return -1
	}
	emit := func(i int, grad *graph.Node) {
		final[i] = grad
		if opt.OnGrad != nil {
			opt.OnGrad(i, grad)
		}
	}
	// pending: weight gradients stacked over a recurrence's steps, built
	// when the sweep has processed the node of their key (stacked.go)
	pending := map[int][]*stackedGrad{}
	resolve := func(s *stackedGrad) {
		w := wrt[s.wrt]
		if grad := s.build(adj[s.x], w.Owner()); grad != nil {
			emit(s.wrt, grad)
			return
		}
		emit(s.wrt, adj[w.ID()])
	}
	finish := func(i, at int) {
		w := wrt[i]
		if w.ID() >= n || adj[w.ID()] == nil {
			emit(i, g.Full(0, w.DType(), w.Shape())) // the loss does not depend on w
			return
		}
		if s := c.planStacked(i, adj[w.ID()]); s != nil {
			switch f := firstReader(nodes[s.x]); {
			case f >= 0 && f < at: // D is final once the sweep reaches f
				pending[f] = append(pending[f], s)
				return
			case f >= 0: // D is final already
				resolve(s)
				return
			}
		}
		emit(i, adj[w.ID()])
	}
	adj[loss.ID()] = g.Scalar(1, loss.DType())
	for id := n - 1; id >= 0; id-- {
		c.backprop(nodes[id], adj, fromW, toLoss)
		for _, i := range done[id] {
			finish(i, id)
		}
		for _, s := range pending[id] {
			resolve(s)
		}
	}
	for _, i := range noReader {
		finish(i, -1)
	}
	return final
}

// backprop applies node's VJP rule to its gradient, if it has one, and adds
// the results to its inputs' gradients.
func (c *vjp) backprop(node *graph.Node, adj []*graph.Node, fromW, toLoss []bool) {
	id, g := node.ID(), node.Graph()
	gy := adj[id]
	if node.Op() == graph.OpPart {
		c.partGradient(node, gy, fromW, toLoss)
		return
	}
	if (gy == nil && c.partGy[id] == nil) || !fromW[id] || !toLoss[id] || !anyFrom(node.Inputs(), fromW) {
		return // (a node of wrt computed from none of them: its gradient is final)
	}
	e := rules[node.Op()]
	r := e.rule
	if r == nil {
		msg := "has no gradient rule"
		if e.why != "" {
			msg += " (" + e.why + ")"
		}
		panic(&graph.Error{Op: node.Op(), Owner: node.Owner(), Site: node.Site(), Msg: msg})
	}
	g.PushScope("grad/" + node.Owner())
	site := g.SetSite(node.Site())
	gxs := r(c, node, gy)
	g.SetSite(site)
	g.PopScope()
	for i, in := range node.Inputs() {
		if i >= len(gxs) || gxs[i] == nil || !fromW[in.ID()] {
			continue
		}
		gx := gxs[i]
		if !gx.Shape().Equal(in.Shape()) || gx.DType() != in.DType() {
			panic(&graph.Error{Op: node.Op(), Owner: node.Owner(), Msg: fmt.Sprintf("gradient rule gave %s%v for input %s%v", gx.DType(), gx.Shape(), in.DType(), in.Shape())})
		}
		c.recordSlot(in, gx)
		if adj[in.ID()] == nil {
			adj[in.ID()] = gx
		} else {
			g.PushScope("grad/" + in.Owner())
			adj[in.ID()] = accumulate(adj[in.ID()], gx)
			g.PopScope()
		}
	}
}

// partGradient keeps the gradient gy of a part for its op's rule, which
// the sweep reaches later (a part's id is above its op's). An op whose rule
// does not read its parts' gradients is refused, naming it.
func (c *vjp) partGradient(part, gy *graph.Node, fromW, toLoss []bool) {
	id := part.ID()
	if gy == nil || !fromW[id] || !toLoss[id] {
		return
	}
	op := part.Inputs()[0]
	if !rules[op.Op()].parts {
		panic(&graph.Error{Op: op.Op(), Owner: op.Owner(), Site: op.Site(),
			Msg: fmt.Sprintf("has no gradient rule through its part %d (%s)", part.Attr().Part, rules[graph.OpPart].why)})
	}
	i := part.Attr().Part
	gs := c.partGy[op.ID()]
	for len(gs) < i {
		gs = append(gs, nil)
	}
	if gs[i-1] != nil { // two part nodes of one output: one value
		gy = accumulate(gs[i-1], gy)
	}
	gs[i-1] = gy
	c.partGy[op.ID()] = gs
}

// anyFrom reports whether one of ins lies on a path from a node of wrt.
func anyFrom(ins []*graph.Node, fromW []bool) bool {
	for _, in := range ins {
		if fromW[in.ID()] {
			return true
		}
	}
	return false
}

// accumulate returns the sum of two gradients of one value. When one is
// the gradient of a slice (an Unslice), the other gets its slice added in
// place (graph.UnsliceAdd): the steps of an unrolled recurrence each read
// a slice of their input's projection, and summing their gradients as
// whole tensors would take time proportional to the steps squared.
func accumulate(a, b *graph.Node) *graph.Node {
	switch {
	case b.Op() == graph.OpUnslice:
		return graph.UnsliceAdd(a, b.Inputs()[0], b.Attr().Starts)
	case a.Op() == graph.OpUnslice:
		return graph.UnsliceAdd(b, a.Inputs()[0], a.Attr().Starts)
	}
	return graph.Add(a, b)
}
