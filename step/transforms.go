package step

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/optim"
)

// Transform is one named rewrite of a training step (see the package
// documentation for when each hook runs). Hooks may be nil.
type Transform struct {
	Name string
	Doc  string // one line: what it does to the step
	// Begin runs before the backward pass: it declares the transform's
	// inputs and may replace b.Target, what is differentiated.
	Begin func(b *Builder)
	// Grad sees the gradient of b.Params[i] as soon as it is final and
	// returns what the next transform gets, or nil when it consumed it.
	Grad func(b *Builder, i int, gr *graph.Node) *graph.Node
	// Collect runs once every gradient went through the Grad hooks: it may
	// hand gradients it consumed back to the transforms after it, through
	// deliver.
	Collect func(b *Builder, deliver func(i int, gr *graph.Node))
	// Finish runs last, in order; it may read and replace b.Grads.
	Finish func(b *Builder)
	// NeedsAll: Finish needs every gradient at once, so gradients are not
	// handed on during the backward pass (no interleaved updates).
	NeedsAll bool
	// Early: the Grad hooks up to this one's see each gradient during the
	// backward pass even when a transform needs every gradient, and those
	// after it see what it hands on then (ZeRO's reduce-scatters: what is
	// kept for the end is this process's block of each gradient).
	Early bool
}

// Transforms returns the transforms of the step, in order:
//
//	loss_scale   float16 loss scaling, its overflow check and step guard
//	accumulate   micro-batch gradient accumulation (ZeRO 0 and 1)
//	rank_weight  a data-parallel process's share of the batch
//	(Config.Extra)
//	buckets      all-reduce of gradient buckets, overlapped with backward
//	zero1        ZeRO stage 1: reduce-scatter each gradient
//	zero2, zero3 ZeRO stages 2 and 3: reduce-scatter gradient buckets,
//	             overlapped with backward; accumulate blocks
//	clip         clipping by global norm
//	update       the optimizer's update of each parameter (ZeRO: of this
//	             process's block of it)
func (b *Builder) Transforms() []Transform {
	c := &b.Config
	stage := c.ZeroStage()
	var ts []Transform
	if c.LossScaling() {
		ts = append(ts, lossScale())
	}
	if (b.Mode == Accumulate || b.Mode == Apply) && stage < 2 {
		ts = append(ts, accumulate())
	}
	if c.Ranks > 1 && (b.Mode != Accumulate || stage >= 2) {
		ts = append(ts, rankWeight())
	}
	ts = append(ts, c.Extra...)
	switch {
	case stage >= 2:
		ts = append(ts, shardBuckets(stage, c.bucketBytes()))
	case b.Mode == Accumulate:
		return ts // the micro-batch stops at the accumulators
	case stage == 1:
		ts = append(ts, zero1())
	case c.Ranks > 1:
		ts = append(ts, bucketed(c.bucketBytes()))
	}
	if b.Mode == Accumulate {
		return ts // stages 2 and 3: the micro-batch stops at the accumulated blocks
	}
	if c.ClipNorm > 0 {
		ts = append(ts, clip(c.ClipNorm))
	}
	if stage > 0 {
		return append(ts, shardedUpdate(stage, c.optimizer()))
	}
	return append(ts, update(c.optimizer()))
}

// lossScale is float16 dynamic loss scaling (as torch.cuda.amp.GradScaler):
// the loss is multiplied by the scale input opt/loss_scale before the
// backward pass and each gradient by opt/inv_loss_scale after it; Finite
// says whether every gradient (of the whole batch, after any all-reduce) is
// finite, and guards every assign of the step, so an overflow changes
// nothing. The caller halves or grows the scale between steps.
func lossScale() Transform {
	var unscale *graph.Node
	return Transform{
		Name: "loss_scale", Doc: "multiply the loss by opt/loss_scale, the gradients by opt/inv_loss_scale; a step whose gradients overflow changes nothing",
		NeedsAll: true,
		Begin: func(b *Builder) {
			loss := b.Target
			b.Target = graph.Mul(loss, b.G.Input("opt/loss_scale", loss.DType(), nil))
			unscale = b.G.Input("opt/inv_loss_scale", loss.DType(), nil)
		},
		Grad: func(b *Builder, i int, gr *graph.Node) *graph.Node { return graph.Mul(gr, unscale) },
		Finish: func(b *Builder) {
			if b.Mode == Accumulate {
				return
			}
			// finite holds when no gradient is Inf or NaN: 0·g is NaN
			// exactly there. Accumulators were reset unguarded: a skipped
			// step drops its gradients.
			var probe *graph.Node
			for _, gr := range b.Grads {
				z := graph.ReduceSum(graph.MulScalar(gr, 0))
				if probe == nil {
					probe = z
				} else {
					probe = graph.Add(probe, z)
				}
			}
			if b.Config.sharded() && probe != nil { // each process checked its blocks
				probe = graph.AllReduceSum(probe)
			}
			b.Finite = graph.Equal(probe, graph.ScalarLike(probe, 0))
			b.G.SetGuard(b.Finite) // a step with an overflow changes nothing
		},
	}
}

