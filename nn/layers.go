package nn

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Layer is one stage of a Sequential model.
type Layer interface {
	// Name is the layer's unique name in its model; it prefixes its weights.
	Name() string
	// Forward builds the layer over x (batch first) and returns its output.
	Forward(c *Context, x *graph.Node) *graph.Node
}

func scoped(c *Context, name string) func() {
	c.G.PushScope(name)
	return c.G.PopScope
}

// Dense is a fully connected layer: x [.., in] -> act(x·kernel + bias) [.., Units].
type Dense struct {
	LayerName  string
	Units      int
	Activation string
	NoBias     bool
	KernelInit Initializer // nil: GlorotUniform
	BiasInit   Initializer // nil: zeros
}

func (d *Dense) Name() string { return d.LayerName }

func (d *Dense) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, d.LayerName)()
	in := x.Shape()[x.Shape().Rank()-1]
	k := c.Weight(d.LayerName+"/kernel", tensor.Shape{in, d.Units}, orDefault(d.KernelInit, GlorotUniform{}), true)
	y := graph.MatMul(x, k)
	if !d.NoBias {
		y = graph.Add(y, c.Weight(d.LayerName+"/bias", tensor.Shape{d.Units}, orDefault(d.BiasInit, Constant{0}), true))
	}
	return mustApply(d.Activation, y)
}

func orDefault(i, def Initializer) Initializer {
	if i == nil {
		return def
	}
	return i
}

// Conv2D convolves NHWC input with Filters kernels of size Kernel:
// [N, H, W, C] -> [N, OH, OW, Filters]. With Groups > 1 the channels split
// into Groups independent convolutions (kernel [KH, KW, C/Groups,
// Filters]); DilationRate spaces the kernel's taps (Keras allows it or
// Strides above 1, not both).
type Conv2D struct {
	LayerName    string
	Filters      int
	Kernel       [2]int
	Strides      [2]int // zero: 1, 1
	Same         bool   // "same" padding; default "valid"
	Activation   string
	NoBias       bool
	KernelInit   Initializer
	DilationRate [2]int // zero: 1, 1
	Groups       int    // zero: 1
}

func (l *Conv2D) Name() string { return l.LayerName }

func (l *Conv2D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	if x.Shape().Rank() != 4 {
		panic(&graph.Error{Op: graph.OpConv2D, Owner: l.LayerName, Msg: fmt.Sprintf("Conv2D needs NHWC input, got %v", x.Shape())})
	}
	cin := x.Shape()[3]
	groups := max(l.Groups, 1)
	k := c.Weight(l.LayerName+"/kernel", tensor.Shape{l.Kernel[0], l.Kernel[1], cin / groups, l.Filters}, orDefault(l.KernelInit, GlorotUniform{}), true)
	var y *graph.Node
	if groups > 1 || ones(l.DilationRate) != [2]int{1, 1} {
		y = graph.Conv2DWith(x, k, graph.ConvOptions{Strides: l.Strides, Dilation: l.DilationRate, Groups: groups, Same: l.Same})
	} else {
		y = graph.Conv2D(x, k, ones(l.Strides), l.Same)
	}
	if !l.NoBias {
		y = graph.Add(y, c.Weight(l.LayerName+"/bias", tensor.Shape{l.Filters}, Constant{0}, true))
	}
	return mustApply(l.Activation, y)
}

func ones(s [2]int) [2]int {
	if s[0] == 0 && s[1] == 0 {
		return [2]int{1, 1}
	}
	return s
}

// Pool2D is MaxPooling2D or AveragePooling2D. Strides default to the pool size.
type Pool2D struct {
	LayerName string
	Max       bool
	Pool      [2]int
	Strides   [2]int
	Same      bool
}

func (p *Pool2D) Name() string { return p.LayerName }

func (p *Pool2D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, p.LayerName)()
	st := p.Strides
	if st == [2]int{} {
		st = p.Pool
	}
	if p.Max {
		return graph.MaxPool2D(x, p.Pool, st, p.Same)
	}
	return graph.AvgPool2D(x, p.Pool, st, p.Same)
}

// GlobalAveragePooling2D averages NHWC input over H and W: -> [N, C], or
// [N, 1, 1, C] with KeepDims (Keras' keepdims).
type GlobalAveragePooling2D struct {
	LayerName string
	KeepDims  bool
}

func (p *GlobalAveragePooling2D) Name() string { return p.LayerName }

func (p *GlobalAveragePooling2D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, p.LayerName)()
	if p.KeepDims {
		return graph.ReduceMeanKeep(x, 1, 2)
	}
	return graph.ReduceMean(x, 1, 2)
}

// Flatten reshapes [N, ...] to [N, prod(...)].
type Flatten struct{ LayerName string }

func (f *Flatten) Name() string { return f.LayerName }

func (f *Flatten) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, f.LayerName)()
	return graph.Reshape(x, x.Shape()[0], -1)
}

// Dropout zeroes a Rate fraction of its input in training (scaling the rest
// by 1/(1-Rate)) and passes it through in inference. NoiseShape is Keras'
// noise_shape, the batch first, 0 for "the input's size" (Keras' None):
// one draw is shared along each axis of size 1, so (0, 1, 1, 1) keeps or
// drops each example of NHWC input whole (EfficientNet's blocks); nil
// draws one per element.
type Dropout struct {
	LayerName  string
	Rate       float64
	NoiseShape []int
}

func (d *Dropout) Name() string { return d.LayerName }

func (d *Dropout) Forward(c *Context, x *graph.Node) *graph.Node {
	if !c.Training || d.Rate == 0 {
		return x
	}
	defer scoped(c, d.LayerName)()
	seed := c.Seed ^ hashName(d.LayerName)
	shape := x.Shape()
	if d.NoiseShape != nil {
		shape = noiseShape(d.LayerName, d.NoiseShape, x.Shape())
	}
	return graph.Mul(x, graph.DropoutMask(c.StepNode(), shape, x.DType(), d.Rate, seed))
}

// noiseShape resolves a Keras noise_shape against the input's shape x:
// 0 takes x's size; every other size must be 1 or x's.
func noiseShape(layer string, ns []int, x tensor.Shape) tensor.Shape {
	if len(ns) != x.Rank() {
		throwf(graph.OpDropoutMask, layer, "noise shape %v has rank %d, the input %v rank %d", ns, len(ns), x, x.Rank())
	}
	out := make(tensor.Shape, len(ns))
	for i, n := range ns {
		switch n {
		case 0, x[i]:
			out[i] = x[i]
		case 1:
			out[i] = 1
		default:
			throwf(graph.OpDropoutMask, layer, "noise shape %v does not broadcast to the input %v", ns, x)
		}
	}
	return out
}

func hashName(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Embedding maps int32 indices [...] to rows of a [InputDim, OutputDim]
// table: -> [..., OutputDim].
type Embedding struct {
	LayerName           string
	InputDim, OutputDim int
	Init                Initializer // nil: uniform(-0.05, 0.05), Keras' default
}

func (e *Embedding) Name() string { return e.LayerName }

func (e *Embedding) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, e.LayerName)()
	t := c.Weight(e.LayerName+"/embeddings", tensor.Shape{e.InputDim, e.OutputDim}, orDefault(e.Init, Uniform{-0.05, 0.05}), true)
	if x.DType() != tensor.Int32 {
		x = graph.Cast(x, tensor.Int32)
	}
	return graph.Gather(t, x)
}
