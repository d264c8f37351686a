package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// assigner maps live nodes to buffers and decides in-place reuse. Times are
// node ids: instructions run in id order, so comparing ids compares times.
type assigner struct {
	g        *graph.Graph
	live     []bool
	konst    map[int]constant
	opt      Options
	bufs     []*Buffer
	dead     []bool      // by buffer: merged away
	nodeBuf  map[int]int // node id -> buffer
	lastUse  []int       // node id -> id of its last reader that runs an instruction (-1: none)
	lastRead []int       // like lastUse, but not counting Assign's write target
	backRead []bool      // node id -> a backward-phase node reads it
	output   map[int]bool
	assignOf map[int]*graph.Node // value node id -> the Assign that stores it
	fused    *fusion
	emit     []emitted // instructions, in order
	// parts maps a multi-output node's id to its live part nodes' ids,
	// by part index - 1 (-1: that part is not live); definer maps a part
	// node's id to the node whose instruction writes it.
	parts   map[int][]int
	definer map[int]int
}

type emitted struct {
	node *graph.Node
	copy bool // an Assign that copies its value into the variable
	work int  // workspace buffer, or -1
}

func assignBuffers(g *graph.Graph, live []bool, konst map[int]constant, opt Options) *assigner {
	n := g.Len()
	a := &assigner{g: g, live: live, konst: konst, opt: opt, nodeBuf: map[int]int{},
		lastUse: make([]int, n), lastRead: make([]int, n), backRead: make([]bool, n), output: map[int]bool{}, assignOf: map[int]*graph.Node{}}
	for i := range a.lastUse {
		a.lastUse[i], a.lastRead[i] = -1, -1
	}
	for _, o := range opt.Outputs {
		a.output[o.Node.ID()] = true
	}
	for _, asg := range g.Assigns() {
		a.assignOf[asg.Inputs()[1].ID()] = asg
	}
	a.findParts()
	a.fused = newFusion()
	if !opt.DisableFusion {
		a.fused = fuse(g, live, konst, a.output, a.assignOf, opt.Target)
	}
	for _, c := range g.Nodes() {
		if !live[c.ID()] || a.fused.absorbed[c.ID()] {
			continue
		}
		if _, ok := konst[c.ID()]; ok {
			continue
		}
		if c.Op() == graph.OpPart {
			continue // written by its input's instruction, not a reader of it
		}
		for i, in := range a.inputsOf(c) {
			if c.Phase() == graph.Backward {
				a.backRead[in.ID()] = true
			}
			if c.Op().Class() == graph.ClassAlias {
				if i > 0 { // a wait's second input: the collective reads it until the wait
					a.lastUse[in.ID()], a.lastRead[in.ID()] = c.ID(), c.ID()
				}
				continue // a view's own readers count, through its buffer
			}
			a.lastUse[in.ID()] = c.ID()
			if !(c.Op() == graph.OpAssign && i == 0) {
				a.lastRead[in.ID()] = c.ID()
			}
		}
	}
	// A view's readers read its source: carry their last use back (views
	// have larger ids than their sources, so one backward sweep suffices).
	for id := n - 1; id >= 0; id-- {
		c := g.Node(id)
		if !live[id] || c.Op().Class() != graph.ClassAlias {
			continue
		}
		if _, ok := konst[id]; ok {
			continue
		}
		src := c.Inputs()[0].ID()
		a.lastUse[src] = max(a.lastUse[src], a.lastUse[id])
		a.lastRead[src] = max(a.lastRead[src], a.lastRead[id])
	}

	for _, n := range g.Nodes() {
		if !live[n.ID()] || a.fused.absorbed[n.ID()] {
			continue
		}
		if k, ok := konst[n.ID()]; ok {
			a.newBuf(n, KindConstant, mem.Workspace).value = k.value
			continue
		}
		if _, ok := a.fused.cropped[n.ID()]; ok {
			// writes its crop's buffer (FusePadIntoConv)
			a.emit = append(a.emit, emitted{node: n, work: a.workspace(n)})
			continue
		}
		if dp := a.fused.cropOf[n.ID()]; dp != nil {
			a.newBuf(n, KindArena, mem.Workspace)
			a.definer[n.ID()] = dp.ID()
			continue
		}
		if c := a.fused.momentsOf[n.ID()]; c != nil {
			// written by the convolution's instruction (FuseConvMoments)
			a.newBuf(n, KindArena, mem.Workspace)
			a.definer[n.ID()] = c.ID()
			continue
		}
		if r1 := a.fused.sumOf[n.ID()]; r1 != nil {
			// written by the first sum's instruction (FuseChannelSums)
			a.newBuf(n, KindArena, mem.Workspace)
			a.definer[n.ID()] = r1.ID()
			continue
		}
		switch n.Op() {
		case graph.OpInput:
			a.newBuf(n, KindInput, mem.Input)
		case graph.OpVariable:
			a.newBuf(n, KindVariable, RoleCategory(n.Attr().Role))
		case graph.OpReshape:
			a.join(a.nodeBuf[n.Inputs()[0].ID()], n)
		case graph.OpPart:
			// a buffer of its own, written by its input's instruction (one
			// buffer for two part nodes of one output: a recomputation)
			if ps := a.parts[n.Inputs()[0].ID()]; ps != nil {
				if b, ok := a.nodeBuf[ps[n.Attr().Part-1]]; ok {
					a.join(b, n)
					continue
				}
			}
			a.newBuf(n, KindArena, mem.Workspace)
		case graph.OpAllReduceWait, graph.OpReduceScatterWait, graph.OpAllGatherWait:
			// a view of the start's buffer that runs an instruction: the
			// wait for the collective in flight
			a.emit = append(a.emit, emitted{node: n, work: -1})
			a.join(a.nodeBuf[n.Inputs()[0].ID()], n)
		case graph.OpAssign:
			if a.nodeBuf[n.Inputs()[1].ID()] != a.nodeBuf[n.Inputs()[0].ID()] {
				a.emit = append(a.emit, emitted{node: n, copy: true, work: -1})
			}
		default:
			a.emit = append(a.emit, emitted{node: n, work: a.workspace(n)})
			if a.intoVariable(n) {
				continue
			}
			if b, ok := a.inPlace(n); ok {
				a.join(b, n)
				if n.Op() == graph.OpAllReduceStart {
					a.bufs[b].Owner = n.Owner() // from here on, it is the bucket
				}
				continue
			}
			a.newBuf(n, KindArena, mem.Workspace)
		}
	}
	for _, o := range opt.Outputs {
		b := a.bufs[a.nodeBuf[o.Node.ID()]]
		if b.Kind == KindArena {
			b.Kind, b.Name, b.Category = KindOutput, o.Name, mem.Workspace
			if o.Grad {
				b.Category = mem.Grad
			}
		}
	}
	grads := map[int]bool{}
	for _, n := range opt.Grads {
		grads[n.ID()] = true
	}
	for i, b := range a.bufs {
		if a.dead[i] || b.Kind != KindArena {
			continue
		}
		for _, id := range b.Nodes {
			switch {
			case grads[id]:
				b.Category = mem.Grad
			case a.g.Node(id).Phase() == graph.Forward && a.backRead[id] && b.Category != mem.Grad:
				b.Category = mem.Activation
			}
		}
	}
	return a
}

