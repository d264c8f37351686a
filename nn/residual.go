package nn

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The layers that scale a residual branch in keras.applications:
// ConvNeXt's LayerScale and Inception-ResNet-v2's CustomScaleLayer
// (ScaledAdd). ConvNeXt's StochasticDepth, which drops a residual branch
// for whole examples, is Dropout with NoiseShape (0, 1, ..., 1).

// LayerScale multiplies its input's last axis by a learned vector gamma
// [C] that starts at InitValues (Touvron et al., "Going deeper with Image
// Transformers", 2021, sec. 3): x [..., C] -> x·gamma.
type LayerScale struct {
	LayerName  string
	InitValues float64
}

func (l *LayerScale) Name() string { return l.LayerName }

func (l *LayerScale) Forward(c *Context, x *graph.Node) *graph.Node {
	defer scoped(c, l.LayerName)()
	ch := x.Shape()[x.Shape().Rank()-1]
	g := c.Weight(l.LayerName+"/gamma", tensor.Shape{ch}, Constant{V: l.InitValues}, true)
	if g.DType() != x.DType() {
		g = graph.Cast(g, x.DType())
	}
	return graph.Mul(x, g)
}

// ScaledAdd adds its second input, scaled, to its first: x + Scale·r
// (Inception-ResNet-v2's residual blocks, Szegedy et al. 2016, sec. 3.3:
// keras.applications' CustomScaleLayer).
type ScaledAdd struct {
	LayerName string
	Scale     float64
}

func (l *ScaledAdd) Name() string { return l.LayerName }

func (l *ScaledAdd) ForwardN(c *Context, xs []*graph.Node) []*graph.Node {
	defer scoped(c, l.LayerName)()
	if len(xs) != 2 {
		throwf(graph.OpAdd, l.LayerName, "ScaledAdd takes two inputs (the shortcut and the residual), got %d", len(xs))
	}
	return one(graph.Add(xs[0], graph.MulScalar(xs[1], l.Scale)))
}

// Serializable (serialize.go).
var (
	_ = RegisterLayer("LayerScale", &LayerScale{})
	_ = RegisterLayer("ScaledAdd", &ScaledAdd{})
)
