package compile_test

import (
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// TestAccumulationIsNotDelayed: summing contributions that arrive one by
// one, each from a product the fusion pass cannot join (the weight
// gradients of an unrolled recurrence), keeps O(1) of them live: the sum
// is not fused into one instruction at the end that would hold every
// contribution at once. A group still joins across one later operand (a
// relu's gradient added to a product's): that fusion pays.
func TestAccumulationIsNotDelayed(t *testing.T) {
	const steps, n = 12, 128
	p, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Input("x", tensor.Float32, tensor.Shape{n, n})
		var acc *graph.Node
		for i := 0; i < steps; i++ {
			c := graph.MatMul(x, graph.AddScalar(x, float64(i))) // [n, n], not fusable
			if acc == nil {
				acc = c
			} else {
				acc = graph.Add(acc, c)
			}
		}
		return g, compile.Options{Target: cpu.New(0), Outputs: []compile.Output{{Name: "sum", Node: acc}}}
	})
	if err != nil {
		t.Fatal(err)
	}
	one := int64(n * n * 4)
	if p.Plan.ArenaBytes > 4*one {
		t.Errorf("arena %d B for a sum of %d products of %d B: want at most 4 of them live, not all", p.Plan.ArenaBytes, steps, one)
	}

	q, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Input("x", tensor.Float32, tensor.Shape{n, n})
		dy := g.Input("dy", tensor.Float32, tensor.Shape{n, n})
		r := graph.ReluGrad(graph.Neg(x), dy)
		out := graph.Add(r, graph.MatMul(x, dy))
		return g, compile.Options{Target: cpu.New(0), Outputs: []compile.Output{{Name: "out", Node: out}}}
	})
	if err != nil {
		t.Fatal(err)
	}
	fused := 0
	for _, it := range q.Instrs {
		if it.Op == graph.OpFused {
			fused = len(it.Fused.Steps)
		}
	}
	if fused != 3 {
		t.Errorf("program %v: want neg, relu_grad and add fused in one instruction across the product", instrs(q))
	}
}
