package onnx

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// tensorVal is a host value written as an initializer: dims, ONNX element
// type and little-endian bytes.
type tensorVal struct {
	dims []int64
	typ  int32
	raw  []byte
}

// isLeaf reports whether n's value is known when exporting: a Variable
// (from Model.Weights) or a Constant.
func isLeaf(n *graph.Node) bool { return n.Op() == graph.OpVariable || n.Op() == graph.OpConstant }

// isWeight reports whether n is a weight a product reads: a leaf, or a
// leaf reshaped (the attention projections' kernels [d, H, dim] read as
// [d, H·dim]), whose value leafTensor gives.
func isWeight(n *graph.Node) bool {
	return isLeaf(n) || (n.Op() == graph.OpReshape && isLeaf(n.Inputs()[0]))
}

// leafTensor returns the value of a Variable or Constant node, or of a
// reshaped one (isWeight).
func (c *converter) leafTensor(x *graph.Node) (tensor.Tensor, error) {
	if x.Op() == graph.OpReshape {
		t, err := c.leafTensor(x.Inputs()[0])
		if err != nil {
			return tensor.Tensor{}, err
		}
		r := tensor.New(t.DType(), x.Shape())
		copy(r.Bytes(), t.Bytes())
		return r, nil
	}
	if x.Op() == graph.OpConstant {
		return x.Attr().Value, nil
	}
	name := x.Attr().Name
	if c.m.Weights == nil {
		return tensor.Tensor{}, fmt.Errorf("no weights given (need %q)", name)
	}
	t, ok := c.m.Weights(name)
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("no value for weight %q", name)
	}
	if t.DType() != x.DType() || !t.Shape().Equal(x.Shape()) {
		return tensor.Tensor{}, fmt.Errorf("weight %q is %s, the graph wants %s%v", name, t, x.DType(), x.Shape())
	}
	return t, nil
}

// in returns the ONNX value of n's i-th input.
func (c *converter) in(n *graph.Node, i int) (string, error) { return c.valueOf(n.Inputs()[i]) }

// valueOf returns the ONNX value of x; a weight (isWeight) becomes an
// initializer holding its value, in its shape, the first time it is read
// as is.
func (c *converter) valueOf(x *graph.Node) (string, error) {
	if v := c.value[x.ID()]; v != "" {
		return v, nil
	}
	if !isWeight(x) {
		return "", fmt.Errorf("internal: %s read before it was exported", x)
	}
	t, err := c.leafTensor(x)
	if err != nil {
		return "", err
	}
	name := x.Attr().Name // a Variable's name
	if x.Op() == graph.OpReshape {
		name = x.Inputs()[0].Attr().Name + "/reshaped"
	}
	if name == "" {
		name = x.Owner()
	}
	v := c.addInit(name, hostTensor(t))
	c.value[x.ID()] = v
	return v, nil
}

// ins returns the ONNX values of every input of n.
func (c *converter) ins(n *graph.Node) ([]string, error) {
	out := make([]string, len(n.Inputs()))
	for i := range out {
		v, err := c.in(n, i)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// hostTensor returns t as an initializer value.
func hostTensor(t tensor.Tensor) tensorVal {
	return tensorVal{dims: int64s(t.Shape()), typ: elemType(t.DType()), raw: rawLE(t.Bytes(), t.DType().Size())}
}

// addInit adds an initializer named name (made unique) and returns its name.
func (c *converter) addInit(name string, t tensorVal) string {
	name = c.unique(name)
	c.gp.Initializer = append(c.gp.Initializer, &tensorProto{Name: name, Dims: t.dims, DataType: t.typ, RawData: t.raw})
	return name
}

// constI64 returns an int64 initializer holding vals (a 1-D shape, axes or
// bounds), shared by every node that needs the same values.
func (c *converter) constI64(vals ...int64) string {
	var key strings.Builder
	key.WriteString("i64:")
	for _, v := range vals {
		key.WriteString(strconv.FormatInt(v, 10))
		key.WriteByte(',')
	}
	if name, ok := c.inits[key.String()]; ok {
		return name
	}
	raw := make([]byte, 0, 8*len(vals))
	for _, v := range vals {
		raw = append(raw, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
	}
	name := c.addInit("const/int64", tensorVal{dims: []int64{int64(len(vals))}, typ: dtInt64, raw: raw})
	c.inits[key.String()] = name
	return name
}

func int64s(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// permute returns t with its dimensions permuted (output dimension i is
// t's dimension perm[i]), as a new host tensor.
func permute(t tensor.Tensor, perm []int) tensor.Tensor {
	s := t.Shape()
	r := len(s)
	out := make(tensor.Shape, r)
	for i, p := range perm {
		out[i] = s[p]
	}
	dst := tensor.New(t.DType(), out)
	es := t.DType().Size()
	// strides of t in elements, read in output order
	inStride := make([]int, r)
	st := 1
	for i := r - 1; i >= 0; i-- {
		inStride[i] = st
		st *= s[i]
	}
	idx := make([]int, r)
	src, db := t.Bytes(), dst.Bytes()
	for o := 0; o < out.Size(); o++ {
		off := 0
		for i := range idx {
			off += idx[i] * inStride[perm[i]]
		}
		copy(db[o*es:(o+1)*es], src[off*es:(off+1)*es])
		for i := r - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < out[i] {
				break
			}
			idx[i] = 0
		}
	}
	return dst
}

// swapLast returns the permutation that swaps the last two of r dimensions.
func swapLast(r int) []int {
	p := make([]int, r)
	for i := range p {
		p[i] = i
	}
	p[r-1], p[r-2] = p[r-2], p[r-1]
	return p
}

// roundBF16 returns a float32 copy of t with every element rounded to the
// nearest bfloat16 (ties to even), as headroom's bfloat16 products read it.
func roundBF16(t tensor.Tensor) tensor.Tensor {
	dst := tensor.New(tensor.Float32, t.Shape())
	d, s := dst.Float32s(), t.Float32s()
	for i, v := range s {
		d[i] = tensor.ToBFloat16(v).Float32()
	}
	return dst
}
