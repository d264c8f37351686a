package optim

import (
	"math"

	"github.com/headroom-ml/headroom/graph"
)

// The adaptive optimizers Keras offers besides Adam, with Keras' update
// rules (keras.optimizers, Keras 3), so that a model read from a Keras
// file trains as it would there:
//   - RMSprop (Hinton, Coursera lecture 6e, 2012): v = ρ·v + (1-ρ)·g²;
//     centered, a = ρ·a + (1-ρ)·g and the denominator is v - a²; the step
//     is lr·g/√(v + ε) (ε inside the root, as Keras and TensorFlow; PyTorch
//     adds it outside); with momentum μ, b = μ·b + step and w -= b.
//   - Adagrad (Duchi, Hazan and Singer, 2011): s = s + g², starting from
//     InitialAccumulator; w -= lr·g/√(s + ε).
//   - Nadam (Dozat, 2016): Adam with Nesterov momentum and a momentum
//     schedule μₜ = β1·(1 - ½·0.96^(d·t)), d = 1 in Keras 3 and TensorFlow
//     2.11+, 0.004 (schedule_decay) in Keras 2:
//     w -= lr·(μₜ₊₁·m/(1 - Πμ₁..ₜ₊₁) + (1-μₜ)·g/(1 - Πμ₁..ₜ)) / (√(v/(1-β2ᵗ)) + ε).

// RMSprop divides the gradient by a running root mean square of its recent
// magnitudes.
type RMSprop struct {
	Rho      float64 // zero: 0.9
	Momentum float64
	Epsilon  float64 // zero: 1e-7 (Keras')
	Centered bool
}

func (o *RMSprop) Name() string { return "rmsprop" }

func (o *RMSprop) settings() (rho, eps float64) {
	rho, eps = o.Rho, o.Epsilon
	if rho == 0 {
		rho = 0.9
	}
	if eps == 0 {
		eps = 1e-7
	}
	return
}

func (o *RMSprop) Apply(g *graph.Graph, params, grads []*graph.Node) { apply(o, g, params, grads) }

func (o *RMSprop) Update(g *graph.Graph, p, w, gr *graph.Node) *graph.Node {
	rho, eps := o.settings()
	lr := hyper(g, "opt/lr", w.DType())
	v := state(g, p, w, "rms")
	nv := graph.Add(graph.MulScalar(v, rho), graph.MulScalar(graph.Square(gr), 1-rho))
	graph.Assign(v, nv)
	denom := nv
	if o.Centered {
		a := state(g, p, w, "mean_grad")
		na := graph.Add(graph.MulScalar(a, rho), graph.MulScalar(gr, 1-rho))
		graph.Assign(a, na)
		denom = graph.Sub(nv, graph.Square(na))
	}
	step := graph.Mul(lr, graph.Div(gr, graph.Sqrt(graph.AddScalar(denom, eps))))
	if o.Momentum != 0 {
		b := state(g, p, w, "momentum")
		nb := graph.Add(graph.MulScalar(b, o.Momentum), step)
		graph.Assign(b, nb)
		step = nb
	}
	return graph.Sub(w, step)
}

func (o *RMSprop) Feed(step int64, lr float64, set func(string, float64)) { set("opt/lr", lr) }

// Adagrad scales each weight's step by the root of its summed squared
// gradients.
type Adagrad struct {
	// InitialAccumulator is the sum's starting value (Keras'
	// initial_accumulator_value; zero: 0.1). The state kept is the sum less
	// it, so that it starts at zero as every optimizer state does.
	InitialAccumulator float64
	Epsilon            float64 // zero: 1e-7 (Keras')
}

func (o *Adagrad) Name() string { return "adagrad" }

func (o *Adagrad) settings() (init, eps float64) {
	init, eps = o.InitialAccumulator, o.Epsilon
	if init == 0 {
		init = 0.1
	}
	if eps == 0 {
		eps = 1e-7
	}
	return
}

func (o *Adagrad) Apply(g *graph.Graph, params, grads []*graph.Node) { apply(o, g, params, grads) }

