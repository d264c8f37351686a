package nn

import (
	"fmt"
	"strings"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The functional API, as Keras': layers are called on symbolic tensors to
// describe a graph of layers, which NewFunctional turns into a Model.
//
//	x := nn.NewInput("image", tensor.Shape{28, 28, 1})
//	h := nn.Apply(&nn.Conv2D{LayerName: "conv", Filters: 8, Kernel: [2]int{3, 3}, Same: true}, x)
//	y := nn.Apply(&nn.Add{LayerName: "skip"}, h, nn.Apply(conv2, h))
//	m, err := nn.NewFunctional("net", []*nn.Tensor{x}, []*nn.Tensor{y})
//
// A symbolic Tensor is a description, not a value: building the model
// (Model.Build) replays the calls in order over graph nodes. A layer called
// twice shares its weights (its weights are named after the layer), as in
// Keras; a Functional is itself a layer (MultiLayer), so models nest.

// Tensor is a symbolic value of a functional model: an input, or output
// Index of one layer call. Its Shape is one example's (no batch).
type Tensor struct {
	call  *call // nil for an input
	input *Input
	Index int
	Shape tensor.Shape
	DType tensor.DType
}

// call is one application of a layer to symbolic tensors.
type call struct {
	layer  MultiLayer
	inputs []*Tensor
	outs   []*Tensor
}

// MultiLayer is a layer of several inputs or outputs (merge layers,
// attention, recurrent layers with states, nested models). A plain Layer
// (one input, one output) is called through Apply as one too.
type MultiLayer interface {
	Name() string
	// ForwardN builds the layer over xs (batch first) and returns its
	// outputs.
	ForwardN(c *Context, xs []*graph.Node) []*graph.Node
}

// single adapts a Layer to MultiLayer.
type single struct{ Layer }

func (s single) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	if len(xs) != 1 {
		panic(&graph.Error{Op: graph.OpInput, Owner: s.Name(), Msg: fmt.Sprintf("layer %s takes one input, got %d", s.Name(), len(xs))})
	}
	return []*graph.Node{s.Forward(c, xs[0])}
}

// NewInput returns a symbolic input of one example's shape (dtype float32
// unless given), as keras.Input.
func NewInput(name string, shape tensor.Shape, dtype ...tensor.DType) *Tensor {
	in := &Input{Name: name, Shape: shape.Clone()}
	if len(dtype) > 0 {
		in.DType = dtype[0]
	}
	return &Tensor{input: in, Shape: in.Shape, DType: in.Type()}
}

// Apply calls layer l (a Layer or a MultiLayer) on symbolic inputs and
// returns its first output; ApplyN returns all of them. Shapes are checked
// when the model is built (NewFunctional builds it at batch 1), with
// errors naming the layer.
func Apply(l any, xs ...*Tensor) *Tensor { return ApplyN(l, xs...)[0] }

// ApplyN calls l on xs and returns its outputs. It panics if l is neither
// a Layer nor a MultiLayer (a programming error).
func ApplyN(l any, xs ...*Tensor) []*Tensor {
	var ml MultiLayer
	switch v := l.(type) {
	case MultiLayer:
		ml = v
	case Layer:
		ml = single{v}
	default:
		panic(fmt.Sprintf("nn: Apply of %T, which is neither a Layer nor a MultiLayer", l))
	}
	c := &call{layer: ml, inputs: xs}
	n := 1
	if o, ok := l.(interface{ NumOutputs() int }); ok {
		n = o.NumOutputs()
	}
	for i := 0; i < n; i++ {
		c.outs = append(c.outs, &Tensor{call: c, Index: i})
	}
	return c.outs
}

// Functional is a model described by a graph of layer calls from its inputs
// to its outputs (keras.Model(inputs, outputs)).
type Functional struct {
	ModelName string
	inputs    []*Tensor
	outputs   []*Tensor
	order     []*call // calls in an order where each follows its inputs
	final     map[*Tensor]bool
}

// NewFunctional returns the model from inputs to outputs. Every call on the
// way from an input to an output is part of it; a call that needs a
// symbolic input not listed is an error naming it. The model is built once
// at batch 1 to check its shapes, which fills in every Tensor's Shape.
func NewFunctional(name string, inputs, outputs []*Tensor) (*Functional, error) {
	m := &Functional{ModelName: name, inputs: inputs, outputs: outputs, final: map[*Tensor]bool{}}
	listed := map[*Input]bool{}
	for _, in := range inputs {
		if in.input == nil {
			return nil, fmt.Errorf("nn: model %s: input %d is a layer's output, not an Input", name, len(listed))
		}
		listed[in.input] = true
	}
	state := map[*call]int{} // 1: visiting, 2: done
	var visit func(t *Tensor) error
	visit = func(t *Tensor) error {
		if t.input != nil {
			if !listed[t.input] {
				return fmt.Errorf("nn: model %s needs input %q, which is not among its inputs", name, t.input.Name)
			}
			return nil
		}
		switch state[t.call] {
		case 1:
			return fmt.Errorf("nn: model %s: layer %s is part of a cycle", name, t.call.layer.Name())
		case 2:
			return nil
		}
		state[t.call] = 1
		for _, x := range t.call.inputs {
			if err := visit(x); err != nil {
				return err
			}
		}
		state[t.call] = 2
		m.order = append(m.order, t.call)
		return nil
	}
	for _, o := range outputs {
		if err := visit(o); err != nil {
			return nil, err
		}
		m.final[o] = true
	}
	// check the shapes once, and record them
	err := graph.Catch(func() {
		g := graph.New()
		c := NewContext(g, false, 0)
		var ins []*graph.Node
		for _, in := range m.Inputs() {
			ins = append(ins, g.Input(in.Name, in.Type(), append(tensor.Shape{1}, in.Shape...)))
		}
		m.build(c, ins, func(t *Tensor, n *graph.Node) { t.Shape, t.DType = n.Shape()[1:].Clone(), n.DType() })
	})
	if err != nil {
		return nil, fmt.Errorf("nn: model %s: %w", name, err)
	}
	return m, nil
}

