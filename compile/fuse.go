package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// fusion is the result of the fusion pass: chains (trees) of elementwise
// ops over one shape, whose intermediate values have a single reader, run
// as one instruction that streams through memory in chunks (see
// Fused). Intermediates get no buffer at all. This is XLA's loop
// fusion restricted to elementwise producers with one consumer, as
// TVM's and TorchInductor's pointwise fusion.
type fusion struct {
	groups   map[int]*group // root node id -> its group
	absorbed map[int]bool   // ids of the intermediates

	// poolRelu maps a ReluGrad(y, MaxPool2DGrad(y, dy)) node to the pool
	// gradient it absorbs: the pair runs as one instruction
	// (kernels.MaxPool2DReluGrad), the backward pass of relu then max pool,
	// which reads y and dy once and writes dx once instead of writing the
	// pool gradient and reading it back.
	poolRelu map[int]*graph.Node

	// sums maps a ReduceSum(g) node over every axis but the last to a
	// ReduceSum(Mul(g, x)) over the same axes that it computes too, in the
	// same pass (FuseChannelSums); sumOf maps the second back to the
	// first. The product is absorbed; the second sum keeps its buffer,
	// written by the first's instruction.
	sums  map[int]channelPair
	sumOf map[int]*graph.Node

	// padded maps a convolution or filter gradient whose input is a zero
	// padding (absorbed) to the unpadded input and the padding, which
	// its window takes instead (FusePadIntoConv); cropped maps an input
	// gradient whose only reader crops it to the crop, which its
	// instruction writes with the crop as padding in its window, and
	// cropOf maps the crop back.
	padded  map[int]padFold
	cropped map[int]padFold
	cropOf  map[int]*graph.Node

	// convMoments maps a float32 Conv2D to the Moments of its output that
	// its instruction writes too (FuseConvMoments); momentsOf maps the
	// moments back. The moments keep their buffer.
	convMoments map[int]*graph.Node
	momentsOf   map[int]*graph.Node
}

// padFold is padding moved into a convolution's window: x is what the
// window reads (for a crop: the crop, what it writes), and the rows and
// columns before and after x that are zero.
type padFold struct {
	x                        *graph.Node
	top, left, bottom, right int
}

// fold returns w with the padding f in its window: over x's rows and
// columns, the padding before grown by f's, the output unchanged.
func (f padFold) fold(w Window) Window {
	w.H -= f.top + f.bottom
	w.W -= f.left + f.right
	w.PadTop += f.top
	w.PadLeft += f.left
	return w
}

// foldable reports whether window w, f folded in, pads at most its window
// less one before and after (what the kernels take).
func (f padFold) foldable(w Window) bool {
	v := f.fold(w)
	kh, kw := graph.EffectiveWindow(v.KH, v.DH), graph.EffectiveWindow(v.KW, v.DW)
	bottom, right := (v.OH-1)*v.SH+kh-v.H-v.PadTop, (v.OW-1)*v.SW+kw-v.W-v.PadLeft
	return v.H > 0 && v.W > 0 && v.PadTop < kh && v.PadLeft < kw && bottom >= 0 && bottom < kh && right >= 0 && right < kw
}

// channelPair is what a first sum of g also computes: the second sum,
// Σ g·x.
type channelPair struct {
	second, x *graph.Node
}

func newFusion() *fusion {
	return &fusion{groups: map[int]*group{}, absorbed: map[int]bool{}, poolRelu: map[int]*graph.Node{},
		sums: map[int]channelPair{}, sumOf: map[int]*graph.Node{},
		padded: map[int]padFold{}, cropped: map[int]padFold{}, cropOf: map[int]*graph.Node{},
		convMoments: map[int]*graph.Node{}, momentsOf: map[int]*graph.Node{}}
}

// The fused chain is an instruction of its own, made here rather than
// lowered from a node: one operation per element and step.
func init() {
	register(graph.OpFused, lowering{flops: func(it *Instr, out float64) float64 { return out * float64(len(it.Fused.Steps)) }})
}

type group struct {
	members []*graph.Node // id order; the root is last
	leaves  []*graph.Node // inputs from outside the group, in first-use order
	kinds   []FusedLeaf
}