func (o *Adagrad) Update(g *graph.Graph, p, w, gr *graph.Node) *graph.Node {
	init, eps := o.settings()
	lr := hyper(g, "opt/lr", w.DType())
	s := state(g, p, w, "accumulator") // Σg² - init
	ns := graph.Add(s, graph.Square(gr))
	graph.Assign(s, ns)
	return graph.Sub(w, graph.Mul(lr, graph.Div(gr, graph.Sqrt(graph.AddScalar(ns, init+eps)))))
}

func (o *Adagrad) Feed(step int64, lr float64, set func(string, float64)) { set("opt/lr", lr) }

// Nadam is Adam with Nesterov momentum, as Keras writes it.
type Nadam struct {
	Beta1, Beta2, Epsilon float64 // zero: 0.9, 0.999, 1e-7 (Keras')
	// ScheduleDecay is d in the momentum schedule's 0.96^(d·t) (zero: 1,
	// Keras 3's; Keras 2 files give schedule_decay 0.004).
	ScheduleDecay float64

	// the product of the momentum schedule up to step prodStep (Feed keeps
	// it from step to step)
	prodStep int64
	prod     float64
}

func (o *Nadam) Name() string { return "nadam" }

func (o *Nadam) settings() (b1, b2, eps, d float64) {
	b1, b2, eps, d = o.Beta1, o.Beta2, o.Epsilon, o.ScheduleDecay
	if b1 == 0 {
		b1 = 0.9
	}
	if b2 == 0 {
		b2 = 0.999
	}
	if eps == 0 {
		eps = 1e-7
	}
	if d == 0 {
		d = 1
	}
	return
}

func (o *Nadam) Apply(g *graph.Graph, params, grads []*graph.Node) { apply(o, g, params, grads) }

func (o *Nadam) Update(g *graph.Graph, p, w, gr *graph.Node) *graph.Node {
	b1, b2, eps, _ := o.settings()
	dt := w.DType()
	cm := hyper(g, "opt/nadam_m", dt)       // lr·μₜ₊₁/(1 - Πμ₁..ₜ₊₁)
	cg := hyper(g, "opt/nadam_g", dt)       // lr·(1-μₜ)/(1 - Πμ₁..ₜ)
	bias2 := hyper(g, "opt/bias2_sqrt", dt) // √(1 - β2ᵗ)
	m, v := state(g, p, w, "m"), state(g, p, w, "v")
	nm := graph.Add(graph.MulScalar(m, b1), graph.MulScalar(gr, 1-b1))
	nv := graph.Add(graph.MulScalar(v, b2), graph.MulScalar(graph.Square(gr), 1-b2))
	graph.Assign(m, nm)
	graph.Assign(v, nv)
	num := graph.Add(graph.Mul(cm, nm), graph.Mul(cg, gr))
	return graph.Sub(w, graph.Div(num, graph.AddScalar(graph.Div(graph.Sqrt(nv), bias2), eps)))
}

// mu is the momentum schedule at step t.
func (o *Nadam) mu(t int64) float64 {
	b1, _, _, d := o.settings()
	return b1 * (1 - 0.5*math.Pow(0.96, d*float64(t)))
}

// product returns Πμ₁..ₜ, from the last one Feed computed where it can.
func (o *Nadam) product(t int64) float64 {
	switch {
	case o.prodStep == t && o.prod != 0:
		return o.prod
	case o.prodStep == t-1 && o.prod != 0:
		o.prod *= o.mu(t)
	default:
		o.prod = 1
		for i := int64(1); i <= t; i++ {
			o.prod *= o.mu(i)
		}
	}
	o.prodStep = t
	return o.prod
}

func (o *Nadam) Feed(step int64, lr float64, set func(string, float64)) {
	_, b2, _, _ := o.settings()
	prod := o.product(step)
	next := o.mu(step + 1)
	set("opt/nadam_m", lr*next/(1-prod*next))
	set("opt/nadam_g", lr*(1-o.mu(step))/(1-prod))
	set("opt/bias2_sqrt", math.Sqrt(1-math.Pow(b2, float64(step))))
}

var (
	_ Optimizer = (*RMSprop)(nil)
	_ Optimizer = (*Adagrad)(nil)
	_ Optimizer = (*Nadam)(nil)
)