// Name returns the model's name (it is a layer of models it is nested in).
func (m *Functional) Name() string { return m.ModelName }

// Inputs returns the model's inputs, in order.
func (m *Functional) Inputs() []Input {
	out := make([]Input, len(m.inputs))
	for i, t := range m.inputs {
		out[i] = *t.input
	}
	return out
}

// NumOutputs returns the number of outputs.
func (m *Functional) NumOutputs() int { return len(m.outputs) }

// Layers returns the layers the model calls, in call order (a layer called
// twice is listed once).
func (m *Functional) Layers() []MultiLayer {
	seen := map[MultiLayer]bool{}
	var out []MultiLayer
	for _, c := range m.order {
		if !seen[c.layer] {
			seen[c.layer] = true
			out = append(out, c.layer)
		}
	}
	return out
}

// Build replays the layer calls over inputs and returns the outputs. Each
// call's outputs are layer boundaries; a model output is not stored in 16
// bits.
func (m *Functional) Build(c *Context, inputs []*graph.Node) []*graph.Node {
	return m.build(c, inputs, nil)
}

// ForwardN builds the model as a layer of another (nested models).
func (m *Functional) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	c.G.PushScope(m.ModelName)
	defer c.G.PopScope()
	return m.build(c, xs, nil)
}

func (m *Functional) build(c *Context, inputs []*graph.Node, seen func(*Tensor, *graph.Node)) []*graph.Node {
	if len(inputs) != len(m.inputs) {
		panic(&graph.Error{Op: graph.OpInput, Owner: m.ModelName, Msg: fmt.Sprintf("model %s takes %d inputs, got %d", m.ModelName, len(m.inputs), len(inputs))})
	}
	val := map[*Tensor]*graph.Node{}
	byInput := map[*Input]*graph.Node{}
	for i, t := range m.inputs {
		byInput[t.input] = inputs[i]
	}
	get := func(t *Tensor) *graph.Node {
		if t.input != nil {
			return byInput[t.input]
		}
		return val[t]
	}
	for _, cl := range m.order {
		xs := make([]*graph.Node, len(cl.inputs))
		for i, x := range cl.inputs {
			xs[i] = get(x)
		}
		ys := cl.layer.ForwardN(c, xs)
		if len(ys) != len(cl.outs) {
			panic(&graph.Error{Op: graph.OpInput, Owner: cl.layer.Name(), Msg: fmt.Sprintf("layer %s made %d outputs, its calls expect %d (NumOutputs)", cl.layer.Name(), len(ys), len(cl.outs))})
		}
		for i, t := range cl.outs {
			val[t] = c.Boundary(cl.layer.Name(), ys[i], !m.final[t])
			if seen != nil {
				seen(t, ys[i])
			}
		}
	}
	out := make([]*graph.Node, len(m.outputs))
	for i, t := range m.outputs {
		out[i] = get(t)
	}
	return out
}

// String describes the model's calls, one per line.
func (m *Functional) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model %s\n", m.ModelName)
	for _, c := range m.order {
		fmt.Fprintf(&b, "  %s(", c.layer.Name())
		for i, x := range c.inputs {
			if i > 0 {
				b.WriteString(", ")
			}
			if x.input != nil {
				b.WriteString(x.input.Name)
			} else {
				fmt.Fprintf(&b, "%s[%d]", x.call.layer.Name(), x.Index)
			}
		}
		fmt.Fprintf(&b, ") -> %d outputs\n", len(c.outs))
	}
	return b.String()
}

// ModelFunc is a model written as a Go function over graph nodes (as a
// GoMLX model): Fn builds the outputs from the inputs, calling layers
// through the Context (Context.Call) so that recomputation and 16-bit
// storage see them.
type ModelFunc struct {
	In []Input
	Fn func(c *Context, inputs []*graph.Node) []*graph.Node
}

// Inputs returns In.
func (m *ModelFunc) Inputs() []Input { return m.In }

// Build calls Fn.
func (m *ModelFunc) Build(c *Context, inputs []*graph.Node) []*graph.Node { return m.Fn(c, inputs) }
