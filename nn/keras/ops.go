package keras

import (
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/nn"
)

// Keras 3 records Python arithmetic on tensors (x + inputs, x * (1/6)) and
// calls of keras.ops (ops.mean(x, axis=1)) in a functional config as
// operation nodes: entries of the layer list whose module is
// keras.src.ops.numpy, .nn, .math or .core, whose class is the
// operation's (Add, Multiply, Mean), whose config holds the operation's
// own arguments (axis, keepdims) and whose calls may take constants
// (x + 3.0 is called with [x, 3.0]). Each maps onto an nn layer: nn.Math
// for arithmetic, nn.Reduce for reductions, and the layers of the same
// meaning for the rest (Activation, Reshape, Permute, Concatenate).

// isOperation reports whether a layer-list entry is an operation node.
func isOperation(raw map[string]any) bool {
	mod, _ := raw["module"].(string)
	return strings.HasPrefix(mod, "keras.src.ops.") || strings.HasPrefix(mod, "keras.ops")
}

// opMath maps the elementwise operations nn.Math computes onto its Fn.
var opMath = map[string]string{
	"Add": "add", "Subtract": "subtract", "Multiply": "multiply", "Divide": "divide", "TrueDivide": "divide",
	"Maximum": "maximum", "Minimum": "minimum", "Power": "power",
	"Negative": "negative", "Absolute": "absolute", "Abs": "absolute", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
	"Square": "square", "Reciprocal": "reciprocal", "Erf": "erf", "Clip": "clip",
}

// opActivations maps the operations that are a Keras activation onto its
// name (nn.Activation).
var opActivations = map[string]string{
	"Relu": "relu", "Relu6": "relu6", "Sigmoid": "sigmoid", "Tanh": "tanh", "Softplus": "softplus",
	"Softsign": "softsign", "Silu": "silu", "HardSigmoid": "hard_sigmoid", "HardSilu": "hard_silu", "Selu": "selu",
}

// opOthers are the other operations read here.
var opOthers = []string{"Gelu", "Elu", "LeakyRelu", "Softmax", "LogSoftmax", "Mean", "Sum", "Max", "Min",
	"Reshape", "Transpose", "ExpandDims", "Squeeze", "Concatenate", "Cast"}

// SupportedOperations lists the keras.ops operation classes Parse maps.
func SupportedOperations() []string {
	var out []string
	for k := range opMath {
		out = append(out, k)
	}
	for k := range opActivations {
		out = append(out, k)
	}
	out = append(out, opOthers...)
	sort.Strings(out)
	return out
}

func isSupportedOperation(class string) bool {
	_, m := opMath[class]
	_, a := opActivations[class]
	return m || a || slices.Contains(opOthers, class)
}

// mapOperation maps one call of an operation node of class. The call's
// operands are its positional arguments: tensors (in.shapes, in order)
// and constants (cs.constants, by position).
func mapOperation(class, name string, f *fields, in callIn, cs callSpec) mapped {
	if len(in.named) != 0 {
		f.unsupported("operation %s called with keyword tensors (%s)", class, strings.Join(sortedNamedShapes(in.named), ", "))
		return mapped{}
	}
	if fn, ok := opMath[class]; ok {
		return mathOp(class, fn, name, f, in, cs)
	}
	if len(cs.constants) != 0 {
		f.unsupported("operation %s called with a constant: headroom reads constants of arithmetic only", class)
		return mapped{}
	}
	if class == "Concatenate" {
		return concatenate(name, &fields{m: map[string]any{"axis": axisOr(f, "axis", 0)}}, callIn{shapes: in.shapes})
	}
	x, ok := in.one(f, class)
	if !ok {
		return mapped{}
	}
	if fn, ok := opActivations[class]; ok {
		return mapped{layer: &nn.Activation{LayerName: name, Fn: fn}, out: x}
	}
	switch class {
	case "Gelu":
		if f.boolean("approximate", true) { // ops.gelu's default, unlike the activation's
			return mapped{layer: &nn.Math{LayerName: name, Fn: "gelu_approximate"}, out: x}
		}
		return mapped{layer: &nn.Activation{LayerName: name, Fn: "gelu"}, out: x}
	case "Elu":
		return elu(name, f, x)
	case "LeakyRelu":
		return leakyReLU(name, &fields{m: map[string]any{"negative_slope": numberOr(f, "negative_slope", "0.2")}}, x)
	case "Softmax":
		return softmax(name, f, x)
	case "LogSoftmax":
		if ax := f.axes("axis", []int{-1}); f.err == nil && (len(ax) != 1 || (ax[0] != -1 && ax[0] != len(x))) {
			f.unsupported("log_softmax over axis %v is not supported: nn's is over the last axis", ax)
		}
		return mapped{layer: &nn.Activation{LayerName: name, Fn: "log_softmax"}, out: x}
	case "Mean", "Sum", "Max", "Min":
		return reduceOp(class, name, f, x)
	case "Reshape":
		return reshapeOp(name, f, x)
	case "Transpose":
		return transposeOp(name, f, x)
	case "ExpandDims", "Squeeze":
		return squeezeOp(class, name, f, x)
	case "Cast":
		switch d := f.str("dtype", ""); d {
		case "float16", "bfloat16", "float32", "float64":
			// headroom plans precision itself: a cast between floats is the identity
			return mapped{layer: &nn.Activation{LayerName: name, Fn: "linear"}, out: x}
		default:
			f.unsupported("a cast to %s is not supported: headroom's tensors between layers are float", d)
			return mapped{}
		}
	}
	f.fail("internal: no mapping for operation %s", class)
	return mapped{}
}

