package keras

import (
	"strings"
)

// tf.keras 2 records Python arithmetic on tensors (x + 3.0, x * y) and
// tf.* calls in a functional model as TFOpLambda layers: the config names
// the TensorFlow function ("__operators__.add", "math.reduce_mean"); the
// call's first tensor is its first argument and its keyword arguments the
// others (y, axis, keepdims, shape, perm), a tensor or a constant. Those
// whose function is listed here map as the Keras 3 operation of the same
// meaning (ops.go); other functions are refused by name.

// tfOps maps a TensorFlow function onto the Keras 3 operation class that
// computes the same, and the names of its keyword arguments there.
var tfOps = map[string]struct {
	class string
	args  map[string]string // TensorFlow keyword -> the operation's config key
}{
	"__operators__.add": {class: "Add"}, "math.add": {class: "Add"},
	"math.subtract": {class: "Subtract"}, "__operators__.sub": {class: "Subtract"},
	"math.multiply": {class: "Multiply"}, "math.truediv": {class: "TrueDivide"}, "math.divide": {class: "TrueDivide"},
	"math.maximum": {class: "Maximum"}, "math.minimum": {class: "Minimum"}, "math.pow": {class: "Power"},
	"math.negative": {class: "Negative"}, "math.abs": {class: "Absolute"}, "math.exp": {class: "Exp"},
	"math.log": {class: "Log"}, "math.sqrt": {class: "Sqrt"}, "math.square": {class: "Square"},
	"math.reciprocal": {class: "Reciprocal"}, "math.erf": {class: "Erf"},
	"nn.relu": {class: "Relu"}, "nn.relu6": {class: "Relu6"}, "math.sigmoid": {class: "Sigmoid"}, "nn.sigmoid": {class: "Sigmoid"},
	"math.tanh": {class: "Tanh"}, "nn.tanh": {class: "Tanh"}, "nn.silu": {class: "Silu"}, "nn.swish": {class: "Silu"},
	"math.softplus": {class: "Softplus"}, "nn.softplus": {class: "Softplus"},
	"nn.gelu":             {class: "Gelu", args: map[string]string{"approximate": "approximate"}},
	"nn.softmax":          {class: "Softmax", args: map[string]string{"axis": "axis"}},
	"math.reduce_mean":    {class: "Mean", args: map[string]string{"axis": "axis", "keepdims": "keepdims"}},
	"math.reduce_sum":     {class: "Sum", args: map[string]string{"axis": "axis", "keepdims": "keepdims"}},
	"math.reduce_max":     {class: "Max", args: map[string]string{"axis": "axis", "keepdims": "keepdims"}},
	"math.reduce_min":     {class: "Min", args: map[string]string{"axis": "axis", "keepdims": "keepdims"}},
	"reshape":             {class: "Reshape", args: map[string]string{"shape": "newshape"}},
	"compat.v1.transpose": {class: "Transpose", args: map[string]string{"perm": "axes"}},
	"transpose":           {class: "Transpose", args: map[string]string{"perm": "axes"}},
	"expand_dims":         {class: "ExpandDims", args: map[string]string{"axis": "axis"}},
	"compat.v1.squeeze":   {class: "Squeeze", args: map[string]string{"axis": "axis"}},
	"squeeze":             {class: "Squeeze", args: map[string]string{"axis": "axis"}},
}

// tfOpFunction returns a TFOpLambda's function with the prefixes Keras
// writes ("tf." in some versions) taken off.
func tfOpFunction(f *fields) string {
	return strings.TrimPrefix(f.str("function", ""), "tf.")
}

// tfOpLambda maps a TFOpLambda call: the first tensor is the function's
// first argument; a binary function's y (a tensor or a number) its
// second; the other keyword arguments are its settings.
func tfOpLambda(name string, f *fields, in callIn) mapped {
	fn := tfOpFunction(f)
	op, ok := tfOps[fn]
	if !ok {
		f.unsupported("TFOpLambda of tf.%s is not supported: headroom reads the TensorFlow functions of Python arithmetic, activations, reductions and reshapes", fn)
		return mapped{}
	}
	if len(in.shapes) != 1 {
		f.unsupported("TFOpLambda of tf.%s with %d positional tensors: headroom reads one, and the others as keyword arguments", fn, len(in.shapes))
		return mapped{}
	}
	conf := map[string]any{"name": name}
	cs := callSpec{slots: []int{1}}
	shapes := in.shapes
	var feed []arg
	kw := in.kw
	if kw == nil {
		kw = &fields{m: map[string]any{}}
	}
	for k, v := range kw.m {
		if k == "name" || v == nil {
			continue
		}
		if k == "y" {
			cs.constants = map[int]any{1: v}
			cs.slots = append(cs.slots, 0)
			continue
		}
		key, ok := op.args[k]
		if !ok {
			f.unsupported("TFOpLambda of tf.%s with argument %s is not supported", fn, k)
			return mapped{}
		}
		conf[key] = v
	}
	for k, ts := range in.named {
		if k != "y" || len(ts) != 1 {
			f.unsupported("TFOpLambda of tf.%s with tensor argument %s is not supported", fn, k)
			return mapped{}
		}
		shapes = append(shapes, ts[0])
		cs.slots = append(cs.slots, 1)
		feed = []arg{{pos: 0}, {key: "y"}}
	}
	of := &fields{m: conf, keras2: f.keras2}
	m := mapOperation(op.class, name, of, callIn{shapes: shapes, named: map[string][][]int{}}, cs)
	if of.err != nil {
		f.err = of.err
		return mapped{}
	}
	m.feed = feed
	return m
}
