package graph

import "github.com/headroom-ml/headroom/tensor"

// The builders in this file make the internal ops that autodiff uses for
// gradients. They check shapes like every other builder.

func sameShape(op Op, a, b *Node) {
	if a.dtype != b.dtype || !a.shape.Equal(b.shape) {
		a.g.throw(op, "operands differ: %s%v vs %s%v", a.dtype, a.shape, b.dtype, b.shape)
	}
}

func gradOp(op Op, y, g *Node) *Node {
	sameShape(op, y, g)
	return y.g.add(op, y.dtype, y.shape, Attr{}, y, g)
}

// ReluGrad returns g where x > 0 and 0 elsewhere.
func ReluGrad(x, g *Node) *Node { return gradOp(OpReluGrad, x, g) }

// SigmoidGrad returns g*y*(1-y) for y = Sigmoid(x).
func SigmoidGrad(y, g *Node) *Node { return gradOp(OpSigmoidGrad, y, g) }

// TanhGrad returns g*(1-y*y) for y = Tanh(x).
func TanhGrad(y, g *Node) *Node { return gradOp(OpTanhGrad, y, g) }

// SoftmaxGrad returns y*(g - sum(g*y)) over the last axis for y = Softmax(x).
func SoftmaxGrad(y, g *Node) *Node { return gradOp(OpSoftmaxGrad, y, g) }

// LogSoftmaxGrad returns g - exp(y)*sum(g) over the last axis for y = LogSoftmax(x).
func LogSoftmaxGrad(y, g *Node) *Node { return gradOp(OpLogSoftmaxGrad, y, g) }

// SoftmaxCrossEntropyGrad returns g[i]*(softmax(logits[i]) - onehot(labels[i]))
// for the per-example gradient g [...] of SoftmaxCrossEntropy.
func SoftmaxCrossEntropyGrad(logits, labels, g *Node) *Node {
	gr := logits.g
	batch := logits.shape[:logits.shape.Rank()-1]
	if !g.shape.Equal(batch) || g.dtype != logits.dtype || !labels.shape.Equal(batch) {
		gr.throw(OpSoftmaxCrossEntropyGrad, "gradient %s%v and labels %v do not match logits %s%v", g.dtype, g.shape, labels.shape, logits.dtype, logits.shape)
	}
	return gr.add(OpSoftmaxCrossEntropyGrad, logits.dtype, logits.shape, Attr{}, logits, labels, g)
}

// Unslice places x into a zero tensor of shape at starts: the gradient of Slice.
func Unslice(x *Node, shape tensor.Shape, starts []int) *Node {
	g := x.g
	if len(starts) != shape.Rank() || x.shape.Rank() != shape.Rank() {
		g.throw(OpUnslice, "%v at %v does not fit %v", x.shape, starts, shape)
	}
	for i := range starts {
		if starts[i] < 0 || starts[i]+x.shape[i] > shape[i] {
			g.throw(OpUnslice, "%v at %v does not fit %v", x.shape, starts, shape)
		}
	}
	return g.add(OpUnslice, x.dtype, shape, Attr{Starts: append([]int{}, starts...)}, x)
}

// ScatterAdd returns a zero tensor of shape [V, ...] with each row g[i]
// added at row indices[i]: the gradient of Gather.
func ScatterAdd(indices, g *Node, shape tensor.Shape) *Node {
	gr := g.g
	want := append(indices.shape.Clone(), shape[1:]...)
	if indices.dtype != tensor.Int32 || !g.shape.Equal(want) {
		gr.throw(OpScatterAdd, "gradient %v and indices %s%v do not fit %v", g.shape, indices.dtype, indices.shape, shape)
	}
	return gr.add(OpScatterAdd, g.dtype, shape, Attr{}, indices, g)
}

// AllReduceSum returns x summed over every process of a data-parallel run
// (each process holds its own x). It runs where it is built in the step, so
// a gradient can be reduced as soon as it is final. With one process it is
// a copy.
func AllReduceSum(x *Node) *Node {
	if x.dtype != tensor.Float32 && x.dtype != tensor.Float64 {
		x.g.throw(OpAllReduce, "needs float32 or float64, got %s%v", x.dtype, x.shape)
	}
	return x.g.add(OpAllReduce, x.dtype, x.shape, Attr{}, x)
}