// accumulate adds each gradient, weighted by the micro-batch's share of
// the batch (opt/micro_weight), to a persistent accumulator (grad
// category): the weighted sum is the gradient of the batch's mean loss. An
// Accumulate step stops there; an Apply step hands the sum on and resets
// the accumulator.
func accumulate() Transform {
	var weight *graph.Node
	return Transform{
		Name: "accumulate", Doc: "add the gradient weighted by opt/micro_weight to <param>/accum; the last micro-batch updates from the sum and resets it",
		Begin: func(b *Builder) { weight = b.G.Input("opt/micro_weight", b.Loss.DType(), nil) },
		Grad: func(b *Builder, i int, gr *graph.Node) *graph.Node {
			p := b.Params[i]
			acc := b.G.Variable(p.Attr().Name+"/accum", graph.RoleGrad, p.DType(), p.Shape())
			sum := graph.Add(acc, graph.Mul(gr, weight))
			if b.Mode == Accumulate {
				graph.Assign(acc, sum)
				return nil
			}
			graph.Assign(acc, graph.BroadcastTo(graph.ScalarLike(p, 0), p.Shape()...))
			return sum
		},
	}
}

// rankWeight weights a data-parallel process's gradient by its share of
// the batch (opt/rank_weight): summed over the processes, the weighted
// gradients are the batch's.
func rankWeight() Transform {
	var w *graph.Node
	return Transform{
		Name: "rank_weight", Doc: "multiply the gradient by this process's share of the batch, opt/rank_weight",
		Begin: func(b *Builder) { w = b.G.Input("opt/rank_weight", b.Loss.DType(), nil) },
		Grad:  func(b *Builder, i int, gr *graph.Node) *graph.Node { return graph.Mul(gr, w) },
	}
}

// bucketed sums the gradients over the processes in buckets whose
// all-reduce starts as soon as backward has filled them, waited for
// after the backward pass, in start order.
func bucketed(limit int64) Transform {
	var bk *buckets
	return Transform{
		Name: "buckets", Doc: "concatenate gradients into buckets of about the bucket size; each all-reduce starts when its bucket is full and is waited for after backward",
		Begin: func(b *Builder) { bk = &buckets{g: b.G, limit: limit} },
		Grad: func(b *Builder, i int, gr *graph.Node) *graph.Node {
			bk.add(i, gr)
			return nil
		},
		Collect: func(b *Builder, deliver func(i int, gr *graph.Node)) {
			bk.waitAll(func(members []int, sums []*graph.Node) {
				for j, i := range members {
					deliver(i, sums[j])
				}
			})
		},
	}
}

// clip scales the gradients by min(1, norm/‖g‖), ‖g‖ their global norm
// (under ZeRO, each process holding a block of every gradient, their
// squares are summed over the processes).
func clip(norm float64) Transform {
	return Transform{
		Name: "clip", Doc: "scale every gradient by min(1, clip/global norm)",
		NeedsAll: true,
		Finish: func(b *Builder) {
			if !b.Config.sharded() {
				b.Grads = optim.ClipByGlobalNorm(b.Grads, norm)
				return
			}
			if len(b.Grads) == 0 {
				return
			}
			b.G.PushScope("clip_by_global_norm")
			defer b.G.PopScope()
			scale := globalNormScale(b.Grads, norm, true)
			for i, gr := range b.Grads {
				b.Grads[i] = graph.Mul(gr, scale)
			}
		},
	}
}

// update is the optimizer's update: of each parameter as soon as its
// gradient arrives when the step interleaves, else of all of them at the
// end.
func update(o optim.Optimizer) Transform {
	t := Transform{Name: "update", Doc: "the " + o.Name() + " update of each parameter"}
	t.Grad = func(b *Builder, i int, gr *graph.Node) *graph.Node {
		if !b.interleaved() {
			return gr
		}
		o.Apply(b.G, b.Params[i:i+1], []*graph.Node{gr})
		return nil
	}
	t.Finish = func(b *Builder) {
		if !b.interleaved() {
			o.Apply(b.G, b.Params, b.Grads)
		}
	}
	return t
}

// interleaved reports whether the step hands gradients on during the
// backward pass (no transform needs them all at once).
func (b *Builder) interleaved() bool {
	for _, t := range b.transforms {
		if t.NeedsAll {
			return false
		}
	}
	return true
}
