package nn_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// engine is a CPU engine that programs built in tests load onto; programs
// on one engine share variables by name.
type engine struct {
	t *testing.T
	e *runtime.Engine
}

func newEngine(t *testing.T) *engine {
	t.Helper()
	e := runtime.NewEngine(cpu.New(0), 0)
	t.Cleanup(e.Close)
	return &engine{t: t, e: e}
}

// program is a loaded executable.
type program struct {
	t *testing.T
	x *runtime.Executable
}

// load compiles build's graph and loads it (the executable closes with the
// test, before the engine).
func (en *engine) load(build func() (*graph.Graph, compile.Options)) *program {
	t := en.t
	t.Helper()
	p, err := compile.Build(build)
	if err != nil {
		t.Fatal(err)
	}
	x, err := en.e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return &program{t: t, x: x}
}

// set fills the named input with vals (converted to its dtype).
func (p *program) set(name string, vals []float64) {
	p.t.Helper()
	in, err := p.x.Input(name)
	if err != nil {
		p.t.Fatal(err)
	}
	if in.Len() != len(vals) {
		p.t.Fatalf("input %q has %d elements, got %d values", name, in.Len(), len(vals))
	}
	for i, v := range vals {
		in.SetFloat64At(i, v)
	}
}

func (p *program) run() {
	p.t.Helper()
	if err := p.x.Run(); err != nil {
		p.t.Fatal(err)
	}
}

// get returns the named output as float64s, and its shape.
func (p *program) get(name string) ([]float64, tensor.Shape) {
	p.t.Helper()
	o, err := p.x.Output(name)
	if err != nil {
		p.t.Fatal(err)
	}
	return float64s(o), o.Shape()
}

func float64s(t tensor.Tensor) []float64 {
	out := make([]float64, t.Len())
	for i := range out {
		out[i] = t.Float64At(i)
	}
	return out
}

// variable returns the engine's variable name as float64s.
func (en *engine) variable(name string) []float64 {
	en.t.Helper()
	v, ok := en.e.Variable(name)
	if !ok {
		en.t.Fatalf("engine has no variable %q", name)
	}
	return float64s(v.Tensor())
}

// setVariable fills the engine's variable name with vals.
func (en *engine) setVariable(name string, vals []float64) {
	en.t.Helper()
	v, ok := en.e.Variable(name)
	if !ok {
		en.t.Fatalf("engine has no variable %q", name)
	}
	tt := v.Tensor()
	if tt.Len() != len(vals) {
		en.t.Fatalf("variable %q has %d elements, got %d values", name, tt.Len(), len(vals))
	}
	for i, x := range vals {
		tt.SetFloat64At(i, x)
	}
}

// outputs returns compile options with the given named outputs.
func outputs(name string, nodes ...any) compile.Options {
	opt := compile.Options{Target: cpu.New(0), Name: name}
	for i := 0; i+1 < len(nodes); i += 2 {
		opt.Outputs = append(opt.Outputs, compile.Output{Name: nodes[i].(string), Node: nodes[i+1].(*graph.Node)})
	}
	return opt
}

// relClose reports whether got is within rtol·|want| + atol of want.
func relClose(got, want, rtol, atol float64) bool {
	return math.Abs(got-want) <= atol+rtol*math.Abs(want)
}

// compileOptions is compile.Options, short for build functions.
type compileOptions = compile.Options

// buildContext builds m at batch 1 in training mode and returns the graph
// and the context that recorded its weights.
func buildContext(m *nn.Sequential) (*graph.Graph, *nn.Context) {
	g := graph.New()
	c := nn.NewContext(g, true, 1)
	m.Forward(c, g.Input("x", m.InputType(), append(tensor.Shape{1}, m.InputShape...)))
	return g, c
}
