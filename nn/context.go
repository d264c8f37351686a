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
	// Boundaries lists each layer's output in the order layers were
	// called (Call, Boundary), for every kind of model: the natural
	// checkpoints for recomputation.
	Boundaries []*graph.Node
	// Storage, when Float16 or BFloat16, is the mixed-precision policy:
	// each layer's output but a model output is kept as a 16-bit copy that
	// later layers read through an up-cast; Low maps a float32 value to its
	// 16-bit copy, for the backward pass to read instead of the value.
	Storage tensor.DType
	Low     map[*graph.Node]*graph.Node
	// Shards, when set, holds the trainable weights sharded over the
	// processes of a data-parallel run (ZeRO stage 3, package step): Weight
	// asks it for every trainable weight, and the variable it returns (this
	// process's block, declared on the first call) is what Weights and
	// Trainable list, while layers read the value it returns (the whole
	// weight, gathered from the processes).
	Shards  Shards
	sharded map[string]bool // names of the weights Shards declared
}

// Shards declares and reads trainable weights sharded over processes.
type Shards interface {
	// Weight returns the variable that holds this process's block of the
	// weight name (declaring it on the first call) and the value a layer
	// reads: the whole weight [shape].
	Weight(name string, dtype tensor.DType, shape tensor.Shape) (v, value *graph.Node)
}

// Call builds layer l over x and records its output as a layer boundary
// (see Boundary); it returns what later layers read. Models call their
// layers through it, so that recomputation and 16-bit storage reach every
// layer of any graph, not only a stack.
func (c *Context) Call(l Layer, x *graph.Node) *graph.Node {
	return c.Boundary(l.Name(), l.Forward(c, x), true)
}

// Boundary records out, the output of the layer named name, as a layer
// boundary: a value recomputation may keep while it recomputes the rest.
// When store is set and Storage is a 16-bit type, a float32 out is kept for
// the backward pass as a 16-bit copy, and what later layers read (the
// value returned) is its up-cast, as Keras' mixed precision policies
// compute; a model's outputs (the logits) are recorded with store unset
// and stay float32.
func (c *Context) Boundary(name string, out *graph.Node, store bool) *graph.Node {
	c.Boundaries = append(c.Boundaries, out)
	low := c.Storage
	if !store || (low != tensor.BFloat16 && low != tensor.Float16) || out.DType() != tensor.Float32 {
		return out
	}
	c.G.PushScope(name)
	defer c.G.PopScope()
	xs := graph.Cast(out, low)
	if c.Low == nil {
		c.Low = map[*graph.Node]*graph.Node{}
	}
	c.Low[out] = xs
	return graph.Cast(xs, tensor.Float32)
}

// NewContext returns a context for building into g.
func NewContext(g *graph.Graph, training bool, seed uint64) *Context {
	return &Context{G: g, Training: training, Seed: seed, DType: tensor.Float32, Init: map[string]Initializer{}}
}

// Weight declares (or returns, if this graph has it already) the variable
// name with the given shape and initializer. With Shards set, a trainable
// weight is declared and read through it.
func (c *Context) Weight(name string, shape tensor.Shape, init Initializer, trainable bool) *graph.Node {
	if c.Shards != nil && (trainable || c.sharded[name]) {
		v, x := c.Shards.Weight(name, c.DType, shape)
		if !c.sharded[name] {
			if c.sharded == nil {
				c.sharded = map[string]bool{}
			}
			c.sharded[name] = true
			c.Init[name] = init
			c.Weights = append(c.Weights, v)
			c.Trainable = append(c.Trainable, v)
		}
		return x
	}
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
