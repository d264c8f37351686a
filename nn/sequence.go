package nn

import (
	"fmt"
	"math"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Layers over sequences [B, T, C] (Keras' channels_last): positional
// embeddings, 1-D convolution and pooling, and TimeDistributed.

// PositionEmbedding is keras_hub's PositionEmbedding: a learned table
// embeddings [SequenceLength, C] whose first T rows are the positions of
// an input [B, T, C]. Keras returns them broadcast to the input's shape
// (to be added by the model); with Add the layer returns input + positions
// itself, without materializing the broadcast (what the reference gpt
// does, as GPT-2's token and position embeddings).
type PositionEmbedding struct {
	LayerName      string
	SequenceLength int
	Add            bool
	Init           Initializer // nil: glorot_uniform (keras_hub's default)
}

func (l *PositionEmbedding) Name() string { return l.LayerName }

func (l *PositionEmbedding) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	s := x.Shape()
	if s.Rank() != 3 || s[1] > l.SequenceLength {
		panic(&graph.Error{Op: graph.OpAdd, Owner: l.LayerName, Msg: fmt.Sprintf("needs [batch, time <= %d, features] input, got %v", l.SequenceLength, s)})
	}
	e := c.Weight(l.LayerName+"/embeddings", tensor.Shape{l.SequenceLength, s[2]}, orDefault(l.Init, GlorotUniform{}), true)
	if s[1] < l.SequenceLength {
		e = graph.Slice(e, []int{0, 0}, []int{s[1], s[2]})
	}
	if l.Add {
		return graph.Add(x, e)
	}
	return graph.BroadcastTo(e, s...)
}

// SinePositionEncoding is keras_hub's SinePositionEncoding (Vaswani et al.
// 2017, §3.5): for position p and feature i of an input [B, T, C],
// sin(p·w_i) for even i and cos(p·w_i) for odd i, w_i =
// MaxWavelength^(-2⌊i/2⌋/C) (MaxWavelength 0: 10000). It has no weights;
// as PositionEmbedding it returns the encodings broadcast to the input's
// shape, or input + encodings with Add.
type SinePositionEncoding struct {
	LayerName     string
	MaxWavelength float64
	Add           bool
}

func (l *SinePositionEncoding) Name() string { return l.LayerName }

func (l *SinePositionEncoding) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	s := x.Shape()
	if s.Rank() != 3 || !x.DType().IsFloat() {
		panic(&graph.Error{Op: graph.OpAdd, Owner: l.LayerName, Msg: fmt.Sprintf("needs float [batch, time, features] input, got %s%v", x.DType(), s)})
	}
	e := graph.Cast(c.G.Constant(SineEncodings(s[1], s[2], l.MaxWavelength)), x.DType())
	if l.Add {
		return graph.Add(x, e)
	}
	return graph.BroadcastTo(e, s...)
}

// SineEncodings returns the float64 [T, C] encodings of
// SinePositionEncoding.
func SineEncodings(T, C int, maxWavelength float64) tensor.Tensor {
	if maxWavelength == 0 {
		maxWavelength = 10000
	}
	e := tensor.New(tensor.Float64, tensor.Shape{T, C})
	v := e.Float64s()
	for p := 0; p < T; p++ {
		for i := 0; i < C; i++ {
			w := math.Pow(1/maxWavelength, float64(2*(i/2))/float64(C))
			if i%2 == 0 {
				v[p*C+i] = math.Sin(float64(p) * w)
			} else {
				v[p*C+i] = math.Cos(float64(p) * w)
			}
		}
	}
	return e
}

// Conv1D is Keras' Conv1D over [B, T, C]: kernel [KernelSize, C, Filters],
// bias [Filters], Padding "valid" (the default), "same" or "causal" (zeros
// before the sequence, so output t sees inputs <= t), as Conv2D over
// [B, 1, T, C]. Dilation other than 1 is not supported.
type Conv1D struct {
	LayerName  string
	Filters    int
	KernelSize int
	Strides    int    // 0: 1
	Padding    string // "valid", "same" or "causal"
	Activation string
	NoBias     bool
	KernelInit Initializer
}

func (l *Conv1D) Name() string { return l.LayerName }

