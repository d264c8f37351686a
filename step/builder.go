package step

import (
	"fmt"
	"math"
	"strings"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// Mode says what a step does.
type Mode uint8

// The modes.
const (
	Eval       Mode = iota // forward, the summed loss and the outputs
	Train                  // forward, backward, update
	Accumulate             // forward, backward, add the weighted gradients to the accumulators
	Apply                  // as Accumulate, then update from the accumulated sum and reset it
	Infer                  // forward and the outputs only
)

func (m Mode) String() string {
	return [...]string{"eval", "train", "accumulate", "apply", "infer"}[m]
}

// Training reports whether the mode runs the backward pass.
func (m Mode) Training() bool { return m == Train || m == Accumulate || m == Apply }

// Builder is a step being built: the graph, the model's inputs and
// outputs, and, once Minimize ran, the loss and the gradients. Its fields
// are what transforms and custom steps read.
type Builder struct {
	Config Config
	Mode   Mode
	Batch  int
	G      *graph.Graph
	Ctx    *nn.Context
	// Inputs are the model's inputs [Batch, ...], Outputs its outputs.
	Inputs  []*graph.Node
	Outputs []*graph.Node
	// Labels holds the label input of each output with a loss (nil
	// elsewhere), made by Label.
	Labels []*graph.Node
	// Loss is the batch's mean loss (Minimize's argument); Target what is
	// differentiated (the loss, scaled under float16).
	Loss   *graph.Node
	Target *graph.Node
	// Params are the trainable weights; Grads[i] is Params[i]'s gradient as
	// the transforms last handed it on (what the update reads).
	Params []*graph.Node
	Grads  []*graph.Node
	// Finite, under float16 loss scaling, is a Bool scalar: no gradient of
	// the step overflowed.
	Finite *graph.Node
	// Shards, under ZeRO stage 3, are the variables holding this process's
	// block of each trainable weight (Params[i] is then the whole weight
	// as the forward pass gathered it, Shards[i] what the update assigns).
	Shards []*graph.Node

	gathers *gathers // ZeRO stage 3's (nil otherwise)

	transforms []Transform
	outputs    []compile.Output
	names      map[string]bool
	state      map[string]any // transforms' own state, by transform name
}

// NewBuilder starts a step of mode over batch examples: it declares the
// model's inputs and builds the model. It panics with a *graph.Error when
// the model does not fit its inputs; Compile recovers it.
func NewBuilder(cfg Config, batch int, mode Mode) *Builder {
	var z *gathers
	b := newBuilder(cfg, batch, mode, func(g *graph.Graph) nn.Shards {
		if cfg.ZeroStage() < 3 {
			return nil
		}
		z = newGathers(g, cfg.Ranks, declaredWeights(cfg))
		z.fwd.begin(z, 0)
		return z
	})
	b.gathers = z
	return b
}

// newBuilder is NewBuilder with the model's trainable weights held by the
// nn.Shards shards returns for the graph (nil: none).
func newBuilder(cfg Config, batch int, mode Mode, shards func(*graph.Graph) nn.Shards) *Builder {
	var opts []graph.Option
	if cfg.Precision == MixedBFloat16 {
		// mixed_bfloat16 computes products on bfloat16 operands (float32
		// sums), as Keras' policy does on TPUs: forward, backward, eval
		opts = append(opts, graph.BF16Products())
	}
	g := graph.New(opts...)
	b := &Builder{Config: cfg, Mode: mode, Batch: batch, G: g, names: map[string]bool{}, state: map[string]any{}}
	b.Ctx = nn.NewContext(g, mode.Training(), cfg.Seed)
	if mode != Infer {
		b.Ctx.Storage = cfg.Storage()
	}
	b.Ctx.Shards = shards(g)
	for _, in := range cfg.Model.Inputs() {
		b.Inputs = append(b.Inputs, g.Input(in.Name, in.Type(), append(tensor.Shape{batch}, in.Shape...)))
	}
	b.Outputs = cfg.Model.Build(b.Ctx, b.Inputs)
	if len(b.Outputs) == 0 {
		panic(&graph.Error{Op: graph.OpInput, Msg: "the model has no outputs"})
	}
	b.Labels = make([]*graph.Node, len(b.Outputs))
	return b
}

// labelName is the name of output i's label input.
func (b *Builder) labelName(i int) string {
	if len(b.Outputs) == 1 {
		return "y"
	}
	return fmt.Sprintf("y_%d", i)
}

// Label returns the label input of output i for loss l (declaring it on
// first use): [Batch, l.LabelShape...] of l.LabelType.
func (b *Builder) Label(i int, l nn.Loss) *graph.Node {
	if b.Labels[i] == nil {
		out := b.Outputs[i]
		b.Labels[i] = b.G.Input(b.labelName(i), l.LabelType(), append(tensor.Shape{b.Batch}, l.LabelShape(out.Shape())...))
	}
	return b.Labels[i]
}

// PerExample returns the configured losses of the outputs per example
// [Batch], weighted and summed.
func (b *Builder) PerExample() *graph.Node {
	var per *graph.Node
	for _, ol := range b.Config.losses() {
		if ol.Output < 0 || ol.Output >= len(b.Outputs) {
			panic(&graph.Error{Op: graph.OpInput, Msg: fmt.Sprintf("a loss for output %d of a model with %d outputs", ol.Output, len(b.Outputs))})
		}
		y := b.Label(ol.Output, ol.Loss)
		b.G.PushScope("loss")
		l := ol.Loss.PerExample(b.Outputs[ol.Output], y)
		if w := ol.Weight; w != 0 && w != 1 {
			l = graph.MulScalar(l, w)
		}
		if per == nil {
			per = l
		} else {
			per = graph.Add(per, l)
		}
		b.G.PopScope()
	}
	return per
}

// Output asks for n's value to be readable after each step under name.
func (b *Builder) Output(name string, n *graph.Node) {
	if b.names[name] {
		panic(&graph.Error{Op: n.Op(), Owner: n.Owner(), Msg: fmt.Sprintf("output %q declared twice", name)})
	}
	b.names[name] = true
	b.outputs = append(b.outputs, compile.Output{Name: name, Node: n})
}

// outName is the program output name of model output i.
func outName(i int) string {
	if i == 0 {
		return "out"
	}
	return fmt.Sprintf("out_%d", i)
}

// Standard builds what mode does with the configured losses: in training,
// the mean loss minimized with the transforms; in evaluation, the summed
// loss and the outputs; in inference, the outputs.
func (b *Builder) Standard() {
	if b.Mode == Infer {
		for i, o := range b.Outputs {
			b.Output(outName(i), o)
		}
		return
	}
	per := b.PerExample()
	if b.Mode == Eval {
		b.Output("loss", graph.ReduceSum(per))
		for i, o := range b.Outputs {
			b.Output(outName(i), o)
		}
		return
	}
	loss := graph.ReduceMean(per)
	b.Minimize(loss)
	b.Output("loss", loss)
	for i, o := range b.Outputs {
		scores, _ := nn.Logits(o)
		b.Output(outName(i), scores)
	}
}

// Minimize builds the backward pass of loss (a float scalar: the batch's
// mean loss) and the update: every gradient goes through the transforms
// (Transforms) to the optimizer. Custom steps call it with their own loss.
func (b *Builder) Minimize(loss *graph.Node) {
	if !b.Mode.Training() {
		panic(&graph.Error{Op: loss.Op(), Owner: loss.Owner(), Msg: "Minimize in a " + b.Mode.String() + " step"})
	}
	g := b.G
	b.Loss, b.Target = loss, loss
	b.Params = b.Ctx.Trainable
	if z := b.gathers; z != nil {
		b.Shards, b.Params = b.Params, make([]*graph.Node, len(b.Params))
		for i, v := range b.Shards {
			b.Params[i] = z.fwd.value[v.Attr().Name]
		}
	}
	b.Grads = make([]*graph.Node, len(b.Params))
	b.transforms = b.Transforms()
	interleave, early := true, false
	for _, t := range b.transforms {
		if t.Begin != nil {
			t.Begin(b)
		}
		interleave = interleave && !t.NeedsAll
		early = early || t.Early
	}
	opt := autodiff.Options{Keep: b.keep(), Lower: func(n *graph.Node) *graph.Node { return b.Ctx.Low[n] }}
	if z := b.gathers; z != nil {
		opt.Refetch = z.refetch
		z.prefetch()
	}
	if interleave || early {
		// each gradient is handed on as soon as it is final: gradients never
		// all live at once (when a transform needs them all, an Early one
		// first makes each a block of this process's, which is kept)
		opt.OnGrad = func(i int, gr *graph.Node) {
			old := g.SetPhase(graph.Update)
			b.pass(0, i, gr)
			g.SetPhase(old)
		}
	}
	raw := autodiff.GradWith(b.Target, opt, b.Params...)
	old := g.SetPhase(graph.Update)
	if !interleave && !early { // clipping and overflow checks need every gradient first
		for i, gr := range raw {
			b.pass(0, i, gr)
		}
	}
	for k, t := range b.transforms {
		if t.Collect != nil {
			t.Collect(b, func(i int, gr *graph.Node) { b.pass(k+1, i, gr) })
		}
	}
	for _, t := range b.transforms {
		if t.Finish != nil {
			t.Finish(b)
		}
	}
	for _, u := range b.Ctx.Updates {
		graph.Assign(u[0], u[1])
	}
	g.SetGuard(nil)
	g.SetPhase(old)
}

// pass hands gradient gr of parameter i to the Grad hooks from transform
// k on, until one consumes it; Grads[i] is the last value handed on.
func (b *Builder) pass(k, i int, gr *graph.Node) {
	for _, t := range b.transforms[k:] {
		b.Grads[i] = gr
		if t.Grad == nil {
			continue
		}
		if gr = t.Grad(b, i, gr); gr == nil {
			return
		}
	}
	b.Grads[i] = gr
}

// keep returns the recomputation policy: nil (keep every activation), or,
// with Remat, keep only every ⌈√L⌉-th of the L layer boundaries and
// recompute the rest in the backward pass.
func (b *Builder) keep() func(*graph.Node) bool {
	if !b.Config.Remat {
		return nil
	}
	bs := b.Ctx.Boundaries
	every := int(math.Ceil(math.Sqrt(float64(len(bs)))))
	kept := map[*graph.Node]bool{}
	for i, o := range bs {
		if (i+1)%every == 0 {
			kept[o] = true
		}
	}
	return func(n *graph.Node) bool { return kept[n] }
}

// Options returns the compile options of the step built so far; under
// float16 loss scaling the overflow flag is the last output, "finite".
func (b *Builder) Options() compile.Options {
	grads := append([]*graph.Node(nil), b.Grads...)
	outs := b.outputs
	if b.Finite != nil && !b.names["finite"] {
		outs = append(outs[:len(outs):len(outs)], compile.Output{Name: "finite", Node: b.Finite})
	}
	name := b.Mode.String()
	if b.Mode.Training() {
		name = "train"
	}
	return compile.Options{Name: name, Target: b.Config.Target, Grads: grads, Outputs: outs}
}

// Describe names the step's transforms in order, one line each.
func (b *Builder) Describe() string {
	var s strings.Builder
	for _, t := range b.Transforms() {
		fmt.Fprintf(&s, "%s: %s\n", t.Name, t.Doc)
	}
	return s.String()
}

// Compile builds a step of mode over batch examples with build (Standard,
// or a custom step that declares its loss, calls Minimize and its
// Outputs) and compiles it for cfg.Target. A model or loss that does not
// fit its inputs is an error naming the op and shapes, not a panic.
func Compile(cfg Config, batch int, mode Mode, build func(b *Builder)) (*compile.Program, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return compile.Build(func() (*graph.Graph, compile.Options) {
		b := NewBuilder(cfg, batch, mode)
		build(b)
		return b.G, b.Options()
	})
}

// Graph returns the builder of a standard step of mode, for compile.Build.
func Graph(cfg Config, batch int, mode Mode) func() (*graph.Graph, compile.Options) {
	return func() (*graph.Graph, compile.Options) {
		b := NewBuilder(cfg, batch, mode)
		b.Standard()
		return b.G, b.Options()
	}
}

// OutputSpec describes one output of a model as a step sees it: its shape
// per example, the loss that trains it (nil: none) and the label that loss
// needs per example.
type OutputSpec struct {
	Index      int
	Shape      tensor.Shape // one example's output
	Loss       nn.Loss
	LabelType  tensor.DType
	LabelShape tensor.Shape
	// Sigmoid and Softmax: the output ends in that activation (a loss
	// reads the logits before it; the output itself is probabilities).
	Sigmoid, Softmax bool
}

// ModelSpec describes a step's model without compiling it: its outputs
// (with the loss each trains) and the variables it declares (with their
// initializers).
type ModelSpec struct {
	Outputs []OutputSpec
	Weights []WeightSpec
}

// WeightSpec is one variable a model declares: its name, dtype, shape (of
// the whole variable, independent of the batch) and initializer; whether
// the optimizer trains it, and whether, under ZeRO stage 3, each process
// holds a block of it only (BlockSize elements: the variable a step
// declares is then that block).
type WeightSpec struct {
	Name      string
	DType     tensor.DType
	Shape     tensor.Shape
	Init      nn.Initializer
	Trainable bool
	Sharded   bool
}

// Describe builds cfg's model once, at batch 1, and describes its outputs
// and variables, so a caller can check its data against what the losses
// need, and draw or check its weights, before step 1. A model that does
// not fit its inputs is an error naming the op.
func Describe(cfg Config) (*ModelSpec, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	m := &ModelSpec{}
	err := graph.Catch(func() {
		var rec *recorder // stage 3: the weights are declared whole, and noted
		b := newBuilder(cfg, 1, Infer, func(g *graph.Graph) nn.Shards {
			if cfg.ZeroStage() < 3 {
				return nil
			}
			rec = &recorder{g: g}
			return rec
		})
		for i, o := range b.Outputs {
			m.Outputs = append(m.Outputs, OutputSpec{Index: i, Shape: o.Shape()[1:].Clone(),
				Sigmoid: o.Op() == graph.OpSigmoid, Softmax: o.Op() == graph.OpSoftmax})
		}
		for _, ol := range cfg.losses() {
			if ol.Output < 0 || ol.Output >= len(m.Outputs) {
				panic(&graph.Error{Op: graph.OpInput, Msg: fmt.Sprintf("a loss for output %d of a model with %d outputs", ol.Output, len(m.Outputs))})
			}
			s := &m.Outputs[ol.Output]
			s.Loss, s.LabelType = ol.Loss, ol.Loss.LabelType()
			s.LabelShape = ol.Loss.LabelShape(b.Outputs[ol.Output].Shape())
		}
		trainable := map[*graph.Node]bool{}
		for _, w := range b.Ctx.Trainable {
			trainable[w] = true
		}
		sharded := map[string]bool{}
		if rec != nil {
			for _, w := range rec.ws {
				sharded[w.name] = true
			}
		}
		for _, w := range b.Ctx.Weights {
			name := w.Attr().Name
			m.Weights = append(m.Weights, WeightSpec{Name: name, DType: w.DType(), Shape: w.Shape().Clone(), Init: b.Ctx.Init[name],
				Trainable: trainable[w], Sharded: sharded[name]})
		}
	})
	return m, err
}
