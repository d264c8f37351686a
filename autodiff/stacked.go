package autodiff

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// One weight gradient for an unrolled recurrence.
//
// A recurrent layer's steps each multiply their previous state by the same
// recurrent kernel U (nn/recurrent.go), so U's gradient is the sum over the
// steps of h_{t-1}ᵀ·dz_t: products of B rows each (32 for the reference
// lstm) whose outputs are as large as U, summed by a tree of adds. Such
// products spend their time writing U-sized outputs, not multiplying.
//
// Each step's dz_t is also what that step adds into its slice of the input
// projection's gradient D [B, T, n] (the slices' gradients are summed in
// place, graph.UnsliceAdd). So when the sweep has finished U, the sum can
// be rebuilt as one product over every step:
//
//	dU = Aᵀ·D, A [B·T, m] the products' first operands stacked by step
//	         (zeros where a step has no product), D [B·T, n]
//
// with k = B·T instead of T products with k = B. It costs one copy of the
// states (A) and no copy of D, which the input kernel's gradient reads
// anyway. U's gradient is then final when D is, a few nodes later in the
// sweep. The rebuild is checked step by step against the D the sweep
// built: every product's dz_t must be a slot of D written once and
// nothing else, or the sum of products is kept.

// minStacked is the least number of per-step products worth stacking.
const minStacked = 4

// stackedTerm is one product aᵀ·g of a weight's gradient sum.
type stackedTerm struct{ a, g *graph.Node }

// stackedGrad is a weight gradient waiting for D to be final.
type stackedGrad struct {
	wrt   int           // the index in wrt
	terms []stackedTerm // the products that go into the stacked one
	rest  []*graph.Node // the sum's other terms
	x     int           // the id of the value whose gradient is D
}

// recordSlot notes, for a gradient gx of input in that places a value in a
// slice of it (a Slice's gradient), which value that is: the steps'
// products read it as their dz_t, before the reshape that gave it its
// step axis.
func (c *vjp) recordSlot(in, gx *graph.Node) {
	if gx.Op() != graph.OpUnslice {
		return
	}
	src := gx.Inputs()[0]
	c.slotOf[src] = in.ID()
	if src.Op() == graph.OpReshape {
		c.slotOf[src.Inputs()[0]] = in.ID()
	}
}

// sumTerms splits a gradient sum built by accumulate (and by rules that
// add) into its terms. Adds that broadcast are terms themselves.
func sumTerms(x *graph.Node, out []*graph.Node) []*graph.Node {
	if x.Op() == graph.OpAdd && x.Phase() == graph.Backward {
		a, b := x.Inputs()[0], x.Inputs()[1]
		if a.Shape().Equal(x.Shape()) && b.Shape().Equal(x.Shape()) && a.DType() == x.DType() && b.DType() == x.DType() {
			return sumTerms(b, sumTerms(a, out))
		}
	}
	return append(out, x)
}

// planStacked looks at the final gradient sum of wrt[i] and returns the
// rebuild to make once D is final, or nil.
func (c *vjp) planStacked(i int, sum *graph.Node) *stackedGrad {
	if sum.Shape().Rank() != 2 {
		return nil
	}
	terms := sumTerms(sum, nil)
	if len(terms) < minStacked {
		return nil
	}
	votes := map[int]int{}
	var cands []stackedTerm
	var rest []*graph.Node
	for _, t := range terms {
		if t.Op() != graph.OpMatMul || !t.Attr().TransA || t.Attr().TransB {
			rest = append(rest, t)
			continue
		}
		a, g := t.Inputs()[0], t.Inputs()[1]
		if a.Shape().Rank() != 2 || g.Shape().Rank() != 2 {
			rest = append(rest, t)
			continue
		}
		cands = append(cands, stackedTerm{a, g})
		if x, ok := c.slotOf[g]; ok {
			votes[x]++
		}
	}
	// the value most products' dz_t are slots of; the steps whose slices
	// the sweep has not reached yet are checked when D is final
	best, n := -1, 0
	for x, v := range votes {
		if v > n || (v == n && x < best) {
			best, n = x, v
		}
	}
	if best < 0 || len(cands) < minStacked {
		return nil
	}
	a0, g0 := cands[0].a, cands[0].g
	for _, t := range cands {
		if !t.a.Shape().Equal(a0.Shape()) || !t.g.Shape().Equal(g0.Shape()) || t.a.DType() != a0.DType() || t.g.DType() != g0.DType() {
			return nil
		}
	}
	return &stackedGrad{wrt: i, terms: cands, rest: rest, x: best}
}

// build returns the gradient as one product over D, the final gradient of
// value x, or nil when D is not the steps' dz_t stacked (then the sum of
// products stays).
func (s *stackedGrad) build(d *graph.Node, owner string) *graph.Node {
	if d == nil || d.Shape().Rank() != 3 {
		return nil
	}
	B, T, n := d.Shape()[0], d.Shape()[1], d.Shape()[2]
	a0, g0 := s.terms[0].a, s.terms[0].g
	if !g0.Shape().Equal(tensor.Shape{B, n}) || a0.Shape()[0] != B || g0.DType() != d.DType() {
		return nil
	}
	// walk D's chain of slots: each step's dz_t, at [0, t, 0], once
	slot := map[*graph.Node]int{}
	seen := make([]bool, T)
	for x := d; ; {
		var src *graph.Node
		switch x.Op() {
		case graph.OpUnslice:
			src = x.Inputs()[0]
		case graph.OpUnsliceAdd:
			src = x.Inputs()[1]
		default:
			return nil // something else adds to D
		}
		st := x.Attr().Starts
		if len(st) != 3 || st[0] != 0 || st[2] != 0 || !src.Shape().Equal(tensor.Shape{B, 1, n}) || seen[st[1]] {
			return nil
		}
		seen[st[1]] = true
		slot[src] = st[1]
		if src.Op() == graph.OpReshape {
			slot[src.Inputs()[0]] = st[1]
		}
		if x.Op() == graph.OpUnslice {
			break
		}
		x = x.Inputs()[0]
	}
	rows := make([]*graph.Node, T)
	for _, t := range s.terms {
		step, ok := slot[t.g]
		if !ok || rows[step] != nil {
			return nil
		}
		rows[step] = t.a
	}
	g := d.Graph()
	g.PushScope("grad/" + owner)
	defer g.PopScope()
	m := a0.Shape()[1]
	var zero *graph.Node
	for t, r := range rows {
		if r != nil {
			rows[t] = graph.Reshape(r, B, 1, m)
			continue
		}
		if zero == nil {
			zero = g.Full(0, a0.DType(), tensor.Shape{B, 1, m})
		}
		rows[t] = zero
	}
	a := graph.Reshape(graph.Concat(1, rows...), B*T, m)
	out := graph.MatMulT(a, graph.Reshape(d, B*T, n), true, false)
	for _, r := range s.rest {
		out = graph.Add(out, r)
	}
	return out
}
