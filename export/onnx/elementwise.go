package onnx

import (
	"github.com/headroom-ml/headroom/graph"
)

// The elementwise ops (graph/elementwise.go): each is the ONNX op of the
// same meaning, broadcasting as NumPy does.
func init() {
	for op, onnxOp := range map[graph.Op]string{graph.OpNeg: "Neg", graph.OpExp: "Exp", graph.OpLog: "Log", graph.OpSqrt: "Sqrt",
		graph.OpRelu: "Relu", graph.OpSigmoid: "Sigmoid", graph.OpTanh: "Tanh", graph.OpErf: "Erf", graph.OpAbs: "Abs"} {
		register(op, rule{batch: batchSame, emit: unary(onnxOp)})
	}
	register(graph.OpCast, rule{batch: batchSame, emit: emitCast})
	for op, onnxOp := range map[graph.Op]string{graph.OpAdd: "Add", graph.OpSub: "Sub", graph.OpMul: "Mul", graph.OpDiv: "Div",
		graph.OpMaximum: "Max", graph.OpMinimum: "Min", graph.OpEqual: "Equal", graph.OpLess: "Less", graph.OpLessEqual: "LessOrEqual",
		graph.OpGreater: "Greater", graph.OpGreaterEqual: "GreaterOrEqual", graph.OpWhere: "Where"} {
		register(op, rule{batch: batchBroadcast, emit: broadcasting(onnxOp)})
	}
	register(graph.OpNotEqual, rule{batch: batchBroadcast, emit: emitNotEqual})
	registerNotExportable(trainingOnly, graph.OpReluGrad, graph.OpSigmoidGrad, graph.OpTanhGrad)
	registerNotExportable("a training step's random mask: dropout is the identity at inference", graph.OpDropoutMask)
	registerNotExportable("made by compile's fusion pass, never in a graph", graph.OpFused)
}

// unary exports an elementwise op of one operand as the ONNX op of the same
// meaning.
func unary(op string) func(*converter, *graph.Node) (string, error) {
	return func(c *converter, n *graph.Node) (string, error) {
		in, err := c.ins(n)
		if err != nil {
			return "", err
		}
		return c.node(op, "", in), nil
	}
}

// broadcasting exports an op that broadcasts its operands (ONNX broadcasts
// as NumPy does).
func broadcasting(op string) func(*converter, *graph.Node) (string, error) { return unary(op) }

func emitNotEqual(c *converter, n *graph.Node) (string, error) {
	in, err := c.ins(n)
	if err != nil {
		return "", err
	}
	return c.node("Not", "", []string{c.node("Equal", "equal", in)}), nil
}

func emitCast(c *converter, n *graph.Node) (string, error) {
	in, err := c.ins(n)
	if err != nil {
		return "", err
	}
	return c.node("Cast", "", in, attrI("to", int64(elemType(n.DType())))), nil
}
