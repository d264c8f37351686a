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

// TestElementwiseSplit: large elementwise ops that run alone (fusion off)
// are split over the kernels' threads; each gives the same bits on one
// thread and on three, and the value of its formula (within float32
// rounding), for sizes that do not divide evenly, allocating nothing.
func TestElementwiseSplit(t *testing.T) {
	ops := []struct {
		name string
		f    func(a, b *graph.Node) *graph.Node
		want func(a, b float64) float64
	}{
		{"mul", graph.Mul, func(a, b float64) float64 { return a * b }},
		{"sub", graph.Sub, func(a, b float64) float64 { return a - b }},
		{"mul_scalar", func(a, b *graph.Node) *graph.Node { return graph.MulScalar(a, 0.5) }, func(a, b float64) float64 { return a * 0.5 }},
		{"relu_grad", graph.ReluGrad, func(a, b float64) float64 { return map[bool]float64{true: b, false: 0}[a > 0] }},
		{"tanh", func(a, b *graph.Node) *graph.Node { return graph.Tanh(a) }, func(a, b float64) float64 { return math.Tanh(a) }},
		{"exp", func(a, b *graph.Node) *graph.Node { return graph.Exp(a) }, func(a, b float64) float64 { return math.Exp(a) }},
	}
	for _, op := range ops {
		for _, shape := range []tensor.Shape{{301, 223}, {7, 5}} {
			t.Run(fmt.Sprintf("%s/%v", op.name, shape), func(t *testing.T) {
				a, b := randomInput(shape, 1), randomInput(shape, 2)
				one := runOp(t, 1, shape, op.f, a, b)
				three := runOp(t, 3, shape, op.f, a, b)
				for i := range one {
					if math.Float32bits(one[i]) != math.Float32bits(three[i]) {
						t.Fatalf("element %d: %v on one thread, %v on three", i, one[i], three[i])
					}
					w := op.want(float64(a[i]), float64(b[i]))
					if d := math.Abs(float64(three[i]) - w); d > 1e-6*math.Max(1, math.Abs(w)) {
						t.Fatalf("element %d: got %v, want %v", i, three[i], w)
					}
				}
			})
		}
	}
}

func randomInput(shape tensor.Shape, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	f := make([]float32, shape.Size())
	for i := range f {
		f[i] = float32(rng.NormFloat64())
	}
	return f
}

// runOp runs f(a, b) on a host backend of threads threads.
func runOp(t *testing.T, threads int, shape tensor.Shape, f func(a, b *graph.Node) *graph.Node, a, b []float32) []float32 {
	t.Helper()
	host := cpu.New(threads)
	defer host.Close()
	p, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Input("a", tensor.Float32, shape)
		y := g.Input("b", tensor.Float32, shape)
		return g, compile.Options{Target: host, Outputs: []compile.Output{{Name: "y", Node: f(x, y)}}, DisableFusion: true}
	})
	if err != nil {
		t.Fatal(err)
	}
	e := runtime.NewEngine(host, 0)
	defer e.Close()
	x, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for name, v := range map[string][]float32{"a": a, "b": b} {
		if in, err := x.Input(name); err == nil {
			copy(in.Float32s(), v)
		}
	}
	if err := x.Run(); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(3, func() { x.Run() }); allocs != 0 { // split or not, a step allocates nothing
		t.Errorf("AllocsPerRun(Run) = %v on %d threads, want 0", allocs, threads)
	}
	y, _ := x.Output("y")
	return append([]float32(nil), y.Float32s()...)
}
