package optim

import (
	"math"

	"github.com/headroom-ml/headroom/graph"
)

// Adamax is Adam with the infinity norm (Kingma and Ba 2015, section 7.1),
// with Keras' update rule (keras.optimizers.Adamax, Keras 3):
// m = β1·m + (1-β1)·g; u = max(β2·u, |g|); w -= lr/(1-β1ᵗ)·m/(u + ε).
type Adamax struct {
	Beta1, Beta2, Epsilon float64 // zero: 0.9, 0.999, 1e-7 (Keras')
}

func (o *Adamax) Name() string { return "adamax" }

func (o *Adamax) settings() (b1, b2, eps float64) {
	b1, b2, eps = o.Beta1, o.Beta2, o.Epsilon
	if b1 == 0 {
		b1 = 0.9
	}
	if b2 == 0 {
		b2 = 0.999
	}
	if eps == 0 {
		eps = 1e-7
	}
	return
}

func (o *Adamax) Apply(g *graph.Graph, params, grads []*graph.Node) { apply(o, g, params, grads) }

func (o *Adamax) Update(g *graph.Graph, p, w, gr *graph.Node) *graph.Node {
	b1, b2, eps := o.settings()
	stepSize := hyper(g, "opt/step_size", w.DType()) // lr / (1 - β1ᵗ)
	m, u := state(g, p, w, "m"), state(g, p, w, "u")
	nm := graph.Add(graph.MulScalar(m, b1), graph.MulScalar(gr, 1-b1))
	nu := graph.Maximum(graph.MulScalar(u, b2), graph.Abs(gr))
	graph.Assign(m, nm)
	graph.Assign(u, nu)
	return graph.Sub(w, graph.Mul(stepSize, graph.Div(nm, graph.AddScalar(nu, eps))))
}

func (o *Adamax) Feed(step int64, lr float64, set func(string, float64)) {
	b1, _, _ := o.settings()
	set("opt/step_size", lr/(1-math.Pow(b1, float64(step))))
}

var _ Optimizer = (*Adamax)(nil)
