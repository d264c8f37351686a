package graph

import "github.com/headroom-ml/headroom/tensor"

// ConvOutSize returns the output length of a window of size k and stride s
// over n positions, with Keras/TensorFlow's "valid" or "same" padding.
func ConvOutSize(n, k, s int, same bool) int {
	if same {
		return (n + s - 1) / s
	}
	if n < k {
		return 0
	}
	return (n-k)/s + 1
}

func (g *Graph) windowed(op Op, x *Node, window, strides [2]int, same bool) tensor.Shape {
	if x.shape.Rank() != 4 {
		g.throw(op, "input must be NHWC (rank 4), got %v", x.shape)
	}
	if x.dtype != tensor.Float32 && x.dtype != tensor.Float64 {
		g.throw(op, "needs float32 or float64, got %s", x.dtype)
	}
	if window[0] <= 0 || window[1] <= 0 || strides[0] <= 0 || strides[1] <= 0 {
		g.throw(op, "window %v and strides %v must be positive", window, strides)
	}
	oh := ConvOutSize(x.shape[1], window[0], strides[0], same)
	ow := ConvOutSize(x.shape[2], window[1], strides[1], same)
	if oh <= 0 || ow <= 0 {
		g.throw(op, "window %v does not fit input %v with valid padding", window, x.shape)
	}
	return tensor.Shape{x.shape[0], oh, ow, x.shape[3]}
}

// Conv2D convolves x [N, H, W, C] with filter [KH, KW, C, F] (Keras' HWIO
// layout) at the given strides, with "same" or "valid" padding:
// -> [N, OH, OW, F]. Dilation is 1.
func Conv2D(x, filter *Node, strides [2]int, same bool) *Node {
	g := x.g
	if filter.shape.Rank() != 4 || x.shape.Rank() != 4 || filter.shape[2] != x.shape[3] {
		g.throw(OpConv2D, "filter %v (KH, KW, C, F) does not fit input %v (N, H, W, C)", filter.shape, x.shape)
	}
	if x.dtype != filter.dtype {
		g.throw(OpConv2D, "dtype mismatch: %s vs %s", x.dtype, filter.dtype)
	}
	win := [2]int{filter.shape[0], filter.shape[1]}
	out := g.windowed(OpConv2D, x, win, strides, same)
	out[3] = filter.shape[3]
	return g.add(OpConv2D, x.dtype, out, Attr{Window: win, Strides: strides, Same: same}, x, filter)
}

// MaxPool2D takes the maximum over windows of x [N, H, W, C].
func MaxPool2D(x *Node, window, strides [2]int, same bool) *Node {
	out := x.g.windowed(OpMaxPool2D, x, window, strides, same)
	return x.g.add(OpMaxPool2D, x.dtype, out, Attr{Window: window, Strides: strides, Same: same}, x)
}

// AvgPool2D averages over windows of x [N, H, W, C]; with "same" padding
// the padded cells do not count (as Keras).
func AvgPool2D(x *Node, window, strides [2]int, same bool) *Node {
	out := x.g.windowed(OpAvgPool2D, x, window, strides, same)
	return x.g.add(OpAvgPool2D, x.dtype, out, Attr{Window: window, Strides: strides, Same: same}, x)
}

// Conv2DBackpropInput returns the gradient of Conv2D with respect to its
// input of shape xShape, from dy and the filter.
func Conv2DBackpropInput(dy, filter *Node, xShape tensor.Shape, strides [2]int, same bool) *Node {
	at := Attr{Window: [2]int{filter.shape[0], filter.shape[1]}, Strides: strides, Same: same, Of: xShape.Clone()}
	return dy.g.add(OpConv2DBackpropInput, dy.dtype, xShape, at, dy, filter)
}

// Conv2DBackpropFilter returns the gradient of Conv2D with respect to its
// filter of shape fShape, from x and dy.
func Conv2DBackpropFilter(x, dy *Node, fShape tensor.Shape, strides [2]int, same bool) *Node {
	at := Attr{Window: [2]int{fShape[0], fShape[1]}, Strides: strides, Same: same, Of: fShape.Clone()}
	return x.g.add(OpConv2DBackpropFilter, x.dtype, fShape, at, x, dy)
}

// MaxPool2DGrad routes dy to the maximum of each window of x.
func MaxPool2DGrad(x, dy *Node, window, strides [2]int, same bool) *Node {
	return x.g.add(OpMaxPool2DGrad, x.dtype, x.shape, Attr{Window: window, Strides: strides, Same: same, Of: x.shape}, x, dy)
}

// AvgPool2DGrad spreads dy evenly over each window of an input of shape xShape.
func AvgPool2DGrad(dy *Node, xShape tensor.Shape, window, strides [2]int, same bool) *Node {
	return dy.g.add(OpAvgPool2DGrad, dy.dtype, xShape, Attr{Window: window, Strides: strides, Same: same, Of: xShape.Clone()}, dy)
}

// DropoutMask returns a [shape] tensor of dtype whose elements are 0 with
// probability rate and 1/(1-rate) otherwise (inverted dropout, as Keras).
// The draw is a pure function of (seed, the int64 scalar step, element
// index), so a run is reproducible and resumable from the step counter.
func DropoutMask(step *Node, shape tensor.Shape, dtype tensor.DType, rate float64, seed uint64) *Node {
	g := step.g
	if step.dtype != tensor.Int64 || step.shape.Rank() != 0 {
		g.throw(OpDropoutMask, "step must be an int64 scalar, got %s%v", step.dtype, step.shape)
	}
	if !(rate >= 0 && rate < 1) {
		g.throw(OpDropoutMask, "rate %v must be in [0, 1)", rate)
	}
	if dtype != tensor.Float32 && dtype != tensor.Float64 {
		g.throw(OpDropoutMask, "dtype must be float32 or float64, got %s", dtype)
	}
	return g.add(OpDropoutMask, dtype, shape, Attr{Rate: rate, Seed: seed}, step)
}
