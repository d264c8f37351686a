package optim

import (
	"fmt"
	"math"
	"strings"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Optimizer appends parameter updates to a graph.
type Optimizer interface {
	Name() string
	// Apply appends the update of each param from its gradient (same
	// order). It declares the optimizer's state variables and hyper inputs.
	Apply(g *graph.Graph, params, grads []*graph.Node)
	// Update returns the new value of w, the current value of param p (p
	// itself, or a slice of it when the optimizer state is sharded), from
	// its gradient, assigning the state it keeps (shaped like w, named after
	// p) but not p.
	Update(g *graph.Graph, p, w, grad *graph.Node) *graph.Node
	// Feed sets each hyper input for a step (counted from 1) at learning
	// rate lr, through set(name, value). It allocates nothing.
	Feed(step int64, lr float64, set func(name string, v float64))
}

// ByName returns "sgd", "adam" or "adamw" with default settings.
func ByName(name string) (Optimizer, error) {
	switch strings.ToLower(name) {
	case "sgd":
		return &SGD{}, nil
	case "momentum":
		return &SGD{Momentum: 0.9}, nil
	case "nesterov":
		return &SGD{Momentum: 0.9, Nesterov: true}, nil
	case "adam":
		return &Adam{}, nil
	case "adamw":
		return &Adam{WeightDecay: 0.01, Decoupled: true}, nil
	}
	return nil, fmt.Errorf("optim: unknown optimizer %q (known: sgd, momentum, nesterov, adam, adamw)", name)
}

// hyper declares (once per graph) a scalar input named name of the params' dtype.
func hyper(g *graph.Graph, name string, dt tensor.DType) *graph.Node {
	if n, ok := g.LookupInput(name); ok {
		return n
	}
	return g.Input(name, dt, nil)
}

// state declares an optimizer state variable shaped like p.
// state declares the optimizer state slot of param p, shaped like w.
func state(g *graph.Graph, p, w *graph.Node, slot string) *graph.Node {
	name := p.Attr().Name + "/" + slot
	if v, ok := g.LookupVariable(name); ok {
		return v
	}
	return g.Variable(name, graph.RoleOptState, w.DType(), w.Shape())
}

// apply assigns each param its update.
func apply(o Optimizer, g *graph.Graph, params, grads []*graph.Node) {
	defer begin(g, o.Name())()
	for i, p := range params {
		graph.Assign(p, o.Update(g, p, p, grads[i]))
	}
}

func begin(g *graph.Graph, name string) func() {
	old := g.SetPhase(graph.Update)
	g.PushScope(name)
	return func() { g.PopScope(); g.SetPhase(old) }
}

// SGD is stochastic gradient descent with optional momentum, Nesterov
// momentum and (coupled) weight decay.
type SGD struct {
	Momentum    float64
	Nesterov    bool
	WeightDecay float64
}

func (o *SGD) Name() string { return "sgd" }

func (o *SGD) Apply(g *graph.Graph, params, grads []*graph.Node) { apply(o, g, params, grads) }

func (o *SGD) Update(g *graph.Graph, p, w, gr *graph.Node) *graph.Node {
	lr := hyper(g, "opt/lr", w.DType())
	if o.WeightDecay != 0 {
		gr = graph.Add(gr, graph.MulScalar(w, o.WeightDecay))
	}
	step := gr
	if o.Momentum != 0 {
		b := state(g, p, w, "momentum")
		nb := graph.Add(graph.MulScalar(b, o.Momentum), gr)
		graph.Assign(b, nb)
		step = nb
		if o.Nesterov {
			step = graph.Add(gr, graph.MulScalar(nb, o.Momentum))
		}
	}
	return graph.Sub(w, graph.Mul(step, lr))
}

func (o *SGD) Feed(step int64, lr float64, set func(string, float64)) { set("opt/lr", lr) }

// Adam is Adam, or AdamW when Decoupled.
type Adam struct {
	Beta1, Beta2, Epsilon float64 // zero: 0.9, 0.999, 1e-8
	WeightDecay           float64 // coupled (added to g) unless Decoupled
	Decoupled             bool
	// KerasEpsilon adds Epsilon to √v before the bias correction, as Keras
	// and TensorFlow do (Kingma and Ba's ε̂), rather than after it.
	KerasEpsilon bool
}

func (o *Adam) Name() string {
	if o.Decoupled {
		return "adamw"
	}
	return "adam"
}

func (o *Adam) betas() (b1, b2, eps float64) {
	b1, b2, eps = o.Beta1, o.Beta2, o.Epsilon
	if b1 == 0 {
		b1 = 0.9
	}
	if b2 == 0 {
		b2 = 0.999
	}
	if eps == 0 {
		eps = 1e-8
	}
	return
}

func (o *Adam) Apply(g *graph.Graph, params, grads []*graph.Node) { apply(o, g, params, grads) }

func (o *Adam) Update(g *graph.Graph, p, w, gr *graph.Node) *graph.Node {
	b1, b2, eps := o.betas()
	dt := w.DType()
	stepSize := hyper(g, "opt/step_size", dt) // lr / (1 - β1ᵗ)
	bias2 := hyper(g, "opt/bias2_sqrt", dt)   // √(1 - β2ᵗ)
	if o.WeightDecay != 0 {
		if o.Decoupled {
			w = graph.Sub(w, graph.Mul(w, hyper(g, "opt/lr_wd", dt))) // w·(1 - lr·wd)
		} else {
			gr = graph.Add(gr, graph.MulScalar(w, o.WeightDecay))
		}
	}
	m, v := state(g, p, w, "m"), state(g, p, w, "v")
	nm := graph.Add(graph.MulScalar(m, b1), graph.MulScalar(gr, 1-b1))
	nv := graph.Add(graph.MulScalar(v, b2), graph.MulScalar(graph.Square(gr), 1-b2))
	denom := graph.AddScalar(graph.Div(graph.Sqrt(nv), bias2), eps)
	if o.KerasEpsilon {
		denom = graph.Div(graph.AddScalar(graph.Sqrt(nv), eps), bias2)
	}
	nw := graph.Sub(w, graph.Mul(stepSize, graph.Div(nm, denom)))
	graph.Assign(m, nm)
	graph.Assign(v, nv)
	return nw
}

func (o *Adam) Feed(step int64, lr float64, set func(string, float64)) {
	b1, b2, _ := o.betas()
	t := float64(step)
	set("opt/step_size", lr/(1-math.Pow(b1, t)))
	set("opt/bias2_sqrt", math.Sqrt(1-math.Pow(b2, t)))
	if o.Decoupled && o.WeightDecay != 0 {
		set("opt/lr_wd", lr*o.WeightDecay)
	}
}

// ClipByGlobalNorm returns the gradients scaled by min(1, clip/‖g‖), ‖g‖
// the Euclidean norm of all of them together.
func ClipByGlobalNorm(grads []*graph.Node, clip float64) []*graph.Node {
	if len(grads) == 0 || clip <= 0 {
		return grads
	}
	g := grads[0].Graph()
	defer begin(g, "clip_by_global_norm")()
	var sq *graph.Node
	for _, gr := range grads {
		s := graph.ReduceSum(graph.Square(gr))
		if sq == nil {
			sq = s
		} else {
			sq = graph.Add(sq, s)
		}
	}
	norm := graph.Sqrt(sq)
	scale := graph.Div(graph.ScalarLike(norm, clip), graph.Maximum(norm, graph.ScalarLike(norm, clip)))
	out := make([]*graph.Node, len(grads))
	for i, gr := range grads {
		out[i] = graph.Mul(gr, scale)
	}
	return out
}
