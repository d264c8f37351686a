package nn

import (
	"fmt"
	"strings"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Input is one named input of a model: one example's shape and dtype.
type Input struct {
	Name  string
	Shape tensor.Shape // one example's shape (without the batch dimension)
	DType tensor.DType // zero: float32
}

// Type returns the input's dtype (float32 when unset).
func (in Input) Type() tensor.DType {
	if in.DType == tensor.Invalid {
		return tensor.Float32
	}
	return in.DType
}

// Model is anything that builds a graph from named inputs: a Sequential
// stack, a functional graph of layers, or a user's own Go code. Training,
// planning and inference (package step) need nothing else of it.
//
// Build must call its layers through the Context (Context.Call, or
// Context.Boundary for code that is not a Layer), so that recomputation
// and 16-bit storage of saved activations reach every layer, and must
// declare its weights with Context.Weight. Building the same model into
// several graphs (training, evaluation, a smaller last batch) declares the
// same weight names, so programs loaded on one engine share the weights.
type Model interface {
	// Inputs declares the model's inputs, in the order Build takes them.
	Inputs() []Input
	// Build builds the model over inputs (batch first, in Inputs' order)
	// and returns its outputs. It panics with a *graph.Error for a shape
	// mismatch; graph.Catch turns that into an error.
	Build(c *Context, inputs []*graph.Node) []*graph.Node
}

// Sequential is a stack of layers, as keras.Sequential: a Model with one
// input, named "x", and one output.
type Sequential struct {
	Name       string
	InputShape tensor.Shape // one example's shape, e.g. [28, 28, 1]
	InputDType tensor.DType // zero: float32 (set int32 for token ids; Embedding casts float input)
	Layers     []Layer
}

// InputType returns the model's input dtype.
func (m *Sequential) InputType() tensor.DType {
	if m.InputDType == tensor.Invalid {
		return tensor.Float32
	}
	return m.InputDType
}

// Inputs returns the model's one input, "x".
func (m *Sequential) Inputs() []Input {
	return []Input{{Name: "x", Shape: m.InputShape, DType: m.InputType()}}
}

// Build builds every layer over inputs[0] and returns the last one's
// output.
func (m *Sequential) Build(c *Context, inputs []*graph.Node) []*graph.Node {
	if len(inputs) != 1 {
		panic(&graph.Error{Op: graph.OpInput, Owner: m.Name, Msg: fmt.Sprintf("a Sequential model takes one input, got %d", len(inputs))})
	}
	return []*graph.Node{m.Forward(c, inputs[0])}
}

// Forward builds every layer over x [batch, InputShape...], recording each
// layer's output as a boundary; the last one (the logits) is not stored in
// 16 bits.
func (m *Sequential) Forward(c *Context, x *graph.Node) *graph.Node {
	for i, l := range m.Layers {
		x = c.Boundary(l.Name(), l.Forward(c, x), i < len(m.Layers)-1)
	}
	return x
}

// Logits returns the node a loss should read from: the input of a final
// softmax or sigmoid (so the loss can use its stable fused form), or out
// itself, and whether out was such an activation.
func Logits(out *graph.Node) (*graph.Node, bool) {
	if op := out.Op(); op == graph.OpSoftmax || op == graph.OpSigmoid {
		return out.Inputs()[0], true
	}
	return out, false
}

// LayerInfo is one line of a model summary.
type LayerInfo struct {
	Name   string
	Type   string
	Output tensor.Shape // without the batch dimension
	Params int
}

// Summary builds the model at batch 1 and returns each layer's output shape
// and parameter count (trainable and not, as Keras counts "Total params").
// It returns an error, not a panic, for a model that does not fit its input.
func (m *Sequential) Summary() (infos []LayerInfo, total int, err error) {
	err = graph.Catch(func() {
		g := graph.New()
		c := NewContext(g, false, 0)
		x := g.Input("x", m.InputType(), append(tensor.Shape{1}, m.InputShape...))
		for _, l := range m.Layers {
			before := len(c.Weights)
			x = l.Forward(c, x)
			n := 0
			for _, w := range c.Weights[before:] {
				n += w.Shape().Size()
			}
			infos = append(infos, LayerInfo{Name: l.Name(), Type: typeName(l), Output: x.Shape()[1:], Params: n})
			total += n
		}
	})
	return infos, total, err
}

func typeName(l Layer) string {
	switch v := l.(type) {
	case *Dense:
		return "Dense"
	case *Conv2D:
		return "Conv2D"
	case *Pool2D:
		if v.Max {
			return "MaxPooling2D"
		}
		return "AveragePooling2D"
	case *GlobalAveragePooling2D:
		return "GlobalAveragePooling2D"
	case *Flatten:
		return "Flatten"
	case *Dropout:
		return "Dropout"
	case *BatchNormalization:
		return "BatchNormalization"
	case *LayerNormalization:
		return "LayerNormalization"
	case *Embedding:
		return "Embedding"
	case *Activation:
		return "Activation"
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", l), "*nn.") // the layers named as Keras' classes
}

// Params builds m at batch 1 and counts its weights' elements: every
// weight (Keras' "Total params") and the trainable ones. It returns an
// error, not a panic, for a model that does not fit its inputs.
func Params(m Model) (total, trainable int, err error) {
	err = graph.Catch(func() {
		g := graph.New()
		c := NewContext(g, false, 0)
		var ins []*graph.Node
		for _, in := range m.Inputs() {
			ins = append(ins, g.Input(in.Name, in.Type(), append(tensor.Shape{1}, in.Shape...)))
		}
		m.Build(c, ins)
		for _, w := range c.Weights {
			total += w.Shape().Size()
		}
		for _, w := range c.Trainable {
			trainable += w.Shape().Size()
		}
	})
	return total, trainable, err
}
