package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// TestFusedPeriodicLeaves: BatchNormalization's chain, x·scale + shift then
// relu with per-channel leaves, gives the same bits fused as op by op, for
// periods that divide the chunk (staged once) and that do not, on one
// thread and split over three.
func TestFusedPeriodicLeaves(t *testing.T) {
	for _, tc := range []struct {
		shape   tensor.Shape
		threads int
	}{
		{tensor.Shape{4, 9, 16}, 1},
		{tensor.Shape{64, 33, 16}, 3},
		{tensor.Shape{32, 30, 48}, 3},
		{tensor.Shape{7, 5, 3}, 1},
	} {
		t.Run(fmt.Sprintf("%v/%d", tc.shape, tc.threads), func(t *testing.T) {
			fused := runChain(t, tc.shape, tc.threads, false)
			plain := runChain(t, tc.shape, tc.threads, true)
			for i := range plain {
				if math.Float32bits(fused[i]) != math.Float32bits(plain[i]) {
					t.Fatalf("element %d: fused %v, op by op %v", i, fused[i], plain[i])
				}
			}
		})
	}
}

func runChain(t *testing.T, shape tensor.Shape, threads int, noFusion bool) []float32 {
	t.Helper()
	c := shape[shape.Rank()-1]
	p, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Input("x", tensor.Float32, shape)
		scale := g.Input("scale", tensor.Float32, tensor.Shape{c})
		shift := g.Input("shift", tensor.Float32, tensor.Shape{c})
		y := graph.Relu(graph.Add(graph.Mul(x, scale), shift))
		return g, compile.Options{Target: cpu.New(threads), Outputs: []compile.Output{{Name: "y", Node: y}}, DisableFusion: noFusion}
	})
	if err != nil {
		t.Fatal(err)
	}
	fusedInstrs := 0
	for _, in := range p.Instrs {
		if in.Op == graph.OpFused {
			fusedInstrs++
		}
	}
	if (fusedInstrs == 1) == noFusion {
		t.Fatalf("%d fused instructions with fusion disabled: %v", fusedInstrs, noFusion)
	}
	e := runtime.NewEngine(cpu.New(threads), 0)
	defer e.Close()
	x, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, name := range []string{"x", "scale", "shift"} {
		in, _ := x.Input(name)
		for i, f := 0, in.Float32s(); i < len(f); i++ {
			f[i] = float32(rng.NormFloat64())
		}
	}
	if err := x.Run(); err != nil {
		t.Fatal(err)
	}
	y, _ := x.Output("y")
	return append([]float32(nil), y.Float32s()...)
}
