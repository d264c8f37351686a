package runtime_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/runtime"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// TestFusedChainsSplitAcrossThreads: a fused chain over a large tensor with
// full, bias (periodic) and scalar leaves gives the same bits on 1 and 3
// threads, and the 3-thread plan reserves registers for each thread.
func TestFusedChainsSplitAcrossThreads(t *testing.T) {
	const rows, cols = 300, 1001 // not a multiple of the chunk: ragged parts
	build := func(threads int) (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Input("x", tensor.Float32, tensor.Shape{rows, cols})
		b := g.Input("b", tensor.Float32, tensor.Shape{cols})
		s := g.Input("s", tensor.Float32, nil)
		y := graph.Tanh(graph.Mul(graph.Add(x, b), s))
		y = graph.Sub(graph.Relu(y), graph.MulScalar(x, 0.25))
		return g, compile.Options{Target: cpu.New(threads), Outputs: []compile.Output{{Name: "y", Node: y}}}
	}
	run := func(threads int) ([]float32, *compile.Program) {
		p, err := compile.Build(func() (*graph.Graph, compile.Options) { return build(threads) })
		if err != nil {
			t.Fatal(err)
		}
		e := runtime.NewEngine(cpu.New(0), 0)
		defer e.Close()
		x, err := e.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		rng := rand.New(rand.NewPCG(1, 2))
		for _, name := range []string{"x", "b", "s"} {
			in, _ := x.Input(name)
			for i, f := 0, in.Float32s(); i < len(f); i++ {
				f[i] = float32(rng.NormFloat64())
			}
		}
		for i := 0; i < 3; i++ {
			if err := x.Run(); err != nil {
				t.Fatal(err)
			}
		}
		y, _ := x.Output("y")
		return append([]float32(nil), y.Float32s()...), p
	}
	one, _ := run(1)
	three, p := run(3)
	fused := 0
	for _, in := range p.Instrs {
		if in.Op == graph.OpFused {
			fused++
			if in.Fused.Threads != 3 {
				t.Errorf("fused chain planned for %d threads, want 3", in.Fused.Threads)
			}
		}
	}
	if fused != 1 || rows*cols < cpu.ParallelMin {
		t.Fatalf("%d fused instructions over %d elements: the test does not exercise the split", fused, rows*cols)
	}
	for i := range one {
		if math.Float32bits(one[i]) != math.Float32bits(three[i]) {
			t.Fatalf("element %d: %v on 3 threads, %v on 1", i, three[i], one[i])
		}
	}
}
