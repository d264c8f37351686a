package compile_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// partial is the host target without one op on one operand dtype (any, when
// in is Invalid); it counts the calls that plan a program.
type partial struct {
	*cpu.Target
	op      graph.Op
	in      tensor.DType
	planned int
}

func (p *partial) Name() string { return "partial" }

func (p *partial) Supports(op graph.Op, dtype, in tensor.DType) bool {
	if op == p.op && (p.in == tensor.Invalid || in == p.in) {
		return false
	}
	return p.Target.Supports(op, dtype, in)
}

func (p *partial) Lower(it *compile.Instr) int64 { p.planned++; return p.Target.Lower(it) }

func (p *partial) Evaluate(it *compile.Instr, bufs [][]byte) error {
	p.planned++
	return p.Target.Evaluate(it, bufs)
}

// TestUnsupportedOp: a graph with an op its target does not run is refused
// before anything is folded or planned, with an error naming the op, its
// owner, its dtypes and the target; the graph compiles where the target
// lacks only what the graph does not use.
func TestUnsupportedOp(t *testing.T) {
	build := func(g *graph.Graph) *graph.Node {
		x := g.Input("x", tensor.Float32, tensor.Shape{4, 8})
		idx := g.Input("idx", tensor.Int32, tensor.Shape{4})
		h := dense(g, "dense", x, 3)
		g.PushScope("head")
		defer g.PopScope()
		mask := graph.Cast(graph.Less(idx, g.Scalar(2, tensor.Int32)), tensor.Float32)
		// softmax of constants: folded, unless refused first
		bias := graph.Softmax(g.Full(1, tensor.Float32, tensor.Shape{3}))
		return graph.Add(graph.Mul(graph.Softmax(h), graph.Reshape(mask, 4, 1)), bias)
	}
	cases := []struct {
		name string
		op   graph.Op
		in   tensor.DType
		want string // "" compiles; else the op's error names this owner
	}{
		{"no softmax", graph.OpSoftmax, tensor.Invalid, "head/softmax"},
		{"no comparison of int32", graph.OpLess, tensor.Int32, "head/less"},
		{"no comparison of float64", graph.OpLess, tensor.Float64, ""},
		{"no matmul", graph.OpMatMul, tensor.Invalid, "dense/matmul"},
		{"no conv2d", graph.OpConv2D, tensor.Invalid, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := &partial{Target: cpu.New(1), op: c.op, in: c.in}
			g := graph.New()
			y := build(g)
			_, err := compile.Compile(g, compile.Options{Target: target, Outputs: []compile.Output{{Name: "y", Node: y}}})
			if c.want == "" {
				if err != nil {
					t.Fatalf("got %v, want the graph compiled", err)
				}
				return
			}
			var ue *compile.UnsupportedError
			if !errors.As(err, &ue) {
				t.Fatalf("got %v (%T), want a *compile.UnsupportedError", err, err)
			}
			if ue.Op != c.op || ue.Owner != c.want || ue.Target != "partial" || ue.DType == tensor.Invalid {
				t.Errorf("got %+v, want op %s, owner %s, target partial", *ue, c.op, c.want)
			}
			for _, s := range []string{"partial", c.op.String(), c.want, ue.DType.String(), ue.InDType.String()} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
			if target.planned != 0 {
				t.Errorf("the target lowered or evaluated %d instructions before the refusal, want none", target.planned)
			}
		})
	}
}
