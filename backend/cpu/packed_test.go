package cpu_test

import (
	"math"
	"testing"
	"time"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// stepsOf is T products by one weight u [k, n] and T by its transpose, as
// an unrolled recurrence's forward and backward passes have them: y_t =
// x_t·u and z_t = y_t·uᵀ, with y and z concatenated.
func stepsOf(target compile.Target, T, B, k, n int) func() (*graph.Graph, compile.Options) {
	return func() (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Input("x", tensor.Float32, tensor.Shape{T, B, k})
		u := g.Param("u", tensor.Float32, tensor.Shape{k, n})
		ys, zs := make([]*graph.Node, T), make([]*graph.Node, T)
		for t := range T {
			xt := graph.Reshape(graph.Slice(x, []int{t, 0, 0}, []int{t + 1, B, k}), B, k)
			ys[t] = graph.MatMul(xt, u)
		}
		for t := range T {
			zs[t] = graph.MatMulT(ys[t], u, false, true)
		}
		return g, compile.Options{Target: target, Outputs: []compile.Output{
			{Name: "y", Node: graph.Concat(0, ys...)}, {Name: "z", Node: graph.Concat(0, zs...)}}}
	}
}

// TestPackedWeights runs products that share one packing of their weight
// (packed.go): under the rule and measure they run prepacked, one packing
// per group, and give Sgemm's bits; a forced product algorithm runs what
// is forced; planned == measured either way.
func TestPackedWeights(t *testing.T) {
	const T, B, k, n = 9, 5, 40, 70
	for _, mode := range []string{"rule", "measure", "tiles1"} {
		t.Run(mode, func(t *testing.T) {
			host := cpu.New(2)
			defer host.Close()
			c, err := cpu.NewChoices(mode, "", true)
			if err != nil {
				t.Fatal(err)
			}
			host.SetChoices(c)
			p, err := compile.Build(stepsOf(host, T, B, k, n))
			if err != nil {
				t.Fatal(err)
			}
			e := runtime.NewEngine(host, 0)
			defer e.Close()
			ex, err := e.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			defer ex.Close()
			x, _ := ex.Input("x")
			v, _ := e.Variable("u")
			xs, us := x.Float32s(), v.Tensor().Float32s()
			for i := range xs {
				xs[i] = float32(math.Sin(float64(i)))
			}
			for i := range us {
				us[i] = float32(math.Cos(float64(3 * i)))
			}
			names, err := ex.RunTimed(make([]time.Duration, len(p.Instrs)))
			if err != nil {
				t.Fatal(err)
			}
			prepacked := 0
			for i, in := range p.Instrs {
				if in.Op == graph.OpMatMul && names[i] == "prepacked" {
					prepacked++
				}
			}
			if want := map[bool]int{true: 2 * T, false: 0}[mode != "tiles1"]; prepacked != want {
				t.Errorf("%d products prepacked, want %d (kernels %v)", prepacked, want, names)
			}
			if planned, measured := p.Plan.Peak, e.Ledger().Peak(); planned != measured {
				t.Errorf("planned %d bytes, measured %d", planned, measured)
			}
			// the same bits as Sgemm, step by step
			yo, _ := ex.Output("y")
			zo, _ := ex.Output("z")
			ys, zs := yo.Float32s(), zo.Float32s()
			for s := range T {
				y := kernels.Sgemm(make([]float32, B*n), xs[s*B*k:(s+1)*B*k], us, B, n, k, false, false, false)
				z := kernels.Sgemm(make([]float32, B*k), y, us, B, k, n, false, true, false)
				for i := range y {
					if math.Float32bits(y[i]) != math.Float32bits(ys[s*B*n+i]) && mode != "tiles1" {
						t.Fatalf("step %d: y[%d] = %v, Sgemm gives %v", s, i, ys[s*B*n+i], y[i])
					}
					if d := math.Abs(float64(y[i] - ys[s*B*n+i])); d > 1e-4*max(1, math.Abs(float64(y[i]))) {
						t.Fatalf("step %d: y[%d] = %v, Sgemm gives %v", s, i, ys[s*B*n+i], y[i])
					}
				}
				for i := range z {
					if math.Float32bits(z[i]) != math.Float32bits(zs[s*B*k+i]) && mode != "tiles1" {
						t.Fatalf("step %d: z[%d] = %v, Sgemm gives %v", s, i, zs[s*B*k+i], z[i])
					}
				}
			}
			// a new weight is packed again on the next run
			for i := range us {
				us[i] = -us[i]
			}
			if err := ex.Run(); err != nil {
				t.Fatal(err)
			}
			yo, _ = ex.Output("y")
			y := kernels.Sgemm(make([]float32, B*n), xs[:B*k], us, B, n, k, false, false, false)
			for i := range y {
				if d := math.Abs(float64(y[i] - yo.Float32s()[i])); d > 1e-4*max(1, math.Abs(float64(y[i]))) {
					t.Fatalf("after the weight changed: y[%d] = %v, Sgemm gives %v", i, yo.Float32s()[i], y[i])
				}
			}
		})
	}
}

// TestMeasureBeforeFirstRun checks that choices are timed before step 1
// only: a program loaded on a backend before any of its programs ran has
// its products timed; one loaded after (a re-plan in the middle of a run)
// times nothing and runs by the rule; a new backend with the same choices
// times it.
func TestMeasureBeforeFirstRun(t *testing.T) {
	c, err := cpu.NewChoices("measure", "", true)
	if err != nil {
		t.Fatal(err)
	}
	product := func(host *cpu.Target, m int) func() (*graph.Graph, compile.Options) {
		return func() (*graph.Graph, compile.Options) {
			g := graph.New()
			x := g.Input("x", tensor.Float32, tensor.Shape{m, 128})
			u := g.Param("u", tensor.Float32, tensor.Shape{128, 256})
			return g, compile.Options{Target: host, Outputs: []compile.Output{{Name: "y", Node: graph.Relu(graph.MatMul(x, u))}}}
		}
	}
	load := func(host *cpu.Target, e *runtime.Engine, m int) *runtime.Executable {
		t.Helper()
		p, err := compile.Build(product(host, m))
		if err != nil {
			t.Fatal(err)
		}
		ex, err := e.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
	// backend returns a new host backend with the choices c and its engine
	backend := func() (*cpu.Target, *runtime.Engine) {
		host := cpu.New(2)
		host.SetChoices(c)
		e := runtime.NewEngine(host, 0)
		t.Cleanup(func() { e.Close(); host.Close() })
		return host, e
	}
	host, e := backend()
	first := load(host, e, 64) // products that split over two threads: two candidates at least in every build
	defer first.Close()
	if _, timed := c.Spent(); timed != 1 {
		t.Fatalf("before a run: %d shapes timed, want 1", timed)
	}
	if err := first.Run(); err != nil {
		t.Fatal(err)
	}
	later := load(host, e, 96)
	defer later.Close()
	if _, timed := c.Spent(); timed != 1 {
		t.Errorf("a program loaded after a run timed %d shapes, want none", timed-1)
	}
	names, err := later.RunTimed(make([]time.Duration, 2))
	if err != nil {
		t.Fatal(err)
	}
	if names[0] != kernels.MatMulPacked.String() {
		t.Errorf("the product loaded after a run ran %q, want the rule's %q", names[0], kernels.MatMulPacked)
	}
	fresh, e2 := backend()
	again := load(fresh, e2, 96)
	defer again.Close()
	if _, timed := c.Spent(); timed != 2 {
		t.Errorf("a new backend's first program timed %d new shapes, want 1", timed-1)
	}
}
