package nn

import (
	"fmt"
	"math"

	"github.com/headroom-ml/headroom/graph"
)

// Activations lists the activation names Activate accepts.
var Activations = []string{"linear", "relu", "gelu", "sigmoid", "tanh", "softmax"}

// Activate returns x passed through the named activation ("" or "linear" is
// the identity). gelu is the exact form x·Φ(x) = x/2·(1 + erf(x/√2)), Keras'
// default (approximate=False).
func Activate(name string, x *graph.Node) (*graph.Node, error) {
	switch name {
	case "", "linear":
		return x, nil
	case "relu":
		return graph.Relu(x), nil
	case "gelu":
		half := graph.MulScalar(x, 0.5)
		return graph.Mul(half, graph.AddScalar(graph.Erf(graph.MulScalar(x, 1/math.Sqrt2)), 1)), nil
	case "sigmoid":
		return graph.Sigmoid(x), nil
	case "tanh":
		return graph.Tanh(x), nil
	case "softmax":
		return graph.Softmax(x), nil
	}
	if f, ok := moreActivations[name]; ok {
		return f(x), nil
	}
	return nil, fmt.Errorf("nn: unknown activation %q (known: %v)", name, Activations)
}

// mustApply is Activate for layers whose activation was validated when the
// layer was made.
func mustApply(name string, x *graph.Node) *graph.Node {
	y, err := Activate(name, x)
	if err != nil {
		panic(&graph.Error{Op: graph.OpInvalid, Owner: x.Owner(), Msg: err.Error()})
	}
	return y
}

// Activation is a layer that applies an activation.
type Activation struct {
	LayerName string
	Fn        string
}

func (a *Activation) Name() string { return a.LayerName }

func (a *Activation) Forward(c *Context, x *graph.Node) *graph.Node {
	c.G.PushScope(a.LayerName)
	defer c.G.PopScope()
	return mustApply(a.Fn, x)
}