// fusable reports whether n is an elementwise op the fused instruction
// runs (its lowering says so: lowering.fusable), whose every input maps
// onto n's elements (same size, a scalar, or a bias over n's last axes).
func fusable(n *graph.Node) bool {
	if f := lowerings[n.Op()].fusable; f == nil || !f(n) {
		return false
	}
	if n.DType() != tensor.Float32 && n.DType() != tensor.Float64 {
		return false
	}
	for _, in := range n.Inputs() {
		if _, ok := leafKind(in.Shape(), n.Shape()); !ok {
			return false
		}
	}
	return true
}

// leafKind says how an input of shape in is read by an output of shape out.
func leafKind(in, out tensor.Shape) (FusedLeaf, bool) {
	switch {
	case in.Size() == out.Size():
		return FusedLeaf{Kind: LeafFull}, true
	case in.Size() == 1:
		return FusedLeaf{Kind: LeafScalar}, true
	}
	// periodic: in is out's trailing axes, with only 1s before them
	k := len(out) - len(in) // out axis of in's axis 0
	first := -1
	for i, d := range in {
		switch {
		case d == out[k+i] && d != 1 && first < 0:
			first = i
		case d == 1 && first < 0:
		case d == out[k+i] && first >= 0:
		default:
			return FusedLeaf{}, false
		}
	}
	if first < 0 {
		return FusedLeaf{}, false
	}
	return FusedLeaf{Kind: LeafPeriodic, Period: tensor.Shape(out[k+first:]).Size()}, true
}

