package optim_test

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// The problem every optimizer test solves: two float64 parameters, w1 [3]
// and w2 [2, 2], and the loss
//
//	L = ½ Σ a ⊙ (w − c)²   over both,
//
// whose gradient is a ⊙ (w − c). The reference implementations below work
// on the concatenation of the two (every rule is elementwise).
var (
	shapes = []tensor.Shape{{3}, {2, 2}}
	w0     = []float64{0.5, -1.25, 2, 0.75, -0.3, 1.5, -2}
	coefA  = []float64{1, 2.5, 0.4, 3, 1.7, 0.9, 2.2}
	coefC  = []float64{-0.2, 0.6, 1.1, -1.4, 0.25, 0.8, -0.5}
	// a different learning rate at each step, so that feeding the wrong
	// step's rate shows
	lrs = []float64{0.1, 0.05, 0.02}
)

func gradOf(w []float64) []float64 {
	g := make([]float64, len(w))
	for i := range w {
		g[i] = coefA[i] * (w[i] - coefC[i])
	}
	return g
}

func split(flat []float64) [][]float64 {
	out, off := [][]float64{}, 0
	for _, s := range shapes {
		out = append(out, flat[off:off+s.Size()])
		off += s.Size()
	}
	return out
}

// quadratic builds the loss over params and returns it.
func quadratic(g *graph.Graph, params []*graph.Node) *graph.Node {
	var loss *graph.Node
	a, c := split(coefA), split(coefC)
	for i, p := range params {
		ca := g.Constant(tensor.FromSlice(shapes[i], a[i]))
		cc := g.Constant(tensor.FromSlice(shapes[i], c[i]))
		l := graph.MulScalar(graph.ReduceSum(graph.Mul(ca, graph.Square(graph.Sub(p, cc)))), 0.5)
		if loss == nil {
			loss = l
		} else {
			loss = graph.Add(loss, l)
		}
	}
	return loss
}

// stepper is a compiled training step of the quadratic problem.
type stepper struct {
	t      *testing.T
	opt    optim.Optimizer
	e      *runtime.Engine
	x      *runtime.Executable
	params []*runtime.Variable
}

// newStepper compiles forward, backward and opt's update. With oneByOne it
// calls Apply once per parameter (as train does when it interleaves the
// updates with the backward pass); otherwise once for all of them.
func newStepper(t *testing.T, opt optim.Optimizer, oneByOne bool, clip float64) *stepper {
	t.Helper()
	p, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		params := []*graph.Node{g.Param("w1", tensor.Float64, shapes[0]), g.Param("w2", tensor.Float64, shapes[1])}
		loss := quadratic(g, params)
		grads := autodiff.Grad(loss, params...)
		if clip > 0 {
			grads = optim.ClipByGlobalNorm(grads, clip)
		}
		if oneByOne {
			for i := range params {
				opt.Apply(g, params[i:i+1], grads[i:i+1])
			}
		} else {
			opt.Apply(g, params, grads)
		}
		return g, compile.Options{Target: cpu.New(0), Name: "train", Grads: grads, Outputs: []compile.Output{{Name: "loss", Node: loss}}}
	})
	if err != nil {
		t.Fatal(err)
	}
	e := runtime.NewEngine(cpu.New(0), 0)
	x, err := e.Load(p)
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	s := &stepper{t: t, opt: opt, e: e, x: x}
	t.Cleanup(func() { x.Close(); e.Close() })
	ws := split(w0)
	for i, name := range []string{"w1", "w2"} {
		v, ok := e.Variable(name)
		if !ok {
			t.Fatalf("engine has no variable %q", name)
		}
		copy(v.Tensor().Float64s(), ws[i])
		s.params = append(s.params, v)
	}
	return s
}

// step feeds the hyper inputs of step (counted from 1) at rate lr and runs.
// Every input the program has must be fed, and only those.
func (s *stepper) step(step int64, lr float64) {
	s.t.Helper()
	fed := map[string]bool{}
	s.opt.Feed(step, lr, func(name string, v float64) {
		in, err := s.x.Input(name)
		if err != nil {
			s.t.Fatalf("Feed set %q: %v", name, err)
		}
		if in.Len() != 1 || in.DType() != tensor.Float64 {
			s.t.Fatalf("hyper input %q is %v, want a float64 scalar", name, in)
		}
		in.SetFloat64At(0, v)
		fed[name] = true
	})
	for _, slot := range s.x.Program.Inputs {
		if !fed[slot.Name] {
			s.t.Fatalf("program input %q was not fed by %s's Feed", slot.Name, s.opt.Name())
		}
	}
	if err := s.x.Run(); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stepper) weights() []float64 {
	var out []float64
	for _, v := range s.params {
		out = append(out, v.Tensor().Float64s()...)
	}
	return out
}

