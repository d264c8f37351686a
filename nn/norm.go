package nn

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// BatchNormalization normalizes over every axis but the last (the
// channels), with a learned scale (gamma) and shift (beta).
type BatchNormalization struct {
	LayerName string
	Momentum  float64 // zero: 0.99
	Epsilon   float64 // zero: 1e-3
}

func (b *BatchNormalization) Name() string { return b.LayerName }

func (b *BatchNormalization) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, b.LayerName)()
	mom, eps := or(b.Momentum, 0.99), or(b.Epsilon, 1e-3)
	ch := tensor.Shape{x.Shape()[x.Shape().Rank()-1]}
	gamma := c.Weight(b.LayerName+"/gamma", ch, Constant{1}, true)
	beta := c.Weight(b.LayerName+"/beta", ch, Constant{0}, true)
	mm := c.Weight(b.LayerName+"/moving_mean", ch, Constant{0}, false)
	mv := c.Weight(b.LayerName+"/moving_variance", ch, Constant{1}, false)
	axes := make([]int, x.Shape().Rank()-1)
	for i := range axes {
		axes[i] = i
	}
	mean, variance := mm, mv
	if c.Training {
		mean = graph.ReduceMean(x, axes...)
		variance = graph.ReduceMean(graph.Square(graph.Sub(x, mean)), axes...)
		c.Updates = append(c.Updates,
			[2]*graph.Node{mm, graph.Add(graph.MulScalar(mm, mom), graph.MulScalar(mean, 1-mom))},
			[2]*graph.Node{mv, graph.Add(graph.MulScalar(mv, mom), graph.MulScalar(variance, 1-mom))})
	}
	// y = (x - mean) * gamma/sqrt(var + eps) + beta
	scale := graph.Div(gamma, graph.Sqrt(graph.AddScalar(variance, eps)))
	return graph.Add(graph.Mul(graph.Sub(x, mean), scale), beta)
}

func or(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// LayerNormalization normalizes each example over its last axis, with a
// learned scale and shift. With Fused it runs as one op (graph.LayerNorm):
// the same values, and the backward pass keeps each row's mean and 1/σ
// instead of three values of the input's size.
type LayerNormalization struct {
	LayerName string
	Epsilon   float64 // zero: 1e-3 (Keras' default)
	Fused     bool
}

func (l *LayerNormalization) Name() string { return l.LayerName }

func (l *LayerNormalization) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	eps := or(l.Epsilon, 1e-3)
	ch := tensor.Shape{x.Shape()[x.Shape().Rank()-1]}
	gamma := c.Weight(l.LayerName+"/gamma", ch, Constant{1}, true)
	beta := c.Weight(l.LayerName+"/beta", ch, Constant{0}, true)
	if l.Fused {
		return graph.LayerNorm(x, gamma, beta, eps)
	}
	last := x.Shape().Rank() - 1
	mean := graph.ReduceMeanKeep(x, last)
	centered := graph.Sub(x, mean)
	variance := graph.ReduceMeanKeep(graph.Square(centered), last)
	return graph.Add(graph.Mul(graph.Div(centered, graph.Sqrt(graph.AddScalar(variance, eps))), gamma), beta)
}
