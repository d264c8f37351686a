package step

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// gathers holds the parameters of a ZeRO stage 3 step (nn.Shards): each
// trainable weight's variable is this process's block of it
// (BlockSize(n, ranks) elements, named as the weight), and layers read
// the whole weight, all-gathered from the processes into an arena buffer
// that lives from its gather to its layer's last read, as PyTorch FSDP2
// does per parameter. A layer (the weights requested under one scope, one
// after another) is gathered as one: its gathers are waited for when the
// layer asks for its first weight, and the next layer's gathers start right
// then, so they run while this layer computes. The backward pass gathers
// each layer again (refetch, through autodiff.Options.Refetch) when its
// gradient rules first read a weight, starting the gathers of the layer
// before it, in reverse order; the forward's copies are not kept.
type gathers struct {
	g     *graph.Graph
	ranks int
	// layers lists the trainable weights by layer, in the order the model
	// asks for them (a build at batch 1: declared), and layerOf says where
	// each is
	layers  [][]declared
	layerOf map[string]int
	alone   map[string]declared // weights the build at batch 1 did not ask for
	vars    map[string]*graph.Node
	fwd     gatherPass
	bwd     gatherPass
	// names maps each forward value a layer read to its weight's name;
	// derived, forward values computed from them alone to their
	// recomputation for the backward pass (nil: not such a value)
	names   map[*graph.Node]string
	derived map[*graph.Node]*graph.Node
}

// declared is one trainable weight as a model asks for it.
type declared struct {
	name  string
	dtype tensor.DType
	shape tensor.Shape
	scope string
}

// gatherPass is the gathers of one pass (forward, backward).
type gatherPass struct {
	start  map[string]*graph.Node // all_gather_start, by weight
	value  map[string]*graph.Node // the whole weight, once waited for
	waited map[int]bool           // layers waited for
}

func newGatherPass() gatherPass {
	return gatherPass{start: map[string]*graph.Node{}, value: map[string]*graph.Node{}, waited: map[int]bool{}}
}

// newGathers returns the gathers of a step over ranks processes of a
// model whose trainable weights are ws, in the order it asks for them.
func newGathers(g *graph.Graph, ranks int, ws []declared) *gathers {
	z := &gathers{g: g, ranks: ranks, layerOf: map[string]int{}, alone: map[string]declared{}, vars: map[string]*graph.Node{},
		fwd: newGatherPass(), bwd: newGatherPass(), names: map[*graph.Node]string{}, derived: map[*graph.Node]*graph.Node{}}
	for i, w := range ws {
		if i == 0 || w.scope != ws[i-1].scope {
			z.layers = append(z.layers, nil)
		}
		k := len(z.layers) - 1
		z.layers[k] = append(z.layers[k], w)
		z.layerOf[w.name] = k
	}
	return z
}

// Weight declares (on the first call) the variable holding this process's
// block of weight name and returns it with the whole weight as the
// forward pass reads it.
func (z *gathers) Weight(name string, dtype tensor.DType, shape tensor.Shape) (v, value *graph.Node) {
	w := declared{name: name, dtype: dtype, shape: shape.Clone()}
	v = z.variable(w)
	if _, ok := z.fwd.value[name]; !ok {
		if k, ok := z.layerOf[name]; ok {
			z.fwd.wait(z, k)
			z.fwd.begin(z, k+1) // prefetch: the next layer's gathers run while this one computes
		} else { // not in the build at batch 1: gathered on its own
			z.alone[name] = w
			z.fwd.layer(z, -1, []declared{w})
		}
	}
	x := z.fwd.value[name]
	z.names[x] = name
	return v, x
}

// refetch is autodiff's Refetch: for a weight's forward value, its value
// gathered again for the backward pass (starting the layer before's); for
// a forward value computed from weights alone (a layer's reshaped kernel),
// that value computed again from the weights gathered again.
func (z *gathers) refetch(x *graph.Node) *graph.Node {
	name, ok := z.names[x]
	if !ok {
		return z.derive(x)
	}
	if v, ok := z.bwd.value[name]; ok {
		return v
	}
	if k, ok := z.layerOf[name]; ok {
		z.bwd.wait(z, k)
		z.bwd.begin(z, k-1)
	} else {
		z.bwd.layer(z, -1, []declared{z.alone[name]})
	}
	return z.bwd.value[name]
}

