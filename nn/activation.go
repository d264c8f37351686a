package nn

import (
	"fmt"
	"math"

	"github.com/headroom-ml/headroom/graph"
)

// Activations lists the activation names Activate accepts, in the order
// they were registered: "linear", the core ones here, then those of
// activations2.go.
var Activations []string

// activations maps an activation name to what it builds: one table, filled
// by registerActivation from the file of each activation's family.
var activations = map[string]func(x *graph.Node) *graph.Node{}

// registerActivation makes Activate build name with f and lists it in
// Activations. A name registered twice is a programming error.
func registerActivation(name string, f func(x *graph.Node) *graph.Node) {
	if _, ok := activations[name]; ok {
		panic("nn: activation " + name + " registered twice")
	}
	activations[name] = f
	Activations = append(Activations, name)
}

// The core activations. gelu is the exact form x·Φ(x) = x/2·(1 +
// erf(x/√2)), Keras' default (approximate=False).
func init() {
	registerActivation("linear", func(x *graph.Node) *graph.Node { return x })
	registerActivation("relu", func(x *graph.Node) *graph.Node { return graph.Relu(x) })
	registerActivation("gelu", func(x *graph.Node) *graph.Node {
		half := graph.MulScalar(x, 0.5)
		return graph.Mul(half, graph.AddScalar(graph.Erf(graph.MulScalar(x, 1/math.Sqrt2)), 1))
	})
	registerActivation("sigmoid", func(x *graph.Node) *graph.Node { return graph.Sigmoid(x) })
	registerActivation("tanh", func(x *graph.Node) *graph.Node { return graph.Tanh(x) })
	registerActivation("softmax", func(x *graph.Node) *graph.Node { return graph.Softmax(x) })
}

// Activate returns x passed through the named activation ("" or "linear" is
// the identity), one of Activations.
func Activate(name string, x *graph.Node) (*graph.Node, error) {
	if name == "" {
		return x, nil
	}
	if f, ok := activations[name]; ok {
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
