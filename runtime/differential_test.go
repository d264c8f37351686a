package runtime_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/runtime"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// randomStep builds a random graph over [4, 6] values: elementwise chains,
// broadcasting, views, reductions, matmuls, constants (so folding has work)
// and assigns to variables (so in-place writes into variables are tried).
func randomStep(rng *rand.Rand) func() (*graph.Graph, compile.Options) {
	seed := rng.Uint64()
	return func() (*graph.Graph, compile.Options) {
		r := rand.New(rand.NewPCG(seed, 3))
		g := graph.New()
		f := tensor.Float64
		x := g.Input("x", f, tensor.Shape{4, 6})
		vars := []*graph.Node{g.Param("v0", f, tensor.Shape{4, 6}), g.Param("v1", f, tensor.Shape{4, 6})}
		pool := []*graph.Node{x, vars[0], vars[1], g.Full(0.5, f, tensor.Shape{6}), g.Scalar(2, f)}
		pick := func() *graph.Node { return pool[r.IntN(len(pool))] }
		full := func() *graph.Node { // a [4, 6] value
			for {
				if n := pick(); n.Shape().Equal(tensor.Shape{4, 6}) {
					return n
				}
			}
		}
		// a step guard as mixed float16 training builds one: a Bool scalar
		// computed from the data (true or false depending on x), or a
		// constant that folding resolves
		guard := graph.Greater(graph.ReduceSum(graph.ReduceSum(x, 1), 0), g.Scalar(r.NormFloat64(), f))
		if r.IntN(4) == 0 {
			guard = graph.Less(g.Scalar(1, f), g.Scalar(float64(r.IntN(3)), f))
		}
		if r.IntN(2) == 0 {
			g.SetGuard(guard) // every assign below keeps the old value unless guard holds
		}
		assigned := map[*graph.Node]bool{}
		for i := 0; i < 14; i++ {
			var n *graph.Node
			if r.IntN(6) == 0 { // assign a variable mid-graph: later nodes may read values derived from it, not it
				v := vars[r.IntN(len(vars))]
				if !assigned[v] {
					assigned[v] = true
					graph.Assign(v, full())
					kept := pool[:0]
					for _, p := range pool {
						if p != v {
							kept = append(kept, p)
						}
					}
					pool = kept
				}
			}
			switch r.IntN(10) {
			case 0:
				n = graph.Tanh(full())
			case 1:
				n = graph.Relu(full())
			case 2:
				n = graph.Add(full(), pick())
			case 3:
				n = graph.Mul(pick(), full())
			case 4:
				n = graph.Sub(full(), graph.ReduceMeanKeep(full(), 1))
			case 5:
				n = graph.Reshape(graph.Transpose(graph.Reshape(full(), 6, 4)), 4, 6)
			case 6:
				n = graph.MatMulT(full(), full(), false, true) // [4, 4]
				n = graph.MatMul(n, full())                    // [4, 6]
			case 7:
				n = graph.Sigmoid(graph.Neg(full()))
			case 8:
				n = graph.Maximum(full(), graph.Mul(pick(), g.Scalar(0.1, f)))
			case 9:
				n = graph.Where(guard, graph.Tanh(full()), graph.Add(full(), pick()))
			}
			pool = append(pool, n)
		}
		opt := compile.Options{Target: cpu.New(0)}
		for i := 0; i < 3; i++ {
			opt.Outputs = append(opt.Outputs, compile.Output{Name: fmt.Sprint("out", i), Node: graph.ReduceSum(full(), 1)})
		}
		for _, v := range vars {
			if !assigned[v] && r.IntN(3) > 0 {
				graph.Assign(v, full())
			}
		}
		return g, opt
	}
}

func runOnce(t *testing.T, build func() (*graph.Graph, compile.Options), plain bool, xv []float64) map[string][]float64 {
	t.Helper()
	p, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g, opt := build()
		opt.DisableInPlace, opt.DisableFolding, opt.DisableFusion = plain, plain, plain
		return g, opt
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Plan.Validate(); err != nil {
		t.Fatal(err)
	}
	e := runtime.NewEngine(cpu.New(0), 0)
	defer e.Close()
	x, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	in, _ := x.Input("x")
	copy(in.Float64s(), xv)
	for i, v := range e.Variables() {
		for j, f := 0, v.Tensor().Float64s(); j < len(f); j++ {
			f[j] = math.Sin(float64(i*31+j)) * 1.5
		}
	}
	if err := x.Run(); err != nil {
		t.Fatal(err)
	}
	res := map[string][]float64{}
	for _, s := range p.Outputs {
		o, _ := x.Output(s.Name)
		res[s.Name] = append([]float64(nil), o.Float64s()...)
	}
	for _, v := range e.Variables() {
		res[v.Name] = append([]float64(nil), v.Tensor().Float64s()...)
	}
	return res
}

// TestOptimizationsPreserveResults: in-place reuse, assigns into variables
// and constant folding change where values live, never what they are.
func TestOptimizationsPreserveResults(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	xv := make([]float64, 24)
	for i := range xv {
		xv[i] = rng.NormFloat64()
	}
	for trial := 0; trial < 300; trial++ {
		build := randomStep(rng)
		want := runOnce(t, build, true, xv)
		got := runOnce(t, build, false, xv)
		for k, w := range want {
			gv := got[k]
			for i := range w {
				if math.Float64bits(gv[i]) != math.Float64bits(w[i]) && !(math.IsNaN(gv[i]) && math.IsNaN(w[i])) {
					t.Fatalf("trial %d: %s[%d] = %v optimized, %v plain", trial, k, i, gv[i], w[i])
				}
			}
		}
	}
}