// derive computes x again for the backward pass when it is a forward value
// computed from gathered weights (and constants) alone; else nil.
func (z *gathers) derive(x *graph.Node) *graph.Node {
	if r, ok := z.derived[x]; ok {
		return r
	}
	z.derived[x] = nil // (no cycles in a graph; this marks the work done)
	if x.Phase() != graph.Forward || x.Op().Class() == graph.ClassLeaf || x.Op().Started() || x.Op() == graph.OpAssign {
		return nil
	}
	ins := make([]*graph.Node, len(x.Inputs()))
	some := false
	for i, in := range x.Inputs() {
		switch {
		case in.Op() == graph.OpConstant:
			ins[i] = in
		default:
			if ins[i] = z.refetch(in); ins[i] == nil {
				return nil
			}
			some = true
		}
	}
	if !some {
		return nil
	}
	r := graph.Recompute(x, ins...)
	z.derived[x] = r
	return r
}

// prefetch starts the backward pass's gathers of the last layer, which
// backward reads first, before the loss's gradient is built.
func (z *gathers) prefetch() {
	old := z.g.SetPhase(graph.Backward)
	z.bwd.begin(z, len(z.layers)-1)
	z.g.SetPhase(old)
}

// variable returns weight w's block variable, declaring it if need be.
func (z *gathers) variable(w declared) *graph.Node {
	if v, ok := z.vars[w.name]; ok {
		return v
	}
	v := z.g.Param(w.name, w.dtype, tensor.Shape{BlockSize(w.shape.Size(), z.ranks)})
	z.vars[w.name] = v
	return v
}

// begin starts the gathers of layer k (if it exists and has not started).
func (p *gatherPass) begin(z *gathers, k int) {
	if k < 0 || k >= len(z.layers) {
		return
	}
	for _, w := range z.layers[k] {
		if _, ok := p.start[w.name]; ok {
			continue
		}
		old := z.g.SetScope("gather", w.name)
		p.start[w.name] = graph.AllGatherStart(z.variable(w), z.ranks)
		z.g.SetScope(old...)
	}
}

// wait completes the gathers of layer k (starting them first if need be).
func (p *gatherPass) wait(z *gathers, k int) {
	if p.waited[k] {
		return
	}
	p.waited[k] = true
	p.layer(z, k, z.layers[k])
}

// layer starts (where not started) and waits for the gathers of ws, layer
// k's weights.
func (p *gatherPass) layer(z *gathers, k int, ws []declared) {
	if k >= 0 {
		p.begin(z, k)
	}
	for _, w := range ws {
		old := z.g.SetScope("gather", w.name)
		s, ok := p.start[w.name]
		if !ok {
			s = graph.AllGatherStart(z.variable(w), z.ranks)
		}
		x := graph.AllGatherWait(s)
		if n := w.shape.Size(); x.Shape().Size() != n {
			x = graph.Slice(x, []int{0}, []int{n})
		}
		if !x.Shape().Equal(w.shape) {
			x = graph.Reshape(x, w.shape...)
		}
		p.value[w.name] = x
		z.g.SetScope(old...)
	}
}

// recorder is the nn.Shards of a build that only lists the trainable
// weights: it declares each whole and notes its name, dtype, shape and the
// scope it was asked for in.
type recorder struct {
	g  *graph.Graph
	ws []declared
}

func (r *recorder) Weight(name string, dtype tensor.DType, shape tensor.Shape) (v, value *graph.Node) {
	if v, ok := r.g.LookupVariable(name); ok {
		return v, v
	}
	r.ws = append(r.ws, declared{name: name, dtype: dtype, shape: shape.Clone(), scope: r.g.Scope()})
	v = r.g.Param(name, dtype, shape)
	return v, v
}

// declaredWeights builds cfg's model once, at batch 1, and lists its
// trainable weights in the order it asks for them.
func declaredWeights(cfg Config) []declared {
	r := &recorder{}
	newBuilder(cfg, 1, Infer, func(g *graph.Graph) nn.Shards {
		r.g = g
		return r
	})
	return r.ws
}