// mathOp: the operands in order, tensors of one rank broadcast as NumPy
// does and number constants.
func mathOp(class, fn, name string, f *fields, in callIn, cs callSpec) mapped {
	var operands []*float64
	var shapes [][]int
	k := 0 // next tensor
	for i, n := range cs.slots {
		if c, isConst := cs.constants[i]; isConst {
			num, ok := c.(json.Number)
			x, err := num.Float64()
			if !ok || err != nil {
				f.unsupported("operation %s: constant %s is not a number", class, describe(c))
				return mapped{}
			}
			operands = append(operands, &x)
			continue
		}
		if n != 1 {
			f.fail("operation %s: argument %d holds %d tensors, want one", class, i, n)
			return mapped{}
		}
		operands = append(operands, nil)
		shapes = append(shapes, in.shapes[k])
		k++
	}
	if class == "Clip" {
		if len(operands) != 1 || operands[0] != nil {
			f.fail("operation Clip takes one tensor, got %d arguments", len(operands))
			return mapped{}
		}
		lo, hi := f.float("x_min", 0), f.float("x_max", 0)
		operands = append(operands, &lo, &hi)
	}
	if len(operands) != nn.MathArity(fn) {
		f.fail("operation %s takes %d operands, got %d", class, nn.MathArity(fn), len(operands))
		return mapped{}
	}
	if len(shapes) == 0 {
		f.unsupported("operation %s of constants alone: headroom takes tensors from other layers", class)
		return mapped{}
	}
	if fn == "power" && (operands[0] != nil || operands[1] == nil || !powerOK(*operands[1])) {
		f.unsupported("operation Power: headroom reads a tensor to a constant power (an integer up to 8, or ±0.5)")
		return mapped{}
	}
	out := slices.Clone(shapes[0])
	for _, s := range shapes[1:] {
		if len(s) != len(out) {
			f.unsupported("operation %s of tensors of ranks %d and %d is not supported: their batch dimensions would not line up", class, len(out)+1, len(s)+1)
			return mapped{}
		}
		for i := range out {
			switch {
			case s[i] == out[i] || s[i] == 1:
			case out[i] == 1:
				out[i] = s[i]
			default:
				f.fail("operation %s of tensors of shapes %v and %v, which do not broadcast", class, shapes[0], s)
				return mapped{}
			}
		}
	}
	l := &nn.Math{LayerName: name, Fn: fn}
	if slices.ContainsFunc(operands, func(o *float64) bool { return o != nil }) {
		l.Operands = operands
	}
	return mapped{layer: l, out: out}
}

func powerOK(p float64) bool {
	return p == 0.5 || p == -0.5 || (p == float64(int(p)) && p >= -8 && p <= 8)
}

