package step

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/optim"
)

// The ZeRO stages (Rajbhandari et al., "ZeRO: Memory Optimizations Toward
// Training Trillion Parameter Models", 2020, section 5) as transforms.
// Every sharded tensor is split the same way: a parameter of n elements,
// flattened and zero-padded to ranks·s elements (s = BlockSize(n, ranks)),
// is ranks blocks of s, process r holding block r. Stage 1 shards the
// optimizer state; stage 2 also the gradients: they are reduce-scattered
// in buckets while backward goes on, and each process keeps (and, over
// micro-batches, accumulates) only its block; stage 3 also the parameters
// (gathers.go). The update of a block is the optimizer's own, on block-sized
// state named after the parameter, so a checkpoint gathers the blocks into
// the tensors an unsharded run holds.

// flatPadded returns x [shape of n elements] as a vector of ranks·s
// elements, zero-padded past n.
func flatPadded(x *graph.Node, ranks int) *graph.Node {
	n := x.Shape().Size()
	s := BlockSize(n, ranks)
	x = graph.Reshape(x, n)
	if pad := s*ranks - n; pad > 0 {
		x = graph.Concat(0, x, graph.BroadcastTo(graph.ScalarLike(x, 0), pad))
	}
	return x
}

// zero1 is stage 1's reduce-scatter: each share-weighted gradient, once
// final, is reduce-scattered (blocking) and this process's block of the sum
// goes on to clipping and the update (shardedUpdate). Under micro-batches
// the accumulators before it hold whole gradients, as stage 1 does.
func zero1() Transform {
	return Transform{
		Name: "zero1", Doc: "reduce-scatter each gradient: this process's block of the sum goes on",
		Early: true,
		Grad: func(b *Builder, i int, gr *graph.Node) *graph.Node {
			b.G.PushScope("zero")
			defer b.G.PopScope()
			return graph.ReduceScatterSum(flatPadded(gr, b.Config.Ranks), b.Config.Ranks)
		},
	}
}

// shardBuckets is the reduce-scatter of stages 2 and 3: the share-weighted
// gradients, in the order backward makes them, fill buckets of about limit
// bytes; a full bucket's reduce-scatter starts at once and runs while
// backward computes the next gradient: it is waited for when that
// gradient arrives, so a bucket's whole gradients outlive it by one
// gradient's computation, and each process keeps only its blocks. A
// gradient larger than limit, a bucket of its own, is waited for at once:
// the bucket size bounds the whole gradients kept while backward goes on.
// (Waiting later would hide more of the exchange but keep whole gradients
// through backward's peak, as the buckets of plain data parallelism do.)
// Under micro-batches each block is added (weighted by opt/micro_weight) to
// a block-sized accumulator (<param>/accum, category grad): Accumulate
// stops there, Apply hands the sum on and resets it.
func shardBuckets(stage int, limit int64) Transform {
	var rs *scatter
	return Transform{
		Name: fmt.Sprintf("zero%d", stage), Early: true,
		Doc: "reduce-scatter the gradients in buckets started as backward fills them; keep this process's blocks (accumulated over micro-batches)",
		Begin: func(b *Builder) {
			rs = &scatter{b: b, limit: limit, ranks: b.Config.Ranks}
			if b.Mode == Accumulate || b.Mode == Apply {
				rs.micro = b.G.Input("opt/micro_weight", b.Loss.DType(), nil)
			}
			rs.next = b.after(fmt.Sprintf("zero%d", stage))
		},
		Grad: func(b *Builder, i int, gr *graph.Node) *graph.Node {
			rs.add(i, gr)
			return nil
		},
		Collect: func(b *Builder, deliver func(i int, gr *graph.Node)) { rs.finish() },
	}
}

// scatter is shardBuckets' state while a step is built.
type scatter struct {
	b        *Builder
	limit    int64
	ranks    int
	micro    *graph.Node // opt/micro_weight under micro-batches
	open     rsBucket    // filling
	inFlight *rsBucket   // started, not yet waited for
	n        int         // buckets started
	next     func(i int, gr *graph.Node)
}

type rsBucket struct {
	members []int
	parts   []*graph.Node // each member's gradient, flattened and padded
	bytes   int64
	scope   string
	start   *graph.Node
}

func (s *scatter) add(i int, gr *graph.Node) {
	if s.inFlight != nil {
		s.wait(*s.inFlight)
		s.inFlight = nil
	}
	if n := gr.Bytes(); s.open.bytes > 0 && s.open.bytes+n > s.limit {
		s.flush()
	}
	s.open.members = append(s.open.members, i)
	s.open.parts = append(s.open.parts, gr)
	s.open.bytes += gr.Bytes()
	if s.open.bytes >= s.limit {
		s.flush()
	}
}

// flush starts the open bucket's reduce-scatter, then waits for the
// bucket started before it and hands its blocks on.
func (s *scatter) flush() {
	k := s.open
	if len(k.members) == 0 {
		return
	}
	s.open = rsBucket{}
	g := s.b.G
	k.scope = fmt.Sprintf("zero/bucket%d", s.n)
	s.n++
	g.PushScope(k.scope)
	// [ranks·S]: block r is the concatenation of the members' blocks r
	var send *graph.Node
	if len(k.parts) == 1 {
		send = flatPadded(k.parts[0], s.ranks)
	} else {
		rows := make([]*graph.Node, len(k.parts))
		total := 0
		for j, p := range k.parts {
			bs := BlockSize(p.Shape().Size(), s.ranks)
			rows[j] = graph.Reshape(flatPadded(p, s.ranks), s.ranks, bs)
			total += bs
		}
		send = graph.Reshape(graph.Concat(1, rows...), s.ranks*total)
	}
	k.start = graph.ReduceScatterStart(send, s.ranks)
	g.PopScope()
	if s.inFlight != nil {
		s.wait(*s.inFlight)
		s.inFlight = nil
	}
	if k.bytes > s.limit {
		s.wait(k)
		return
	}
	s.inFlight = &k
}