// torchSGD is torch.optim.SGD(lr, momentum, dampening=0, weight_decay,
// nesterov) for len(lrs) steps from w.
func torchSGD(w []float64, lrs []float64, momentum, wd float64, nesterov bool) []float64 {
	w = append([]float64(nil), w...)
	var buf []float64
	for t, lr := range lrs {
		g := gradOf(w)
		for i := range g {
			if wd != 0 {
				g[i] += wd * w[i]
			}
		}
		if momentum != 0 {
			if t == 0 {
				buf = append([]float64(nil), g...) // torch: buf = clone(g)
			} else {
				for i := range buf {
					buf[i] = momentum*buf[i] + g[i]
				}
			}
			for i := range g {
				if nesterov {
					g[i] += momentum * buf[i]
				} else {
					g[i] = buf[i]
				}
			}
		}
		for i := range w {
			w[i] -= lr * g[i]
		}
	}
	return w
}

// torchAdam is torch.optim.Adam (weight_decay coupled: added to the
// gradient) or, with decoupled, torch.optim.AdamW (w *= 1 - lr·wd first),
// amsgrad off, for len(lrs) steps from w.
func torchAdam(w []float64, lrs []float64, b1, b2, eps, wd float64, decoupled bool) []float64 {
	w = append([]float64(nil), w...)
	m := make([]float64, len(w))
	v := make([]float64, len(w))
	for t, lr := range lrs {
		step := float64(t + 1)
		g := gradOf(w)
		for i := range w {
			if decoupled {
				w[i] *= 1 - lr*wd
			} else if wd != 0 {
				g[i] += wd * w[i]
			}
		}
		bc1 := 1 - math.Pow(b1, step)
		bc2 := 1 - math.Pow(b2, step)
		stepSize := lr / bc1
		for i := range w {
			m[i] = b1*m[i] + (1-b1)*g[i]
			v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
			denom := math.Sqrt(v[i])/math.Sqrt(bc2) + eps
			w[i] -= stepSize * m[i] / denom
		}
	}
	return w
}

