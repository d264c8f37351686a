package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// lowerNode returns the instruction that computes n into buffer out from
// the buffers ins of its inputs, with every size and stride precomputed.
func lowerNode(n *graph.Node, out int, ins []int) Instr {
	in := n.Inputs()
	x := in[0]
	s := n.Shape()
	it := Instr{Op: n.Op(), Node: n.ID(), Owner: n.Owner(), Site: n.Site(), DType: n.DType(),
		InDType: x.DType(), Out: out, In: ins, Shape: s, Work: -1}
	at := n.Attr()
	it.BF16 = at.BF16
	if f := moreLowering[n.Op()]; f != nil {
		f(n, &it)
		return it
	}
	switch n.Op() {
	case graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMaximum, graph.OpMinimum:
		a, b := in[0].Shape(), in[1].Shape()
		switch {
		case a.Equal(s) && b.Equal(s):
			it.Path = PathSame
		case a.Size() == s.Size() && b.Size() == 1:
			it.Path = PathScalarRight
		case a.Size() == 1 && b.Size() == s.Size():
			it.Path = PathScalarLeft
		default:
			it.Path = PathBroadcast
		}
		it.AStrides, it.BStrides = tensor.BroadcastStrides(a, s), tensor.BroadcastStrides(b, s)
	case graph.OpEqual, graph.OpNotEqual, graph.OpLess, graph.OpLessEqual, graph.OpGreater, graph.OpGreaterEqual:
		it.AStrides, it.BStrides = tensor.BroadcastStrides(in[0].Shape(), s), tensor.BroadcastStrides(in[1].Shape(), s)
	case graph.OpWhere:
		it.InDType = in[1].DType()
		it.CStrides = tensor.BroadcastStrides(in[0].Shape(), s)
		it.AStrides, it.BStrides = tensor.BroadcastStrides(in[1].Shape(), s), tensor.BroadcastStrides(in[2].Shape(), s)
	case graph.OpBroadcastTo:
		it.AStrides = tensor.BroadcastStrides(x.Shape(), s)
	case graph.OpReduceSum, graph.OpReduceMean, graph.OpReduceMax:
		keep := x.Shape().Clone()
		count := 1
		for _, ax := range at.Axes {
			count *= keep[ax]
			keep[ax] = 1
		}
		it.XShape = x.Shape()
		it.DstStrides = tensor.BroadcastStrides(keep, x.Shape())
		it.Scale = 1 / float64(max(count, 1))
	case graph.OpMatMul:
		a, b := in[0].Shape(), in[1].Shape()
		ra := a.Rank()
		it.TransA, it.TransB = at.TransA, at.TransB
		it.M, it.N = s[s.Rank()-2], s[s.Rank()-1]
		it.K = a[ra-1]
		if at.TransA {
			it.K = a[ra-2]
		}
		it.Batch = tensor.Shape(s[:s.Rank()-2]).Size()
		it.SharedB = b.Rank() == 2 && ra > 2
	case graph.OpSoftmax, graph.OpLogSoftmax, graph.OpSoftmaxGrad, graph.OpLogSoftmaxGrad,
		graph.OpSoftmaxCrossEntropy, graph.OpSoftmaxCrossEntropyGrad:
		it.Cols = x.Shape()[x.Shape().Rank()-1]
		it.Rows = x.Shape().Size() / max(it.Cols, 1)
	case graph.OpTranspose:
		it.XShape, it.Perm = x.Shape(), at.Perm
	case graph.OpConcat:
		it.Outer = tensor.Shape(s[:at.Axis]).Size()
		it.Inners = make([]int, len(in))
		for i, p := range in {
			it.Inners[i] = tensor.Shape(p.Shape()[at.Axis:]).Size()
		}
	case graph.OpSlice:
		it.XShape, it.Starts, it.Ends = x.Shape(), at.Starts, at.Ends
	case graph.OpUnslice:
		it.Starts = at.Starts
		it.Ends = make([]int, len(at.Starts))
		for i, st := range at.Starts {
			it.Ends[i] = st + x.Shape()[i]
		}
	case graph.OpGather:
		it.RowSize = tensor.Shape(x.Shape()[1:]).Size()
	case graph.OpScatterAdd:
		it.RowSize = tensor.Shape(s[1:]).Size()
	case graph.OpOneHot:
		it.Depth = at.Depth
	case graph.OpDropoutMask:
		it.Rate, it.Seed = at.Rate, at.Seed
	case graph.OpConv2D, graph.OpMaxPool2D, graph.OpAvgPool2D, graph.OpMaxPool2DGrad:
		it.Geom = geom(x.Shape(), at)
		if n.Op() == graph.OpConv2D {
			it.F = s[3]
		}
	case graph.OpConv2DBackpropInput: // dy, filter -> dx [Of]
		it.Geom, it.F = geom(at.Of, at), x.Shape()[3]
	case graph.OpConv2DBackpropFilter: // x, dy -> dfilter [Of]
		it.Geom, it.F = geom(x.Shape(), at), at.Of[3]
	case graph.OpAvgPool2DGrad: // dy -> dx [Of]
		it.Geom = geom(at.Of, at)
	}
	return it
}

// moreLowering completes the instructions of op families kept in files of
// their own (it has the node's op, owner, dtypes, buffers and shape set);
// such a file sets its entries when the package initializes.
var moreLowering [graph.NumOps]func(n *graph.Node, it *Instr)

// geom is the window geometry over an NHWC input of shape in.
func geom(in tensor.Shape, at *graph.Attr) Window { return NewWindow(in, at) }
