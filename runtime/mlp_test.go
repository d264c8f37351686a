package runtime_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// mlpStep builds a 2-layer MLP training step: forward, backward and an SGD
// update written as graph ops. x: [B, D] -> relu(x·w1 + b1): [B, H] -> ·w2 + b2: [B, C].
func mlpStep(batch, d, h, c int, lr float64) (*graph.Graph, compile.Options) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{batch, d})
	y := g.Input("y", tensor.Int32, tensor.Shape{batch})
	g.PushScope("dense1")
	w1 := g.Param("dense1/w", tensor.Float32, tensor.Shape{d, h})
	b1 := g.Param("dense1/b", tensor.Float32, tensor.Shape{h})
	a := graph.Relu(graph.Add(graph.MatMul(x, w1), b1))
	g.PopScope()
	g.PushScope("dense2")
	w2 := g.Param("dense2/w", tensor.Float32, tensor.Shape{h, c})
	b2 := g.Param("dense2/b", tensor.Float32, tensor.Shape{c})
	logits := graph.Add(graph.MatMul(a, w2), b2)
	g.PopScope()
	g.PushScope("loss")
	loss := graph.ReduceMean(graph.SoftmaxCrossEntropy(logits, y))
	g.PopScope()
	params := []*graph.Node{w1, b1, w2, b2}
	grads := autodiff.Grad(loss, params...)
	g.SetPhase(graph.Update)
	g.PushScope("sgd")
	opt := compile.Options{Target: cpu.New(0), Name: "train", Outputs: []compile.Output{{Name: "loss", Node: loss}}}
	for i, p := range params {
		graph.Assign(p, graph.Sub(p, graph.MulScalar(grads[i], lr)))
		opt.Outputs = append(opt.Outputs, compile.Output{Name: "grad:" + p.Attr().Name, Node: grads[i], Grad: true})
	}
	g.PopScope()
	return g, opt
}

// teacherData returns n examples of dimension d labelled by the argmax of a
// fixed random linear teacher with c classes.
func teacherData(rng *rand.Rand, n, d, c int) ([]float32, []int32) {
	w := make([]float64, d*c)
	for i := range w {
		w[i] = rng.NormFloat64()
	}
	x := make([]float32, n*d)
	y := make([]int32, n)
	for i := 0; i < n; i++ {
		best, arg := math.Inf(-1), 0
		for j := 0; j < c; j++ {
			s := 0.0
			for k := 0; k < d; k++ {
				if j == 0 {
					x[i*d+k] = float32(rng.NormFloat64())
				}
				s += float64(x[i*d+k]) * w[k*c+j]
			}
			if s > best {
				best, arg = s, j
			}
		}
		y[i] = int32(arg)
	}
	return x, y
}

func heInit(rng *rand.Rand, e *runtime.Engine) {
	for _, v := range e.Variables() {
		if v.Role != graph.RoleParam || v.Shape.Rank() != 2 {
			continue // biases start at zero
		}
		std := math.Sqrt(2 / float64(v.Shape[0]))
		for i, f := 0, v.Tensor().Float32s(); i < len(f); i++ {
			f[i] = float32(rng.NormFloat64() * std)
		}
	}
}