// RoleCategory is the ledger category of a variable with role r.
func RoleCategory(r graph.Role) mem.Category {
	switch r {
	case graph.RoleGrad:
		return mem.Grad
	case graph.RoleOptState:
		return mem.OptState
	}
	return mem.Param
}

func (a *assigner) newBuf(n *graph.Node, kind BufferKind, cat mem.Category) *Buffer {
	b := &Buffer{ID: len(a.bufs), Kind: kind, Category: cat, Owner: n.Owner(), Site: n.Site(),
		DType: n.DType(), Shape: n.Shape(), Bytes: mem.Align(n.Bytes()), Offset: -1, Nodes: []int{n.ID()}}
	if kind == KindInput || kind == KindVariable {
		b.Name = n.Attr().Name
	}
	a.bufs = append(a.bufs, b)
	a.dead = append(a.dead, false)
	a.nodeBuf[n.ID()] = b.ID
	return b
}

// workspace returns a buffer for the scratch memory n's instruction needs,
// or -1. It lives in the arena for that one instruction.
func (a *assigner) workspace(n *graph.Node) int {
	it := a.instr(n, nil)
	size := a.opt.Target.Lower(&it)
	if size == 0 {
		return -1
	}
	b := &Buffer{ID: len(a.bufs), Kind: KindArena, Category: mem.Workspace, Owner: n.Owner() + "/workspace", Site: n.Site(),
		DType: n.DType(), Shape: tensor.Shape{int(size) / n.DType().Size()}, Bytes: mem.Align(size), Offset: -1}
	a.bufs = append(a.bufs, b)
	a.dead = append(a.dead, false)
	return b.ID
}