// reduceOp: mean, sum, max, min over axis (counting the batch), keepdims.
func reduceOp(class, name string, f *fields, x []int) mapped {
	if !f.has("axis") {
		f.unsupported("operation %s over every axis reduces the batch too: not a layer's work in headroom", class)
		return mapped{}
	}
	if class == "Max" || class == "Min" {
		if f.has("initial") {
			f.unsupported("operation %s with initial is not supported", class)
		}
	}
	axes, keep := f.axes("axis", nil), f.boolean("keepdims", false)
	if f.err != nil {
		return mapped{}
	}
	rank := len(x) + 1
	reduced := make([]bool, rank)
	for _, a := range axes {
		if a < 0 {
			a += rank
		}
		if a < 1 || a >= rank {
			f.unsupported("operation %s over axis %v of an input of rank %d (batch included): headroom reduces axes other than the batch", class, axes, rank)
			return mapped{}
		}
		reduced[a] = true
	}
	var out []int
	for i, d := range x {
		switch {
		case !reduced[i+1]:
			out = append(out, d)
		case keep:
			out = append(out, 1)
		}
	}
	if len(out) == 0 {
		f.unsupported("operation %s leaves only the batch: headroom's layers give each example at least one value", class)
		return mapped{}
	}
	return mapped{layer: &nn.Reduce{LayerName: name, Fn: strings.ToLower(class), Axes: axes, KeepDims: keep}, out: out}
}

// reshapeOp: newshape counts the batch, which must be its -1.
func reshapeOp(name string, f *fields, x []int) mapped {
	v, _ := f.get("newshape")
	list, ok := v.([]any)
	if !ok || len(list) < 2 {
		f.unsupported("operation Reshape to %s: headroom reads a new shape that keeps the batch first, as (-1, ...)", describe(v))
		return mapped{}
	}
	if n, err := toInt(list[0]); err != nil || n != -1 {
		f.unsupported("operation Reshape to %s: headroom reads a new shape that keeps the batch first, as (-1, ...)", describe(v))
		return mapped{}
	}
	return reshape(name, &fields{m: map[string]any{"target_shape": list[1:]}}, x)
}

// transposeOp: axes count the batch, which must stay first.
func transposeOp(name string, f *fields, x []int) mapped {
	axes := f.axes("axes", nil)
	if f.err != nil {
		return mapped{}
	}
	if len(axes) != len(x)+1 || axes[0] != 0 {
		f.unsupported("operation Transpose with axes %v: headroom keeps the batch first (axes starting with 0)", axes)
		return mapped{}
	}
	dims := make([]any, len(axes)-1)
	for i, a := range axes[1:] {
		dims[i] = json.Number(itoa(a))
	}
	return permute(name, &fields{m: map[string]any{"dims": dims}}, x)
}

// squeezeOp: ExpandDims inserts an axis of size 1 at axis, Squeeze
// removes those of size 1 (all of them when axis is null); axes count the
// batch.
func squeezeOp(class, name string, f *fields, x []int) mapped {
	rank := len(x) + 1
	var out []int
	if class == "ExpandDims" {
		axes := f.axes("axis", nil)
		if f.err != nil || len(axes) != 1 {
			f.fail("axis: want one axis, got %v", axes)
			return mapped{}
		}
		a := axes[0]
		if a < 0 {
			a += rank + 1
		}
		if a < 1 || a > rank {
			f.unsupported("operation ExpandDims at axis %d of an input of rank %d (batch included): headroom keeps the batch first", axes[0], rank)
			return mapped{}
		}
		out = slices.Insert(slices.Clone(x), a-1, 1)
	} else {
		axes := f.axes("axis", nil)
		if f.err != nil {
			return mapped{}
		}
		drop := make([]bool, len(x))
		for i, d := range x {
			drop[i] = axes == nil && d == 1
		}
		for _, a := range axes {
			if a < 0 {
				a += rank
			}
			if a < 1 || a >= rank || x[a-1] != 1 {
				f.fail("operation Squeeze of axis %v of input %v: want axes of size 1 other than the batch", axes, x)
				return mapped{}
			}
			drop[a-1] = true
		}
		for i, d := range x {
			if !drop[i] {
				out = append(out, d)
			}
		}
		if len(out) == 0 {
			f.unsupported("operation Squeeze leaves only the batch: headroom's layers give each example at least one value")
			return mapped{}
		}
	}
	return mapped{layer: &nn.Reshape{LayerName: name, TargetShape: out}, out: out}
}

// axisOr returns key as written, or def.
func axisOr(f *fields, key string, def int) any {
	if v, ok := f.get(key); ok {
		return v
	}
	return json.Number(itoa(def))
}

// numberOr returns key as written, or the number def.
func numberOr(f *fields, key, def string) any {
	if v, ok := f.get(key); ok {
		return v
	}
	return json.Number(def)
}

func itoa(n int) string { return strconv.Itoa(n) }

func sortedNamedShapes(m map[string][][]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedInts(m map[int]any) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}