func compileMLP(t *testing.T, batch int) *compile.Program {
	t.Helper()
	p, err := compile.Build(func() (*graph.Graph, compile.Options) { return mlpStep(batch, 16, 32, 4, 0.1) })
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMLPTrainsAndMatchesPlan(t *testing.T) {
	const batch, n = 32, 512
	p := compileMLP(t, batch)
	e := runtime.NewEngine(cpu.New(0), 0)
	defer e.Close()
	x, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	heInit(rng, e)
	xs, ys := teacherData(rng, n, 16, 4)
	xin, _ := x.Input("x")
	yin, _ := x.Input("y")
	lossOut, _ := x.Output("loss")

	epochLoss := func() float64 {
		sum := 0.0
		for i := 0; i < n; i += batch {
			copy(xin.Float32s(), xs[i*16:(i+batch)*16])
			copy(yin.Int32s(), ys[i:i+batch])
			if err := x.Run(); err != nil {
				t.Fatal(err)
			}
			sum += float64(lossOut.Float32s()[0])
		}
		return sum / float64(n/batch)
	}
	first := epochLoss()
	var last float64
	for ep := 0; ep < 60; ep++ {
		last = epochLoss()
	}
	t.Logf("mean loss: first epoch %.4f, last epoch %.4f (%.1fx)", first, last, first/last)
	if !(last*10 <= first) {
		t.Errorf("loss fell from %.4f to %.4f: want at least 10x", first, last)
	}

	// The ledger's measured peak is the plan's peak, byte for byte.
	if got, want := e.Ledger().Peak(), p.Plan.Peak; got != want {
		t.Errorf("ledger peak %d B, plan peak %d B", got, want)
	}
	if got, want := e.Ledger().Live(), p.Plan.Peak; got != want {
		t.Errorf("ledger live %d B, plan peak %d B", got, want)
	}
	if got, want := e.Ledger().Totals(), p.Plan.Totals; got != want {
		t.Errorf("ledger totals %v, plan totals %v", got, want)
	}

	// A step after warm-up allocates nothing, and the ledger does not grow.
	before := e.Ledger().Snapshot()
	allocs := testing.AllocsPerRun(50, func() {
		if err := x.Run(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AllocsPerRun(step) = %v, want 0", allocs)
	}
	if g := e.Ledger().Snapshot().Growth(before); len(g) != 0 {
		t.Errorf("ledger grew during steps: %v", g)
	}
}

func TestMLPBudget(t *testing.T) {
	p := compileMLP(t, 32)
	peak := p.Plan.Peak

	// Compiling under a budget one byte short fails before anything is taken.
	_, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g, opt := mlpStep(32, 16, 32, 4, 0.1)
		opt.Budget = peak - 1
		return g, opt
	})
	var oom *mem.OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("compile with budget peak-1: got %v, want *mem.OOMError", err)
	}
	checkOOMMessage(t, err.Error())

	// Reserving under a ledger budget one byte short fails and takes nothing.
	e := runtime.NewEngine(cpu.New(0), peak-1)
	if _, err := e.Load(p); !errors.As(err, &oom) {
		t.Fatalf("load with budget peak-1: got %v, want *mem.OOMError", err)
	} else {
		checkOOMMessage(t, err.Error())
	}
	if live := e.Ledger().Live(); live != 0 {
		t.Errorf("after a failed load the ledger holds %d B, want 0", live)
	}
	e.Close()

	// Exactly at the peak, it loads and runs.
	e = runtime.NewEngine(cpu.New(0), peak)
	defer e.Close()
	x, err := e.Load(p)
	if err != nil {
		t.Fatalf("load with budget = peak: %v", err)
	}
	defer x.Close()
	if err := x.Run(); err != nil {
		t.Fatal(err)
	}
	if got := e.Ledger().Peak(); got != peak {
		t.Errorf("ledger peak %d, want %d", got, peak)
	}
}

func checkOOMMessage(t *testing.T, msg string) {
	t.Helper()
	for _, want := range []string{"largest live buffers", "by category", "dense1/", "param=", "remedy"} {
		if !strings.Contains(msg, want) {
			t.Errorf("OOM message lacks %q:\n%s", want, msg)
		}
	}
}

func TestBadLabelIsAnError(t *testing.T) {
	p := compileMLP(t, 4)
	e := runtime.NewEngine(cpu.New(0), 0)
	defer e.Close()
	x, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	yin, _ := x.Input("y")
	yin.Int32s()[2] = 9
	err = x.Run()
	if err == nil || !strings.Contains(err.Error(), "softmax_cross_entropy") || !strings.Contains(err.Error(), "example 2") {
		t.Fatalf("got %v, want an error naming softmax_cross_entropy and example 2", err)
	}
}