// inputsOf returns what n's instruction reads: a fused root reads its
// group's leaves; a relu gradient that absorbed a pool gradient reads the
// pool gradient's inputs; a first channel sum reads g and x, and the
// second reads nothing of its own; a convolution whose padding was folded
// into its window reads the unpadded input, and a crop that its input
// gradient writes reads nothing of its own.
func (a *assigner) inputsOf(n *graph.Node) []*graph.Node {
	if grp := a.fused.groups[n.ID()]; grp != nil {
		return grp.leaves
	}
	if p := a.fused.poolRelu[n.ID()]; p != nil {
		return p.Inputs()
	}
	if pair, ok := a.fused.sums[n.ID()]; ok {
		return []*graph.Node{n.Inputs()[0], pair.x}
	}
	if a.fused.sumOf[n.ID()] != nil || a.fused.cropOf[n.ID()] != nil || a.fused.momentsOf[n.ID()] != nil {
		return nil // the instruction that writes it reads for it
	}
	if pf, ok := a.fused.padded[n.ID()]; ok { // the unpadded input
		return append([]*graph.Node{pf.x}, n.Inputs()[1:]...)
	}
	return n.Inputs()
}

func (a *assigner) join(b int, n *graph.Node) {
	a.bufs[b].Nodes = append(a.bufs[b].Nodes, n.ID())
	a.nodeBuf[n.ID()] = b
}

// groupLast returns the id of the last instruction that reads buffer b.
func (a *assigner) groupLast(b int, use []int) int {
	last := -1
	for _, id := range a.bufs[b].Nodes {
		last = max(last, use[id])
	}
	return last
}

func (a *assigner) pinned(b int) bool {
	for _, id := range a.bufs[b].Nodes {
		if a.output[id] {
			return true
		}
	}
	return false
}

// inPlace returns the buffer of an input that n may overwrite: n is
// elementwise, the input has n's dtype and element count (so element i of
// the input is element i of the output), lives in the arena, is no output,
// and n is its last reader.
func (a *assigner) inPlace(n *graph.Node) (int, bool) {
	if a.opt.DisableInPlace || n.Op().Class() != graph.ClassElementwise || a.output[n.ID()] || a.fused.poolRelu[n.ID()] != nil {
		return 0, false // (a pool gradient reads its whole window before writing)
	}
	for _, in := range a.inputsOf(n) {
		if in.DType() != n.DType() || in.Shape().Size() != n.Shape().Size() {
			continue
		}
		b := a.nodeBuf[in.ID()]
		if a.bufs[b].Kind != KindArena || a.pinned(b) || a.groupLast(b, a.lastUse) != n.ID() {
			continue
		}
		return b, true
	}
	return 0, false
}

// intoVariable makes Assign(v, n) free when it can: n's instruction writes
// straight into v's buffer. That is legal when every read of v happens
// before n runs, or is n's own elementwise read (element i is read before it
// is written), and n is not an output of its own.
func (a *assigner) intoVariable(n *graph.Node) bool {
	asg := a.assignOf[n.ID()]
	if asg == nil || a.opt.DisableInPlace || a.output[n.ID()] {
		return false
	}
	vb := a.nodeBuf[asg.Inputs()[0].ID()]
	lastRead := a.groupLast(vb, a.lastRead)
	if lastRead > n.ID() || (lastRead == n.ID() && n.Op().Class() != graph.ClassElementwise) {
		return false
	}
	a.join(vb, n)
	return true
}

// plan numbers the surviving buffers, computes arena lifetimes in
// instruction indices and places the arena.
func (a *assigner) plan() *Plan {
	renum := make([]int, len(a.bufs))
	var bufs []Buffer
	for i, b := range a.bufs {
		if a.dead[i] {
			renum[i] = -1
			continue
		}
		renum[i] = len(bufs)
		b.ID = len(bufs)
		bufs = append(bufs, *b)
	}
	for id, b := range a.nodeBuf {
		a.nodeBuf[id] = renum[b]
	}
	at := map[int]int{}   // node id -> instruction index
	work := map[int]int{} // workspace buffer -> instruction index
	for i, e := range a.emit {
		at[e.node.ID()] = i
		if e.work >= 0 {
			work[renum[e.work]] = i
			a.emit[i].work = renum[e.work]
		}
	}
	var arena []int
	for i := range bufs {
		b := &bufs[i]
		if b.Kind != KindArena {
			continue
		}
		b.Start, b.End = len(a.emit), -1
		if t, ok := work[i]; ok {
			b.Start, b.End = t, t
		}
		for _, id := range b.Nodes {
			def := id
			if p, ok := a.definer[id]; ok {
				def = p // a part is written when its definer runs
			}
			if t, ok := at[def]; ok {
				// every instruction that defines a node of the buffer runs
				// in its lifetime (the wait of an all-reduce writes it)
				b.Start, b.End = min(b.Start, t), max(b.End, t)
			}
			if u := a.lastUse[id]; u >= 0 {
				b.End = max(b.End, at[u])
			}
		}
		b.End = max(b.End, b.Start) // a value nobody reads lives at its definition
		arena = append(arena, i)
	}
	return newPlan(bufs, arena, len(a.emit))
}

