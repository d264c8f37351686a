package nn_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// layerIn is one input of a layer under test: a name, a shape (batch
// first) and a dtype (zero: the run's float type).
type layerIn struct {
	name  string
	shape tensor.Shape
	dtype tensor.DType
}

// layerRun is a layer built over inputs in dtype, with the loss
// Σ_k sum(out_k · R_k) for fixed random R_k, compiled with the gradients
// of the loss with respect to every float input and every weight, and
// loaded on an engine of its own. vals views the values of the float
// inputs, then the weights, in the engine's memory; names names them.
type layerRun struct {
	t     *testing.T
	e     *runtime.Engine
	x     *runtime.Executable
	names []string
	vals  [][]float64 // float64 runs only
	ins   map[string]tensor.Tensor
}

// runLayer builds l (a Layer or MultiLayer) over ins in dtype (training
// mode off) and loads it; weights are drawn N(0, 0.5²) from seed, float
// inputs likewise, mask inputs (Bool) are left for the caller.
func runLayer(t *testing.T, l any, ins []layerIn, dtype tensor.DType, seed uint64, training bool) *layerRun {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	var wrt []string
	prog, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		c := nn.NewContext(g, training, 7)
		c.DType = dtype
		var xs, diff []*graph.Node
		wrt = wrt[:0]
		for _, in := range ins {
			dt := in.dtype
			if dt == tensor.Invalid {
				dt = dtype
			}
			x := g.Input(in.name, dt, in.shape)
			xs = append(xs, x)
			if dt.IsFloat() {
				diff = append(diff, x)
				wrt = append(wrt, in.name)
			}
		}
		var outs []*graph.Node
		switch v := l.(type) {
		case nn.MultiLayer:
			outs = v.ForwardN(c, xs)
		case nn.Layer:
			outs = []*graph.Node{v.Forward(c, xs[0])}
		}
		var loss *graph.Node
		opt := compile.Options{Target: cpu.New(0)}
		for k, o := range outs {
			r := tensor.New(o.DType(), o.Shape())
			for i := 0; i < r.Len(); i++ {
				r.SetFloat64At(i, rng.NormFloat64())
			}
			s := graph.ReduceSum(graph.Mul(o, g.Constant(r)))
			if loss == nil {
				loss = s
			} else {
				loss = graph.Add(loss, s)
			}
			opt.Outputs = append(opt.Outputs, compile.Output{Name: fmt.Sprintf("out%d", k), Node: o})
		}
		opt.Outputs = append(opt.Outputs, compile.Output{Name: "loss", Node: loss})
		for _, w := range c.Weights {
			diff = append(diff, w)
			wrt = append(wrt, w.Attr().Name)
		}
		for i, gr := range autodiff.Grad(loss, diff...) {
			opt.Outputs = append(opt.Outputs, compile.Output{Name: "grad:" + wrt[i], Node: gr, Grad: true})
		}
		return g, opt
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &layerRun{t: t, e: runtime.NewEngine(cpu.New(0), 0), names: wrt, ins: map[string]tensor.Tensor{}}
	t.Cleanup(r.e.Close)
	if r.x, err = r.e.Load(prog); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.x.Close)
	for _, in := range ins {
		x, _ := r.x.Input(in.name)
		r.ins[in.name] = x
	}
	for _, name := range wrt {
		var x tensor.Tensor
		if in, ok := r.ins[name]; ok {
			x = in
		} else {
			v, ok := r.e.Variable(name)
			if !ok { // not read by the step (a recurrent kernel over one step from zero)
				r.vals = append(r.vals, nil)
				continue
			}
			x = v.Tensor()
		}
		for i := 0; i < x.Len(); i++ {
			x.SetFloat64At(i, 0.5*rng.NormFloat64())
		}
		if dtype == tensor.Float64 {
			r.vals = append(r.vals, x.Float64s())
		}
	}
	return r
}

// set sets the value named name (an input or a weight) to v.
func (r *layerRun) set(name string, v []float64) {
	r.t.Helper()
	x, ok := r.ins[name]
	if !ok {
		w, found := r.e.Variable(name)
		if !found {
			return // a weight the step does not read
		}
		x = w.Tensor()
	}
	if x.Len() != len(v) {
		r.t.Fatalf("%q has %d elements, got %d", name, x.Len(), len(v))
	}
	for i, f := range v {
		x.SetFloat64At(i, f)
	}
}

// run runs the step and returns the loss.
func (r *layerRun) run() float64 {
	r.t.Helper()
	if err := r.x.Run(); err != nil {
		r.t.Fatal(err)
	}
	return r.get("loss")[0]
}

// get returns the named output as float64s.
func (r *layerRun) get(name string) []float64 {
	r.t.Helper()
	o, err := r.x.Output(name)
	if err != nil {
		r.t.Fatal(err)
	}
	return float64s(o)
}

// checkGrads compares each gradient with central differences (float64
// runs): relative error below 1e-6.
func (r *layerRun) checkGrads() {
	r.t.Helper()
	for i, name := range r.names {
		if r.vals[i] == nil {
			continue
		}
		r.run() // at the unperturbed point (the last check ended perturbed)
		analytic := r.get("grad:" + name)
		numeric := testutil.NumericGrad(func([]float64) float64 { return r.run() }, r.vals[i], 1e-5)
		if e := testutil.RelErr(analytic, numeric); !(e < 1e-6) {
			r.t.Errorf("gradient of %s: relative error %.3g, want < 1e-6\nanalytic %v\nnumeric  %v", name, e, analytic, numeric)
		}
	}
}