// fuse finds the groups. A node joins its reader's group when both are
// fusable, it has that one reader, the same shape and dtype, and it is
// neither an output nor the value of an Assign (those need buffers).
func fuse(g *graph.Graph, live []bool, konst map[int]constant, output map[int]bool, assignOf map[int]*graph.Node, t Target) *fusion {
	f := newFusion()
	readers := make([]int, g.Len())
	for _, c := range g.Nodes() {
		if !live[c.ID()] {
			continue
		}
		if _, ok := konst[c.ID()]; ok {
			continue
		}
		seen := map[int]bool{}
		for _, in := range c.Inputs() {
			if !seen[in.ID()] {
				readers[in.ID()]++
				seen[in.ID()] = true
			}
		}
	}
	// A group reads its leaves when its root runs. A variable may be
	// overwritten from the moment its Assign's value is computed, so a node
	// that reads a variable may not join a root that runs after that; the
	// value itself may (it reads element i before it writes it).
	written := map[int]int{} // variable id -> id of its assigned value
	for val, asg := range assignOf {
		written[asg.Inputs()[0].ID()] = val
	}
	canJoin := func(u, root *graph.Node) bool {
		if !live[u.ID()] || f.absorbed[u.ID()] || readers[u.ID()] != 1 || output[u.ID()] || assignOf[u.ID()] != nil {
			return false
		}
		if _, ok := konst[u.ID()]; ok {
			return false
		}
		for _, in := range u.Inputs() {
			if w, ok := written[viewOf(in).ID()]; ok && w < root.ID() {
				return false
			}
		}
		return fusable(u) && u.DType() == root.DType() && u.Shape().Equal(root.Shape())
	}
	// A group runs where its root is, so joining u moves u's reads there:
	// u's inputs live until the root runs. That is free when the reader m
	// could not run before its other operands exist anyway, but not when
	// one of them is computed later, outside the group: then u's inputs
	// wait for it. A group may wait so once (a residual branch's gradient
	// added to the other's: the fusion pays), not again: summing an
	// unrolled recurrence's per-step weight gradients (add(add(g1, g2),
	// g3) ...) would otherwise become one instruction at the end holding
	// every step's gradient at once.
	early := func(u, m, root *graph.Node) bool {
		for _, v := range m.Inputs() {
			if v != u && v.ID() > u.ID() && v.Shape().Size() == m.Shape().Size() && v.Shape().Size() > 1 && !canJoin(v, root) {
				return false
			}
		}
		return true
	}
	nodes := g.Nodes()
	for id := len(nodes) - 1; id >= 0 && t.Fuses(FuseElementwise); id-- {
		root := nodes[id]
		if !live[id] || f.absorbed[id] || !fusable(root) {
			continue
		}
		if _, ok := konst[id]; ok {
			continue
		}
		members := map[int]bool{id: true}
		stack := []*graph.Node{root}
		delayed := false // a member already waits for a later operand
		for len(stack) > 0 {
			m := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, u := range m.Inputs() {
				if members[u.ID()] || !canJoin(u, root) {
					continue
				}
				if !early(u, m, root) {
					if delayed {
						continue
					}
					delayed = true
				}
				members[u.ID()] = true
				stack = append(stack, u)
			}
		}
		if len(members) < 2 {
			continue
		}
		grp := &group{}
		for mid := range members {
			if mid != id {
				f.absorbed[mid] = true
			}
		}
		for mid := 0; mid <= id; mid++ {
			if members[mid] {
				grp.members = append(grp.members, nodes[mid])
			}
		}
		seenLeaf := map[int]bool{}
		for _, m := range grp.members {
			for _, in := range m.Inputs() {
				if members[in.ID()] || seenLeaf[in.ID()] {
					continue
				}
				seenLeaf[in.ID()] = true
				k, _ := leafKind(in.Shape(), root.Shape())
				if in.DType() == tensor.Bool {
					k = FusedLeaf{Kind: LeafCond}
				}
				grp.leaves = append(grp.leaves, in)
				grp.kinds = append(grp.kinds, k)
			}
		}
		f.groups[id] = grp
	}
	for id, r := range nodes {
		if !t.Fuses(FusePoolReluGrad) {
			break
		}
		if !live[id] || f.absorbed[id] || f.groups[id] != nil || r.Op() != graph.OpReluGrad {
			continue
		}
		if _, ok := konst[id]; ok {
			continue
		}
		p := r.Inputs()[1]
		if p.Op() != graph.OpMaxPool2DGrad || p.Inputs()[0] != r.Inputs()[0] || p.DType() != r.DType() ||
			!live[p.ID()] || f.absorbed[p.ID()] || readers[p.ID()] != 1 || output[p.ID()] || assignOf[p.ID()] != nil {
			continue
		}
		if _, ok := konst[p.ID()]; ok {
			continue
		}
		late := false // the pool's reads move to r: no input may be overwritten before
		for _, in := range p.Inputs() {
			if w, ok := written[viewOf(in).ID()]; ok && w < id {
				late = true
			}
		}
		if !late {
			f.absorbed[p.ID()] = true
			f.poolRelu[id] = p
		}
	}
	if t.Fuses(FuseChannelSums) {
		f.channelSums(nodes, live, konst, readers, output, assignOf)
	}
	if t.Fuses(FusePadIntoConv) {
		f.padsIntoConvs(nodes, live, konst, readers, output, assignOf, written)
	}
	if t.Fuses(FuseConvMoments) {
		f.convsMoments(nodes, live, konst, assignOf)
	}
	return f
}

// convsMoments moves Moments(y) of a float32 Conv2D's output y into the
// convolution's instruction (one moments a convolution): the sums are
// taken as the convolution writes y, while it is in the cache, instead of
// in a pass of their own. The moments read nothing but y, so writing them
// at the convolution only moves their start earlier.
func (f *fusion) convsMoments(nodes []*graph.Node, live []bool, konst map[int]constant, assignOf map[int]*graph.Node) {
	plain := func(n *graph.Node) bool {
		if !live[n.ID()] || f.absorbed[n.ID()] || f.groups[n.ID()] != nil || assignOf[n.ID()] != nil {
			return false
		}
		_, k := konst[n.ID()]
		return !k
	}
	for _, m := range nodes {
		if m.Op() != graph.OpMoments || !plain(m) || m.DType() != tensor.Float32 {
			continue
		}
		y := m.Inputs()[0]
		if y.Op() != graph.OpConv2D || !plain(y) || y.DType() != tensor.Float32 || y.Attr().BF16 || y.Shape().Rank() != 4 {
			continue
		}
		if _, taken := f.convMoments[y.ID()]; taken || f.cropped[y.ID()].x != nil {
			continue
		}
		f.convMoments[y.ID()], f.momentsOf[m.ID()] = m, y
	}
}

