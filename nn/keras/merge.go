package keras

import (
	"slices"

	"github.com/headroom-ml/headroom/nn"
)

// multiMapper returns the mapping of a class whose calls take several
// tensors, or give several.
func multiMapper(class string) (func(name string, f *fields, in callIn) mapped, bool) {
	if _, ok := mergeKinds[class]; ok {
		return func(name string, f *fields, in callIn) mapped { return elementwise(class, name, f, in) }, true
	}
	switch class {
	case "Concatenate":
		return concatenate, true
	case "Dot":
		return dot, true
	case "CustomScaleLayer":
		return customScale, true
	case "TFOpLambda":
		return tfOpLambda, true
	}
	return sequenceMulti(class)
}

// mergeKinds are the elementwise merge layers and the nn layer of each.
var mergeKinds = map[string]func(name string) nn.MultiLayer{
	"Add":      func(n string) nn.MultiLayer { return &nn.Add{LayerName: n} },
	"Subtract": func(n string) nn.MultiLayer { return &nn.Subtract{LayerName: n} },
	"Multiply": func(n string) nn.MultiLayer { return &nn.Multiply{LayerName: n} },
	"Average":  func(n string) nn.MultiLayer { return &nn.Average{LayerName: n} },
	"Maximum":  func(n string) nn.MultiLayer { return &nn.Maximum{LayerName: n} },
	"Minimum":  func(n string) nn.MultiLayer { return &nn.Minimum{LayerName: n} },
}

// merged returns the inputs of a merge layer: its positional tensors (Keras
// passes them as one list).
func merged(f *fields, class string, in callIn, min int) ([][]int, bool) {
	if len(in.named) != 0 {
		f.fail("%s takes its inputs as one list, not as keyword arguments", class)
		return nil, false
	}
	if len(in.shapes) < min {
		f.fail("%s takes at least %d inputs, got %d", class, min, len(in.shapes))
		return nil, false
	}
	return in.shapes, true
}

// elementwise: Add, Subtract, Multiply, Average, Maximum, Minimum over
// inputs of one rank, broadcast where a size is 1 (Keras'
// _compute_elemwise_op_output_shape).
func elementwise(class, name string, f *fields, in callIn) mapped {
	xs, ok := merged(f, class, in, 2)
	if !ok {
		return mapped{}
	}
	if class == "Subtract" && len(xs) != 2 {
		f.fail("Subtract takes exactly 2 inputs, got %d", len(xs))
		return mapped{}
	}
	out := slices.Clone(xs[0])
	for _, x := range xs[1:] {
		if len(x) != len(out) {
			f.unsupported("%s of inputs of different ranks %v and %v is not supported: nn broadcasts from the last axis, Keras from the first", class, xs[0], x)
			return mapped{}
		}
		for i := range out {
			switch {
			case x[i] == out[i] || x[i] == 1:
			case out[i] == 1:
				out[i] = x[i]
			default:
				f.fail("%s of inputs of shapes %v and %v, which do not broadcast", class, xs[0], x)
				return mapped{}
			}
		}
	}
	return mapped{layer: mergeKinds[class](name), out: out}
}

// concatenate joins its inputs along axis (counting the batch as 0, -1 by
// default); the other sizes must agree.
func concatenate(name string, f *fields, in callIn) mapped {
	xs, ok := merged(f, "Concatenate", in, 1)
	if !ok {
		return mapped{}
	}
	ax := f.axes("axis", []int{-1})
	if f.err != nil {
		return mapped{}
	}
	if len(ax) != 1 {
		f.fail("axis: want one axis, got %v", ax)
		return mapped{}
	}
	rank := len(xs[0]) + 1 // batch included
	a := ax[0]
	if a < 0 {
		a += rank
	}
	if a < 0 || a >= rank {
		f.fail("axis %d is out of range for inputs of rank %d (batch included)", ax[0], rank)
		return mapped{}
	}
	if a == 0 {
		f.unsupported("axis 0 joins along the batch: not a layer's work in headroom")
		return mapped{}
	}
	out := slices.Clone(xs[0])
	for _, x := range xs[1:] {
		if len(x) != len(out) {
			f.fail("Concatenate of inputs of ranks %d and %d", len(xs[0]), len(x))
			return mapped{}
		}
		for i := range x {
			if i == a-1 {
				continue
			}
			if x[i] != out[i] {
				f.fail("Concatenate along axis %d of inputs of shapes %v and %v: the other sizes differ", ax[0], xs[0], x)
				return mapped{}
			}
		}
		out[a-1] += x[a-1]
	}
	if err := checkSize(out); err != nil {
		f.fail("output %v: %v", out, err)
		return mapped{}
	}
	return mapped{layer: &nn.Concatenate{LayerName: name, Axis: a}, out: out}
}

// dot is the dot product of two inputs along one axis of each (axes counts
// the batch as 0); normalize makes it the cosine similarity.
func dot(name string, f *fields, in callIn) mapped {
	xs, ok := merged(f, "Dot", in, 2)
	if !ok {
		return mapped{}
	}
	if len(xs) != 2 {
		f.fail("Dot takes 2 inputs, got %d", len(xs))
		return mapped{}
	}
	axes := f.axes("axes", nil)
	normalize := f.boolean("normalize", false)
	if f.err != nil {
		return mapped{}
	}
	switch len(axes) {
	case 1:
		axes = []int{axes[0], axes[0]}
	case 2:
	default:
		f.fail("axes: want an axis or a pair of them, got %v", axes)
		return mapped{}
	}
	a, b := xs[0], xs[1]
	if len(a) != len(b) || (len(a) != 1 && len(a) != 2) {
		f.unsupported("Dot of inputs of shapes %v and %v is not supported: nn.Dot takes two inputs of rank 2 or 3 (batch included)", a, b)
		return mapped{}
	}
	rank := len(a) + 1
	var ax [2]int
	for i, x := range axes {
		if x < 0 {
			x += rank
		}
		if x < 1 || x >= rank {
			f.fail("axes %v: out of range for inputs of rank %d (batch included), or the batch", axes, rank)
			return mapped{}
		}
		ax[i] = x
	}
	if a[ax[0]-1] != b[ax[1]-1] {
		f.fail("Dot along axes %v of inputs of shapes %v and %v: the sizes differ", axes, a, b)
		return mapped{}
	}
	out := []int{1}
	if rank == 3 {
		out = []int{a[2-ax[0]], b[2-ax[1]]}
	}
	return mapped{layer: &nn.Dot{LayerName: name, Axes: ax, Normalize: normalize}, out: out}
}