// AllReduceStart starts summing x over every process of a data-parallel
// run and returns the buffer the sum lands in, which only AllReduceWait may
// read: the instructions built between the two run while the processes
// exchange data. With one process it is a copy.
func AllReduceStart(x *Node) *Node {
	if x.dtype != tensor.Float32 && x.dtype != tensor.Float64 {
		x.g.throw(OpAllReduceStart, "needs float32 or float64, got %s%v", x.dtype, x.shape)
	}
	return x.g.add(OpAllReduceStart, x.dtype, x.shape, Attr{}, x)
}

// AllReduceWait completes the all-reduce that start (an AllReduceStart)
// began and returns its sum: a view of start's buffer, read after the wait
// instruction. Build it where the sum is first needed, as late as possible.
func AllReduceWait(start *Node) *Node {
	if start.op != OpAllReduceStart {
		start.g.throw(OpAllReduceWait, "needs an all_reduce_start, got %s", start)
	}
	return start.g.add(OpAllReduceWait, start.dtype, start.shape, Attr{}, start)
}

// ReduceScatterSum sums the vector x [n] over the size processes of a
// data-parallel run and returns this process's block of the sum,
// [n/size] (rank r gets elements [r·n/size, (r+1)·n/size)).
func ReduceScatterSum(x *Node, size int) *Node {
	if x.shape.Rank() != 1 || size <= 0 || x.shape[0]%size != 0 {
		x.g.throw(OpReduceScatter, "needs a vector whose length divides into %d blocks, got %v", size, x.shape)
	}
	return x.g.add(OpReduceScatter, x.dtype, tensor.Shape{x.shape[0] / size}, Attr{Depth: size}, x)
}

// AllGather concatenates every process's vector x [m], in rank order:
// [m·size].
func AllGather(x *Node, size int) *Node {
	if x.shape.Rank() != 1 || size <= 0 {
		x.g.throw(OpAllGather, "needs a vector, got %v", x.shape)
	}
	return x.g.add(OpAllGather, x.dtype, tensor.Shape{x.shape[0] * size}, Attr{Depth: size}, x)
}

// ReduceScatterStart starts ReduceScatterSum of the vector x [n] over the
// size processes and returns at once the buffer this process's block of the
// sum [n/size] lands in, which only ReduceScatterWait may read. x is read
// by the processes until the wait, which keeps it alive: nothing may
// overwrite it in between. With one process it is a copy.
func ReduceScatterStart(x *Node, size int) *Node {
	if x.dtype != tensor.Float32 && x.dtype != tensor.Float64 {
		x.g.throw(OpReduceScatterStart, "needs float32 or float64, got %s%v", x.dtype, x.shape)
	}
	if x.shape.Rank() != 1 || size <= 0 || x.shape[0]%size != 0 {
		x.g.throw(OpReduceScatterStart, "needs a vector whose length divides into %d blocks, got %v", size, x.shape)
	}
	return x.g.add(OpReduceScatterStart, x.dtype, tensor.Shape{x.shape[0] / size}, Attr{Depth: size}, x)
}

// ReduceScatterWait completes the reduce-scatter start began and returns
// this process's block of the sum: a view of start's buffer.
func ReduceScatterWait(start *Node) *Node {
	if start.op != OpReduceScatterStart {
		start.g.throw(OpReduceScatterWait, "needs a reduce_scatter_start, got %s", start)
	}
	return start.g.add(OpReduceScatterWait, start.dtype, start.shape, Attr{}, start, start.inputs[0])
}

// AllGatherStart starts AllGather of the vector x [m] and returns at once
// the buffer the concatenation [m·size] lands in, which only AllGatherWait
// may read. x is read until the wait, which keeps it alive. With one
// process it is a copy.
func AllGatherStart(x *Node, size int) *Node {
	if x.shape.Rank() != 1 || size <= 0 {
		x.g.throw(OpAllGatherStart, "needs a vector, got %v", x.shape)
	}
	return x.g.add(OpAllGatherStart, x.dtype, tensor.Shape{x.shape[0] * size}, Attr{Depth: size}, x)
}

// AllGatherWait completes the all-gather start began and returns the
// concatenation: a view of start's buffer.
func AllGatherWait(start *Node) *Node {
	if start.op != OpAllGatherStart {
		start.g.throw(OpAllGatherWait, "needs an all_gather_start, got %s", start)
	}
	return start.g.add(OpAllGatherWait, start.dtype, start.shape, Attr{}, start, start.inputs[0])
}