// padsIntoConvs folds zero padding into convolutions' windows. A padding
// of the height and width of x [N, H, W, C] whose every reader is a
// "valid" Conv2D or Conv2DBackpropFilter reading it as its input is
// absorbed: they read x with the padding in their window. A
// Conv2DBackpropInput of a "valid" convolution whose only reader is a
// Slice of its height and width runs writing the slice, the rows and
// columns cut off as padding in its window: the gradient of the padded
// input is never written whole. x must not be a variable that the step
// overwrites (the padding copied it; the window reads it later), and the
// folded windows must pad less than a window on each side.
func (f *fusion) padsIntoConvs(nodes []*graph.Node, live []bool, konst map[int]constant, readers []int, output map[int]bool, assignOf map[int]*graph.Node, written map[int]int) {
	plain := func(n *graph.Node) bool {
		if !live[n.ID()] || f.absorbed[n.ID()] || f.groups[n.ID()] != nil || assignOf[n.ID()] != nil || output[n.ID()] {
			return false
		}
		_, k := konst[n.ID()]
		return !k
	}
	// spatial returns the padding that takes x [N, H, W, C] to big, with
	// before the rows and columns before.
	spatial := func(x, big tensor.Shape, before []int) (padFold, bool) {
		if x.Rank() != 4 || big.Rank() != 4 || len(before) > 4 || x[0] != big[0] || x[3] != big[3] {
			return padFold{}, false
		}
		at := make([]int, 4)
		copy(at, before)
		if at[0] != 0 || at[3] != 0 {
			return padFold{}, false
		}
		pf := padFold{top: at[1], left: at[2], bottom: big[1] - x[1] - at[1], right: big[2] - x[2] - at[2]}
		return pf, pf.top >= 0 && pf.left >= 0 && pf.bottom >= 0 && pf.right >= 0
	}
	valid := func(n *graph.Node) bool {
		at := n.Attr()
		return !at.Same && !at.BF16 && (n.DType() == tensor.Float32 || n.DType() == tensor.Float64)
	}
	users := map[int][]*graph.Node{}
	for _, n := range nodes {
		if !live[n.ID()] {
			continue
		}
		for _, in := range n.Inputs() {
			if in.Op() == graph.OpUnslice {
				users[in.ID()] = append(users[in.ID()], n)
			}
		}
	}
	for _, p := range nodes {
		if p.Op() != graph.OpUnslice || !plain(p) || len(users[p.ID()]) == 0 {
			continue
		}
		x := p.Inputs()[0]
		if _, w := written[viewOf(x).ID()]; w || f.absorbed[x.ID()] || x.DType() != p.DType() {
			continue
		}
		pf, ok := spatial(x.Shape(), p.Shape(), p.Attr().Starts)
		if !ok {
			continue
		}
		pf.x = x
		for _, r := range users[p.ID()] {
			if (r.Op() != graph.OpConv2D && r.Op() != graph.OpConv2DBackpropFilter) || r.Inputs()[0] != p || !valid(r) ||
				f.absorbed[r.ID()] || r.Inputs()[1] == p || !pf.foldable(NewWindow(p.Shape(), r.Attr())) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		f.absorbed[p.ID()] = true
		for _, r := range users[p.ID()] {
			f.padded[r.ID()] = pf
		}
	}
	for _, s := range nodes {
		if s.Op() != graph.OpSlice || !live[s.ID()] || f.absorbed[s.ID()] || assignOf[s.ID()] != nil {
			continue // (an output may be the crop: the gradient writes it)
		}
		if _, k := konst[s.ID()]; k {
			continue
		}
		dp := s.Inputs()[0]
		if dp.Op() != graph.OpConv2DBackpropInput || !plain(dp) || readers[dp.ID()] != 1 || !valid(dp) {
			continue
		}
		at := s.Attr()
		pf, ok := spatial(s.Shape(), dp.Shape(), at.Starts)
		if !ok || !pf.foldable(NewWindow(dp.Attr().Of, dp.Attr())) {
			continue
		}
		pf.x = s
		f.cropped[dp.ID()], f.cropOf[s.ID()] = pf, dp
	}
}

// channelSums pairs ReduceSum(g) with ReduceSum(Mul(g, x)), both over
// every axis but the last, into one instruction at the first sum: it
// reads g and x once and writes both sums, where the pair would write the
// product and read g twice and the product once. The product must have
// the second sum as its only reader and x must exist when the first sum
// runs; moving the product's reads earlier only shortens lifetimes.
func (f *fusion) channelSums(nodes []*graph.Node, live []bool, konst map[int]constant, readers []int, output map[int]bool, assignOf map[int]*graph.Node) {
	plain := func(n *graph.Node) bool {
		if !live[n.ID()] || f.absorbed[n.ID()] || f.groups[n.ID()] != nil || assignOf[n.ID()] != nil {
			return false
		}
		_, k := konst[n.ID()]
		return !k
	}
	channels := func(n *graph.Node) bool { // a sum over every axis but the last, to [C]
		if n.Op() != graph.OpReduceSum || !plain(n) {
			return false
		}
		x := n.Inputs()[0]
		r := x.Shape().Rank()
		if r < 2 || (x.DType() != tensor.Float32 && x.DType() != tensor.Float64) || n.Shape().Size() != x.Shape()[r-1] || len(n.Attr().Axes) != r-1 {
			return false
		}
		for _, ax := range n.Attr().Axes {
			if ax < 0 || ax >= r-1 {
				return false
			}
		}
		return true
	}
	first := map[int]*graph.Node{} // g's id -> the first sum of g
	for _, n := range nodes {
		if channels(n) {
			if _, ok := first[n.Inputs()[0].ID()]; !ok {
				first[n.Inputs()[0].ID()] = n
			}
		}
	}
	for _, r2 := range nodes {
		if _, first := f.sums[r2.ID()]; first || !channels(r2) {
			continue
		}
		m := r2.Inputs()[0]
		if m.Op() != graph.OpMul || !plain(m) || readers[m.ID()] != 1 || output[m.ID()] {
			continue
		}
		a, b := m.Inputs()[0], m.Inputs()[1]
		if !a.Shape().Equal(m.Shape()) || !b.Shape().Equal(m.Shape()) || a.DType() != m.DType() || b.DType() != m.DType() {
			continue
		}
		for _, gx := range [][2]*graph.Node{{a, b}, {b, a}} {
			g, x := gx[0], gx[1]
			r1 := first[g.ID()]
			if r1 == nil {
				continue
			}
			if _, taken := f.sums[r1.ID()]; taken || f.sumOf[r1.ID()] != nil || r1.ID() > r2.ID() || x.ID() > r1.ID() || r1.DType() != r2.DType() {
				continue
			}
			f.absorbed[m.ID()] = true
			f.sums[r1.ID()], f.sumOf[r2.ID()] = channelPair{second: r2, x: x}, r1
			break
		}
	}
}

// program returns the fused chain of grp: one step per member, registers
// for the intermediates, the root writing the output.
// The Target completes it (Target.Lower: chunk and threads).
func (grp *group) program() *Fused {
	reg := map[int]int{}
	leaf := map[int]int{}
	for i, l := range grp.leaves {
		leaf[l.ID()] = i
	}
	root := grp.members[len(grp.members)-1]
	f := &Fused{Leaves: grp.kinds}
	operand := func(n *graph.Node) int {
		if r, ok := reg[n.ID()]; ok {
			return r
		}
		return -leaf[n.ID()] - 1
	}
	for _, m := range grp.members {
		s := FusedStep{Op: m.Op(), Dst: -1, OwnerID: m.ID()}
		s.A = operand(m.Inputs()[0])
		if len(m.Inputs()) > 1 {
			s.B = operand(m.Inputs()[1])
		}
		if len(m.Inputs()) > 2 {
			s.C = operand(m.Inputs()[2])
		}
		if m != root {
			s.Dst = f.Regs
			reg[m.ID()] = f.Regs
			f.Regs++
		}
		f.Steps = append(f.Steps, s)
	}
	return f
}
