package graph

import (
	"slices"

	"github.com/headroom-ml/headroom/tensor"
)

// normAxes validates axes against rank r (negative axes count from the end)
// and returns them sorted and unique. No axes means all axes.
func (g *Graph) normAxes(op Op, axes []int, r int, shape tensor.Shape) []int {
	if len(axes) == 0 {
		out := make([]int, r)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, len(axes))
	for _, a := range axes {
		if a < 0 {
			a += r
		}
		if a < 0 || a >= r {
			g.throw(op, "axis %d out of range for shape %v", a, shape)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

func reduce(op Op, x *Node, keepDims bool, axes []int) *Node {
	g := x.g
	if !x.dtype.IsFloat() || x.dtype == tensor.Float16 || x.dtype == tensor.BFloat16 {
		g.throw(op, "needs a float32 or float64 operand, got %s%v", x.dtype, x.shape)
	}
	ax := g.normAxes(op, axes, x.shape.Rank(), x.shape)
	return g.add(op, x.dtype, reducedShape(x.shape, ax, keepDims), Attr{Axes: ax, KeepDims: keepDims}, x)
}

func reducedShape(s tensor.Shape, axes []int, keep bool) tensor.Shape {
	out := tensor.Shape{}
	for i, d := range s {
		if slices.Contains(axes, i) {
			if keep {
				out = append(out, 1)
			}
			continue
		}
		out = append(out, d)
	}
	return out
}

// ReduceSum sums x over axes (all axes if none are given), dropping them.
func ReduceSum(x *Node, axes ...int) *Node { return reduce(OpReduceSum, x, false, axes) }

// ReduceMean averages x over axes (all if none), dropping them.
func ReduceMean(x *Node, axes ...int) *Node { return reduce(OpReduceMean, x, false, axes) }

// ReduceMax takes the maximum of x over axes (all if none), dropping them.
func ReduceMax(x *Node, axes ...int) *Node { return reduce(OpReduceMax, x, false, axes) }

// ReduceSumKeep is ReduceSum that keeps reduced axes with size 1.
func ReduceSumKeep(x *Node, axes ...int) *Node { return reduce(OpReduceSum, x, true, axes) }

// ReduceMeanKeep is ReduceMean that keeps reduced axes with size 1.
func ReduceMeanKeep(x *Node, axes ...int) *Node { return reduce(OpReduceMean, x, true, axes) }

// ReduceMaxKeep is ReduceMax that keeps reduced axes with size 1.
func ReduceMaxKeep(x *Node, axes ...int) *Node { return reduce(OpReduceMax, x, true, axes) }
