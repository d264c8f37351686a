package nn

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Sequential is a stack of layers, as keras.Sequential.
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

// Forward builds every layer over x [batch, InputShape...].
func (m *Sequential) Forward(c *Context, x *graph.Node) *graph.Node {
	for i, l := range m.Layers {
		x = l.Forward(c, x)
		c.Outputs = append(c.Outputs, x)
		if low := c.Storage; (low == tensor.BFloat16 || low == tensor.Float16) && i < len(m.Layers)-1 && x.DType() == tensor.Float32 {
			// mixed precision: the layer's output is stored in 16 bits; the
			// logits (the last layer's output) stay float32 for the loss.
			c.G.PushScope(l.Name())
			xs := graph.Cast(x, low)
			if c.Low == nil {
				c.Low = map[*graph.Node]*graph.Node{}
			}
			c.Low[x] = xs
			x = graph.Cast(xs, tensor.Float32)
			c.G.PopScope()
		}
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
	return fmt.Sprintf("%T", l)
}