// finish starts the open bucket and waits for the last one.
func (s *scatter) finish() {
	s.flush()
	if s.inFlight != nil {
		s.wait(*s.inFlight)
		s.inFlight = nil
	}
}

// wait builds the wait for bucket k and hands each member's block (or,
// under micro-batches, its accumulated sum) to the transforms after.
func (s *scatter) wait(k rsBucket) {
	g := s.b.G
	g.PushScope(k.scope)
	sum := graph.ReduceScatterWait(k.start)
	blocks := make([]*graph.Node, len(k.members))
	at := 0
	for j, p := range k.parts {
		bs := BlockSize(p.Shape().Size(), s.ranks)
		blocks[j] = sum
		if len(k.parts) > 1 {
			blocks[j] = graph.Slice(sum, []int{at}, []int{at + bs})
		}
		at += bs
	}
	g.PopScope()
	for j, i := range k.members {
		if gr := s.accumulate(i, blocks[j]); gr != nil {
			s.next(i, gr)
		}
	}
}

// accumulate adds block gr of parameter i to its accumulator under
// micro-batches and returns what goes on: gr (no micro-batches), the sum
// (Apply) or nil (Accumulate).
func (s *scatter) accumulate(i int, gr *graph.Node) *graph.Node {
	b := s.b
	if s.micro == nil {
		return gr
	}
	name := b.paramName(i)
	b.G.PushScope("zero/accumulate")
	defer b.G.PopScope()
	acc := b.G.Variable(name+"/accum", graph.RoleGrad, gr.DType(), gr.Shape())
	sum := graph.Add(acc, graph.Mul(gr, s.micro))
	if b.Mode == Accumulate {
		graph.Assign(acc, sum)
		return nil
	}
	graph.Assign(acc, graph.BroadcastTo(graph.ScalarLike(gr, 0), gr.Shape()...))
	return sum
}

// shardedUpdate is the optimizer's update of this process's block of each
// parameter, from its block of the gradient, with block-sized state: in
// stages 1 and 2 the updated blocks are then all-gathered into the whole
// parameter every process holds; in stage 3 the block is the parameter's
// variable, updated in place.
func shardedUpdate(stage int, o optim.Optimizer) Transform {
	t := Transform{Name: "update", Doc: "the " + o.Name() + " update of this process's block of each parameter"}
	if stage < 3 {
		t.Doc += ", all-gathered into the parameter"
	}
	apply := func(b *Builder, i int, gr *graph.Node) {
		g := b.G
		g.PushScope("zero")
		defer g.PopScope()
		if stage == 3 {
			v := b.Shards[i]
			graph.Assign(v, o.Update(g, v, v, gr))
			return
		}
		c, p := &b.Config, b.Params[i]
		n, s := p.Shape().Size(), BlockSize(p.Shape().Size(), c.Ranks)
		w := graph.Slice(flatPadded(p, c.Ranks), []int{c.Rank * s}, []int{(c.Rank + 1) * s})
		full := graph.AllGather(o.Update(g, p, w, gr), c.Ranks)
		if s*c.Ranks > n {
			full = graph.Slice(full, []int{0}, []int{n})
		}
		graph.Assign(p, graph.Reshape(full, p.Shape()...))
	}
	t.Grad = func(b *Builder, i int, gr *graph.Node) *graph.Node {
		if !b.interleaved() {
			return gr
		}
		apply(b, i, gr)
		return nil
	}
	t.Finish = func(b *Builder) {
		if b.interleaved() {
			return
		}
		for i, gr := range b.Grads {
			apply(b, i, gr)
		}
	}
	return t
}

// globalNormScale returns min(1, clip/‖g‖) for the gradients grads, ‖g‖
// their norm over every process when each holds a block of them.
func globalNormScale(grads []*graph.Node, clip float64, sharded bool) *graph.Node {
	var sq *graph.Node
	for _, gr := range grads {
		s := graph.ReduceSum(graph.Square(gr))
		if sq == nil {
			sq = s
		} else {
			sq = graph.Add(sq, s)
		}
	}
	if sharded {
		sq = graph.AllReduceSum(sq)
	}
	norm := graph.Sqrt(sq)
	return graph.Div(graph.ScalarLike(norm, clip), graph.Maximum(norm, graph.ScalarLike(norm, clip)))
}

// paramName is the name of trainable parameter i's variable (stage 3: of
// its block), after which its state is named.
func (b *Builder) paramName(i int) string {
	if b.Shards != nil {
		return b.Shards[i].Attr().Name
	}
	return b.Params[i].Attr().Name
}

// after returns what hands a gradient to the transforms after the one
// named name.
func (b *Builder) after(name string) func(i int, gr *graph.Node) {
	for k, t := range b.transforms {
		if t.Name == name {
			return func(i int, gr *graph.Node) { b.pass(k+1, i, gr) }
		}
	}
	panic(&graph.Error{Op: graph.OpInvalid, Msg: "step: no transform " + name})
}
