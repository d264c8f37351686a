package nn

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Context carries what layers need while a model is built into a graph.
type Context struct {
	G        *graph.Graph
	Training bool        // training mode: dropout active, batch statistics
	Step     *graph.Node // int64 scalar input: the global step (dropout masks)
	Seed     uint64      // the model's seed (dropout masks)
	DType    tensor.DType

	// Trainable lists the weights the optimizer updates, in build order;
	// Weights lists every variable the model declared (trainable or not).
	Trainable []*graph.Node
	Weights   []*graph.Node
	// Init maps a variable name to its initializer.
	Init map[string]Initializer
	// Updates are assignments a training step must make besides the
	// optimizer's (BatchNormalization's moving statistics): variable, value.
	Updates [][2]*graph.Node
	// Outputs lists each layer's output in order (Sequential.Forward
	// records them): the natural checkpoints for rematerialization.
	Outputs []*graph.Node
	// Storage, when Float16 or BFloat16, is the mixed-precision policy:
	// each layer's output but the last is kept as a 16-bit copy that the
	// next layer reads through an up-cast; Low maps a float32 value to its
	// 16-bit copy, for the backward pass to read instead of the value.
	Storage tensor.DType
	Low     map[*graph.Node]*graph.Node
}

// NewContext returns a context for building into g.
func NewContext(g *graph.Graph, training bool, seed uint64) *Context {
	return &Context{G: g, Training: training, Seed: seed, DType: tensor.Float32, Init: map[string]Initializer{}}
}

// Weight declares (or returns, if this graph has it already) the variable
// name with the given shape and initializer.
func (c *Context) Weight(name string, shape tensor.Shape, init Initializer, trainable bool) *graph.Node {
	if v, ok := c.G.LookupVariable(name); ok {
		return v
	}
	v := c.G.Param(name, c.DType, shape)
	c.Init[name] = init
	c.Weights = append(c.Weights, v)
	if trainable {
		c.Trainable = append(c.Trainable, v)
	}
	return v
}

// StepNode returns the int64 step input, declaring it on first use.
func (c *Context) StepNode() *graph.Node {
	if c.Step == nil {
		if n, ok := c.G.LookupInput("step"); ok {
			c.Step = n
		} else {
			c.Step = c.G.Input("step", tensor.Int64, nil)
		}
	}
	return c.Step
}