func (l *Conv1D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	s := x.Shape()
	if s.Rank() != 3 {
		panic(&graph.Error{Op: graph.OpConv2D, Owner: l.LayerName, Msg: fmt.Sprintf("Conv1D needs [batch, time, channels] input, got %v", s)})
	}
	stride := max(l.Strides, 1)
	same := false
	switch l.Padding {
	case "", "valid":
	case "same":
		same = true
	case "causal":
		if l.KernelSize > 1 {
			x = graph.Concat(1, graph.BroadcastTo(graph.ScalarLike(x, 0), s[0], l.KernelSize-1, s[2]), x)
		}
	default:
		panic(&graph.Error{Op: graph.OpConv2D, Owner: l.LayerName, Msg: fmt.Sprintf("unknown padding %q (valid, same, causal)", l.Padding)})
	}
	k := c.Weight(l.LayerName+"/kernel", tensor.Shape{l.KernelSize, s[2], l.Filters}, orDefault(l.KernelInit, GlorotUniform{}), true)
	xs := x.Shape()
	y := graph.Conv2D(graph.Reshape(x, xs[0], 1, xs[1], xs[2]), graph.Reshape(k, 1, l.KernelSize, s[2], l.Filters), [2]int{1, stride}, same)
	y = graph.Reshape(y, xs[0], y.Shape()[2], l.Filters)
	if !l.NoBias {
		y = graph.Add(y, c.Weight(l.LayerName+"/bias", tensor.Shape{l.Filters}, Constant{0}, true))
	}
	return mustApply(l.Activation, y)
}

// Pool1D is Keras' MaxPooling1D or AveragePooling1D over [B, T, C]
// (Strides 0: PoolSize; Same: "same" padding).
type Pool1D struct {
	LayerName string
	Max       bool
	PoolSize  int
	Strides   int
	Same      bool
}

func (l *Pool1D) Name() string { return l.LayerName }

func (l *Pool1D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	s := x.Shape()
	if s.Rank() != 3 {
		panic(&graph.Error{Op: graph.OpMaxPool2D, Owner: l.LayerName, Msg: fmt.Sprintf("needs [batch, time, channels] input, got %v", s)})
	}
	st := l.Strides
	if st == 0 {
		st = l.PoolSize
	}
	x4 := graph.Reshape(x, s[0], 1, s[1], s[2])
	var y *graph.Node
	if l.Max {
		y = graph.MaxPool2D(x4, [2]int{1, l.PoolSize}, [2]int{1, st}, l.Same)
	} else {
		y = graph.AvgPool2D(x4, [2]int{1, l.PoolSize}, [2]int{1, st}, l.Same)
	}
	return graph.Reshape(y, s[0], y.Shape()[2], s[2])
}

// GlobalPooling1D is Keras' GlobalAveragePooling1D (or, with Max,
// GlobalMaxPooling1D): [B, T, C] -> [B, C].
type GlobalPooling1D struct {
	LayerName string
	Max       bool
	KeepDims  bool // [batch, 1, channels], Keras' keepdims
}

func (l *GlobalPooling1D) Name() string { return l.LayerName }

func (l *GlobalPooling1D) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	if x.Shape().Rank() != 3 {
		panic(&graph.Error{Op: graph.OpReduceMean, Owner: l.LayerName, Msg: fmt.Sprintf("needs [batch, time, channels] input, got %v", x.Shape())})
	}
	switch {
	case l.Max && l.KeepDims:
		return graph.ReduceMaxKeep(x, 1)
	case l.Max:
		return graph.ReduceMax(x, 1)
	case l.KeepDims:
		return graph.ReduceMeanKeep(x, 1)
	}
	return graph.ReduceMean(x, 1)
}

// TimeDistributed is Keras' TimeDistributed: Layer applied to every step
// of [B, T, ...] (as one batch of B·T examples, sharing its weights):
// -> [B, T, ...Layer's output].
type TimeDistributed struct {
	LayerName string
	Layer     Layer
}

func (l *TimeDistributed) Name() string { return l.LayerName }

func (l *TimeDistributed) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	s := x.Shape()
	if s.Rank() < 3 {
		panic(&graph.Error{Op: graph.OpReshape, Owner: l.LayerName, Msg: fmt.Sprintf("needs [batch, time, ...] input, got %v", s)})
	}
	flat := append(tensor.Shape{s[0] * s[1]}, s[2:]...)
	y := l.Layer.Forward(c, graph.Reshape(x, flat...))
	return graph.Reshape(y, append(tensor.Shape{s[0], s[1]}, y.Shape()[1:]...)...)
}

// Serializable (serialize.go).
var (
	_ = RegisterLayer("Conv1D", &Conv1D{})
	_ = RegisterLayer("GlobalPooling1D", &GlobalPooling1D{})
	_ = RegisterLayer("Pool1D", &Pool1D{})
	_ = RegisterLayer("PositionEmbedding", &PositionEmbedding{})
	_ = RegisterLayer("SinePositionEncoding", &SinePositionEncoding{})
	_ = RegisterLayer("TimeDistributed", &TimeDistributed{})
)