func TestOptimizersMatchPyTorch(t *testing.T) {
	byName := func(name string) optim.Optimizer {
		o, err := optim.ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	tests := []struct {
		name string
		opt  optim.Optimizer
		want []float64
	}{
		{"sgd", byName("sgd"), torchSGD(w0, lrs, 0, 0, false)},
		{"sgd/weight_decay", &optim.SGD{WeightDecay: 0.1}, torchSGD(w0, lrs, 0, 0.1, false)},
		{"momentum", byName("momentum"), torchSGD(w0, lrs, 0.9, 0, false)},
		{"momentum/weight_decay", &optim.SGD{Momentum: 0.7, WeightDecay: 0.05}, torchSGD(w0, lrs, 0.7, 0.05, false)},
		{"nesterov", byName("nesterov"), torchSGD(w0, lrs, 0.9, 0, true)},
		{"nesterov/weight_decay", &optim.SGD{Momentum: 0.8, Nesterov: true, WeightDecay: 0.02}, torchSGD(w0, lrs, 0.8, 0.02, true)},
		{"adam", byName("adam"), torchAdam(w0, lrs, 0.9, 0.999, 1e-8, 0, false)},
		// a large epsilon shows where it is added (after the bias correction)
		{"adam/betas_eps", &optim.Adam{Beta1: 0.8, Beta2: 0.95, Epsilon: 1e-2}, torchAdam(w0, lrs, 0.8, 0.95, 1e-2, 0, false)},
		{"adam/weight_decay", &optim.Adam{WeightDecay: 0.1}, torchAdam(w0, lrs, 0.9, 0.999, 1e-8, 0.1, false)},
		{"adamw", byName("adamw"), torchAdam(w0, lrs, 0.9, 0.999, 1e-8, 0.01, true)},
		{"adamw/strong", &optim.Adam{Beta1: 0.85, Beta2: 0.99, Epsilon: 1e-3, WeightDecay: 0.5, Decoupled: true},
			torchAdam(w0, lrs, 0.85, 0.99, 1e-3, 0.5, true)},
	}
	for _, tc := range tests {
		for _, oneByOne := range []bool{false, true} {
			name := tc.name
			if oneByOne {
				name += "/apply_per_param"
			}
			t.Run(name, func(t *testing.T) {
				s := newStepper(t, tc.opt, oneByOne, 0)
				for i, lr := range lrs {
					s.step(int64(i+1), lr)
				}
				testutil.RequireClose(t, "weights after 3 steps", s.weights(), tc.want, 1e-12, 1e-15)
			})
		}
	}
}

// Sanity of the references themselves: after one step from the same start,
// SGD moves by exactly lr·g, and Adam by about lr (its first step is
// lr·sign(g) up to epsilon).
func TestReferenceFirstSteps(t *testing.T) {
	g := gradOf(w0)
	sgd := torchSGD(w0, lrs[:1], 0.9, 0, true) // Nesterov's first step: g + μ·g
	adam := torchAdam(w0, lrs[:1], 0.9, 0.999, 1e-8, 0, false)
	for i := range w0 {
		if got, want := w0[i]-sgd[i], lrs[0]*g[i]*1.9; math.Abs(got-want) > 1e-15 {
			t.Errorf("nesterov first step %d: got %v, want %v", i, got, want)
		}
		if got, want := w0[i]-adam[i], lrs[0]*math.Copysign(1, g[i]); math.Abs(got-want) > 1e-6 {
			t.Errorf("adam first step %d: got %v, want %v", i, got, want)
		}
	}
}

func TestOptimizerState(t *testing.T) {
	tests := []struct {
		opt   optim.Optimizer
		slots []string // state variables per parameter
	}{
		{&optim.SGD{}, nil},
		{&optim.SGD{Momentum: 0.9}, []string{"momentum"}},
		{&optim.Adam{}, []string{"m", "v"}},
		{&optim.Adam{WeightDecay: 0.01, Decoupled: true}, []string{"m", "v"}},
	}
	for _, tc := range tests {
		t.Run(tc.opt.Name()+"/"+strings.Join(tc.slots, "_"), func(t *testing.T) {
			s := newStepper(t, tc.opt, false, 0)
			want := map[string]tensor.Shape{}
			for i, p := range []string{"w1", "w2"} {
				for _, slot := range tc.slots {
					want[p+"/"+slot] = shapes[i]
				}
			}
			got := 0
			for _, v := range s.e.Variables() {
				if v.Role != graph.RoleOptState {
					continue
				}
				got++
				shape, ok := want[v.Name]
				if !ok {
					t.Errorf("unexpected optimizer state %q", v.Name)
					continue
				}
				if !v.Shape.Equal(shape) || v.DType != tensor.Float64 {
					t.Errorf("state %q is %s%v, want float64%v", v.Name, v.DType, v.Shape, shape)
				}
			}
			if got != len(want) {
				t.Errorf("got %d optimizer state variables, want %d (%v)", got, len(want), want)
			}
		})
	}
}

func TestByName(t *testing.T) {
	tests := []struct {
		name, wantName string
		check          func(optim.Optimizer) bool
	}{
		{"sgd", "sgd", func(o optim.Optimizer) bool { s, ok := o.(*optim.SGD); return ok && *s == optim.SGD{} }},
		{"momentum", "sgd", func(o optim.Optimizer) bool { s, ok := o.(*optim.SGD); return ok && *s == optim.SGD{Momentum: 0.9} }},
		{"nesterov", "sgd", func(o optim.Optimizer) bool {
			s, ok := o.(*optim.SGD)
			return ok && *s == optim.SGD{Momentum: 0.9, Nesterov: true}
		}},
		{"adam", "adam", func(o optim.Optimizer) bool { a, ok := o.(*optim.Adam); return ok && *a == optim.Adam{} }},
		{"Adam", "adam", func(o optim.Optimizer) bool { _, ok := o.(*optim.Adam); return ok }},
		{"adamw", "adamw", func(o optim.Optimizer) bool {
			a, ok := o.(*optim.Adam)
			return ok && *a == optim.Adam{WeightDecay: 0.01, Decoupled: true}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := optim.ByName(tc.name)
			if err != nil {
				t.Fatalf("ByName(%q): %v", tc.name, err)
			}
			if o.Name() != tc.wantName {
				t.Errorf("Name() = %q, want %q", o.Name(), tc.wantName)
			}
			if !tc.check(o) {
				t.Errorf("ByName(%q) = %#v: not the documented defaults", tc.name, o)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		o, err := optim.ByName("adagrad")
		if err == nil {
			t.Fatalf("ByName(adagrad) = %v, want an error", o)
		}
		for _, want := range []string{"adagrad", "sgd", "adam", "adamw", "nesterov"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	})
}

// Feed must allocate nothing (it runs before every step).
func TestFeedDoesNotAllocate(t *testing.T) {
	var sink float64
	set := func(_ string, v float64) { sink += v }
	for _, o := range []optim.Optimizer{&optim.SGD{Momentum: 0.9}, &optim.Adam{}, &optim.Adam{WeightDecay: 0.01, Decoupled: true}} {
		if n := testing.AllocsPerRun(100, func() { o.Feed(7, 1e-3, set) }); n != 0 {
			t.Errorf("%s: Feed allocates %v times per call, want 0", o.Name(), n)
		}
	}
	_ = sink
}
