package graph

import (
	"github.com/headroom-ml/headroom/tensor"
)

// Input declares a value fed at every step (a batch of features or labels).
// Names are unique among inputs.
func (g *Graph) Input(name string, dtype tensor.DType, shape tensor.Shape) *Node {
	g.checkLeaf(OpInput, name, dtype, shape)
	if _, dup := g.inputs[name]; dup {
		g.throw(OpInput, "input %q declared twice", name)
	}
	n := g.add(OpInput, dtype, shape, Attr{Name: name})
	g.inputs[name] = n
	return n
}

// Variable declares persistent state that lives across steps: a weight
// (RoleParam), an accumulated gradient (RoleGrad) or optimizer state
// (RoleOptState). Names are unique among variables.
func (g *Graph) Variable(name string, role Role, dtype tensor.DType, shape tensor.Shape) *Node {
	g.checkLeaf(OpVariable, name, dtype, shape)
	if _, dup := g.vars[name]; dup {
		g.throw(OpVariable, "variable %q declared twice", name)
	}
	n := g.add(OpVariable, dtype, shape, Attr{Name: name, Role: role})
	g.vars[name] = n
	return n
}

// Param declares a trainable weight: Variable(name, RoleParam, dtype, shape).
func (g *Graph) Param(name string, dtype tensor.DType, shape tensor.Shape) *Node {
	return g.Variable(name, RoleParam, dtype, shape)
}

func (g *Graph) checkLeaf(op Op, name string, dtype tensor.DType, shape tensor.Shape) {
	if name == "" {
		g.throw(op, "a name is required")
	}
	if !dtype.Valid() {
		g.throw(op, "%q has invalid dtype %v", name, dtype)
	}
	if err := shape.Validate(); err != nil {
		g.throw(op, "%q: %v", name, err)
	}
}

// Constant returns a node holding a copy of t.
func (g *Graph) Constant(t tensor.Tensor) *Node {
	if !t.DType().Valid() {
		g.throw(OpConstant, "invalid dtype %v", t.DType())
	}
	c := tensor.New(t.DType(), t.Shape())
	copy(c.Bytes(), t.Bytes())
	return g.add(OpConstant, t.DType(), t.Shape(), Attr{Value: c})
}

// Scalar returns a constant scalar of the given dtype.
func (g *Graph) Scalar(v float64, dtype tensor.DType) *Node {
	t := tensor.New(dtype, nil)
	t.SetFloat64At(0, v)
	return g.add(OpConstant, dtype, nil, Attr{Value: t})
}

// Full returns a constant of the given shape with every element v.
func (g *Graph) Full(v float64, dtype tensor.DType, shape tensor.Shape) *Node {
	if err := shape.Validate(); err != nil {
		g.throw(OpConstant, "%v", err)
	}
	t := tensor.New(dtype, shape)
	for i := 0; i < t.Len(); i++ {
		t.SetFloat64At(i, v)
	}
	return g.add(OpConstant, dtype, shape, Attr{Value: t})
}

// ScalarLike returns a constant scalar with x's dtype.
func ScalarLike(x *Node, v float64) *Node { return x.g.Scalar(v, x.dtype) }

// Assign makes x the value of variable v after the step. x must have v's
// dtype and shape. Every other read of v must be built before the Assign;
// compile checks it. The returned node has no value to read.
func Assign(v, x *Node) *Node {
	g := v.g
	if v.op != OpVariable {
		g.throw(OpAssign, "target %s is not a variable", v)
	}
	if v.dtype != x.dtype || !v.shape.Equal(x.shape) {
		g.throw(OpAssign, "value %s%v does not match variable %q %s%v", x.dtype, x.shape, v.attr.Name, v.dtype, v.shape)
	}
	for _, a := range g.assigns {
		if a.inputs[0] == v {
			g.throw(OpAssign, "variable %q is assigned twice in one step", v.attr.Name)
		}
	}
	if g.guard != nil { // keep the old value unless the guard holds
		x = Where(g.guard, x, v)
	}
	n := g.add(OpAssign, v.dtype, v.shape, Attr{Name: "assign:" + v.attr.Name}, v, x)
	g.assigns = append(g.assigns, n)
	return n
}

// SetGuard makes every Assign built from now on conditional on the Bool
// scalar cond (nil: unconditional): the variable keeps its value when cond
// is false. Mixed float16 training uses it to skip a step whose gradients
// overflowed. It returns the previous guard.
func (g *Graph) SetGuard(cond *Node) *Node {
	if cond != nil && (cond.dtype != tensor.Bool || cond.shape.Size() != 1) {
		g.throw(OpWhere, "guard must be a bool scalar, got %s%v", cond.dtype, cond.shape)
	}
	old := g.guard
	g.guard = cond
	return old
}

// Recompute builds a copy of n (same op, attributes, dtype and shape) over
// inputs, which must have the dtypes and shapes of n's inputs. Autodiff
// uses it to rematerialize forward values in the backward pass.
func Recompute(n *Node, inputs ...*Node) *Node {
	g := n.g
	if len(inputs) != len(n.inputs) || n.op.Class() == ClassLeaf || n.op == OpAssign {
		g.throw(n.op, "cannot recompute %s from %d inputs", n, len(inputs))
	}
	for i, in := range inputs {
		if in.dtype != n.inputs[i].dtype || !in.shape.Equal(n.inputs[i].shape) {
			g.throw(n.op, "recompute: input %d is %s%v, want %s%v", i, in.dtype, in.shape, n.inputs[i].dtype, n.inputs[i].shape)
		}
	}
	at := n.attr
	at.Name = ""
	return g.add(n.op, n.dtype, n.shape, at, inputs...)
}
