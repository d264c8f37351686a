package keras

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
)

// frozen is a layer marked trainable=false in the file: its weights are
// declared but not trained (they are left out of Context.Trainable, so no
// gradient or optimizer state is planned for them), and a frozen
// BatchNormalization runs in inference mode (its moving statistics, not
// the batch's, and no updates), as in TensorFlow 2 and Keras 3.
type frozen struct {
	inner     any // nn.Layer or nn.MultiLayer
	inference bool
}

// freeze returns l (of Keras class class) frozen.
func freeze(l any, class string) any {
	return &frozen{inner: l, inference: class == "BatchNormalization"}
}

func (f *frozen) Name() string {
	switch l := f.inner.(type) {
	case nn.MultiLayer:
		return l.Name()
	case nn.Layer:
		return l.Name()
	}
	return ""
}

// NumOutputs is the inner layer's.
func (f *frozen) NumOutputs() int {
	if o, ok := f.inner.(interface{ NumOutputs() int }); ok {
		return o.NumOutputs()
	}
	return 1
}

func (f *frozen) ForwardN(c *nn.Context, xs []*graph.Node) []*graph.Node {
	n, training := len(c.Trainable), c.Training
	if f.inference {
		c.Training = false
	}
	defer func() { c.Trainable, c.Training = c.Trainable[:n], training }()
	switch l := f.inner.(type) {
	case nn.MultiLayer:
		return l.ForwardN(c, xs)
	case nn.Layer:
		if len(xs) != 1 {
			panic(&graph.Error{Op: graph.OpInput, Owner: l.Name(), Msg: "a one-input layer called on several tensors"})
		}
		return []*graph.Node{l.Forward(c, xs[0])}
	}
	panic(&graph.Error{Op: graph.OpInput, Msg: "keras: a frozen layer that is not a layer"})
}

func (f *frozen) Forward(c *nn.Context, x *graph.Node) *graph.Node {
	return f.ForwardN(c, []*graph.Node{x})[0]
}

var (
	_ nn.Layer      = (*frozen)(nil)
	_ nn.MultiLayer = (*frozen)(nil)
)