// instr returns n's instruction, reading the buffers ins (nil while
// sizing workspace): a fused chain's root runs its chain, a relu gradient
// that absorbed a pool gradient runs the pool gradient with ReluMask.
func (a *assigner) instr(n *graph.Node, ins []int) Instr {
	out := 0
	if ins != nil {
		out = a.nodeBuf[n.ID()]
	}
	if grp := a.fused.groups[n.ID()]; grp != nil {
		return Instr{Op: graph.OpFused, Node: n.ID(), Owner: n.Owner(), Site: n.Site(), DType: n.DType(),
			InDType: n.DType(), Out: out, In: ins, Shape: n.Shape(), Fused: grp.program()}
	}
	if p := a.fused.poolRelu[n.ID()]; p != nil {
		it := lowerNode(p, out, ins)
		it.Node, it.Owner, it.Site = n.ID(), n.Owner(), n.Site()
		it.Window.ReluMask = true
		return it
	}
	if m := a.fused.convMoments[n.ID()]; m != nil {
		it := lowerNode(n, out, ins)
		if pf, ok := a.fused.padded[n.ID()]; ok {
			it.Window.Geom = pf.fold(it.Window.Geom)
		}
		it.Window.Moments = true
		it.Parts = []int{0} // (while sizing workspace, before it has a buffer)
		if ins != nil {
			it.Parts[0] = a.nodeBuf[m.ID()]
		}
		return it
	}
	if pf, ok := a.fused.padded[n.ID()]; ok {
		it := lowerNode(n, out, ins)
		it.Window.Geom = pf.fold(it.Window.Geom)
		return it
	}
	if pf, ok := a.fused.cropped[n.ID()]; ok {
		if ins != nil {
			out = a.nodeBuf[pf.x.ID()]
		}
		it := lowerNode(n, out, ins)
		it.Shape = pf.x.Shape()
		it.Window.Geom = pf.fold(it.Window.Geom)
		return it
	}
	if pair, ok := a.fused.sums[n.ID()]; ok {
		it := lowerNode(n, out, ins)
		it.Reduce.Product = true
		it.Parts = []int{0} // (while sizing workspace, before it has a buffer)
		if ins != nil {
			it.Parts[0] = a.nodeBuf[pair.second.ID()]
		}
		return it
	}
	it := lowerNode(n, out, ins)
	if ps := a.parts[n.ID()]; ps != nil {
		// the buffers of its parts (while sizing workspace, before they
		// have buffers: 0 for a live part), -1 for a part nobody reads
		it.Parts = make([]int, len(ps))
		for i, id := range ps {
			switch {
			case id < 0:
				it.Parts[i] = -1
			case ins != nil:
				it.Parts[i] = a.nodeBuf[id]
			}
		}
	}
	return it
}

// findParts records the live part nodes of every multi-output node.
func (a *assigner) findParts() {
	a.parts, a.definer = map[int][]int{}, map[int]int{}
	for _, n := range a.g.Nodes() {
		if !a.live[n.ID()] {
			continue
		}
		if k := n.Op().NumParts(); k > 0 {
			if _, ok := a.konst[n.ID()]; !ok {
				ps := make([]int, k)
				for i := range ps {
					ps[i] = -1
				}
				a.parts[n.ID()] = ps
			}
		}
		if n.Op() == graph.OpPart {
			p := n.Inputs()[0].ID()
			a.definer[n.ID()] = p
			if ps := a.parts[p]; ps != nil && ps[n.Attr().Part-1] < 0 {
				ps[n.Attr().Part-1] = n.ID()
			}
		}
	}
}

// lower emits the instructions over the final buffer table.
func (a *assigner) lower() []Instr {
	out := make([]Instr, 0, len(a.emit))
	at := make(map[int]int, len(a.emit)) // node id -> instruction index
	for i, e := range a.emit {
		at[e.node.ID()] = i
	}
	for _, e := range a.emit {
		n := e.node
		if e.copy { // variable, value: the value copied into the variable's buffer
			v, x := n.Inputs()[0], n.Inputs()[1]
			vb := a.nodeBuf[v.ID()]
			out = append(out, lowerNode(n, vb, []int{vb, a.nodeBuf[x.ID()]}))
			continue
		}
		in := a.inputsOf(n)
		ins := make([]int, len(in))
		for i, x := range in {
			ins[i] = a.nodeBuf[x.ID()]
		}
		it := a.instr(n, ins)
		if n.Op().WaitsFor() != graph.OpInvalid {
			it.Collective = &CollectiveGeom{Start: at[n.Inputs()[0].ID()]}
		}
		a.opt.Target.Lower(&it)
		it.Work = e.work
		out = append(out, it)
	}
	return out
}
