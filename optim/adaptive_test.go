package optim_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/optim"
)

// The references below transcribe keras.optimizers (Keras 3's
// update_step of each class) for the quadratic problem of optim_test.go.

// kerasRMSprop is keras.optimizers.RMSprop for len(lrs) steps from w.
func kerasRMSprop(w, lrs []float64, rho, momentum, eps float64, centered bool) []float64 {
	w = append([]float64(nil), w...)
	vel := make([]float64, len(w))
	avg := make([]float64, len(w))
	mom := make([]float64, len(w))
	for _, lr := range lrs {
		g := gradOf(w)
		for i := range w {
			vel[i] = rho*vel[i] + (1-rho)*g[i]*g[i]
			denom := vel[i] + eps
			if centered {
				avg[i] = rho*avg[i] + (1-rho)*g[i]
				denom = vel[i] - avg[i]*avg[i] + eps
			}
			inc := lr * g[i] / math.Sqrt(denom)
			if momentum > 0 {
				mom[i] = momentum*mom[i] + inc
				w[i] -= mom[i]
			} else {
				w[i] -= inc
			}
		}
	}
	return w
}

// kerasAdagrad is keras.optimizers.Adagrad.
func kerasAdagrad(w, lrs []float64, init, eps float64) []float64 {
	w = append([]float64(nil), w...)
	acc := make([]float64, len(w))
	for i := range acc {
		acc[i] = init
	}
	for _, lr := range lrs {
		g := gradOf(w)
		for i := range w {
			acc[i] += g[i] * g[i]
			w[i] -= lr * g[i] / math.Sqrt(acc[i]+eps)
		}
	}
	return w
}

// kerasNadam is keras.optimizers.Nadam, with the momentum schedule's
// exponent decay·t (decay 1 in Keras 3, 0.004 in Keras 2's legacy Nadam).
func kerasNadam(w, lrs []float64, b1, b2, eps, decay float64) []float64 {
	w = append([]float64(nil), w...)
	m := make([]float64, len(w))
	v := make([]float64, len(w))
	uProduct := 1.0
	for t, lr := range lrs {
		step := float64(t + 1)
		g := gradOf(w)
		ut := b1 * (1 - 0.5*math.Pow(0.96, decay*step))
		ut1 := b1 * (1 - 0.5*math.Pow(0.96, decay*(step+1)))
		uProduct *= ut
		uProduct1 := uProduct * ut1
		b2p := math.Pow(b2, step)
		for i := range w {
			m[i] += (g[i] - m[i]) * (1 - b1)
			v[i] += (g[i]*g[i] - v[i]) * (1 - b2)
			mHat := ut1*m[i]/(1-uProduct1) + (1-ut)*g[i]/(1-uProduct)
			vHat := v[i] / (1 - b2p)
			w[i] -= mHat * lr / (math.Sqrt(vHat) + eps)
		}
	}
	return w
}

// kerasAdam is keras.optimizers.Adam: ε added to √v before the bias
// correction (alpha = lr·√(1-β2ᵗ)/(1-β1ᵗ); w -= alpha·m/(√v + ε)).
func kerasAdam(w, lrs []float64, b1, b2, eps float64) []float64 {
	w = append([]float64(nil), w...)
	m := make([]float64, len(w))
	v := make([]float64, len(w))
	for t, lr := range lrs {
		step := float64(t + 1)
		g := gradOf(w)
		alpha := lr * math.Sqrt(1-math.Pow(b2, step)) / (1 - math.Pow(b1, step))
		for i := range w {
			m[i] += (g[i] - m[i]) * (1 - b1)
			v[i] += (g[i]*g[i] - v[i]) * (1 - b2)
			w[i] -= m[i] * alpha / (math.Sqrt(v[i]) + eps)
		}
	}
	return w
}

func TestAdaptiveOptimizersMatchKeras(t *testing.T) {
	tests := []struct {
		name string
		opt  optim.Optimizer
		want []float64
	}{
		{"rmsprop", &optim.RMSprop{}, kerasRMSprop(w0, lrs, 0.9, 0, 1e-7, false)},
		// a large epsilon shows it is inside the root
		{"rmsprop/eps", &optim.RMSprop{Rho: 0.8, Epsilon: 0.5}, kerasRMSprop(w0, lrs, 0.8, 0, 0.5, false)},
		{"rmsprop/momentum", &optim.RMSprop{Momentum: 0.9}, kerasRMSprop(w0, lrs, 0.9, 0.9, 1e-7, false)},
		{"rmsprop/centered", &optim.RMSprop{Centered: true, Momentum: 0.5}, kerasRMSprop(w0, lrs, 0.9, 0.5, 1e-7, true)},
		{"adagrad", &optim.Adagrad{}, kerasAdagrad(w0, lrs, 0.1, 1e-7)},
		{"adagrad/init", &optim.Adagrad{InitialAccumulator: 2, Epsilon: 0.3}, kerasAdagrad(w0, lrs, 2, 0.3)},
		{"nadam", &optim.Nadam{}, kerasNadam(w0, lrs, 0.9, 0.999, 1e-7, 1)},
		{"nadam/keras2", &optim.Nadam{Beta1: 0.8, Beta2: 0.99, Epsilon: 1e-3, ScheduleDecay: 0.004}, kerasNadam(w0, lrs, 0.8, 0.99, 1e-3, 0.004)},
		{"adam/keras_epsilon", &optim.Adam{Epsilon: 0.1, KerasEpsilon: true}, kerasAdam(w0, lrs, 0.9, 0.999, 0.1)},
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

// Keras' and PyTorch's Adam differ only in where ε goes: with a large ε
// the two references (and the two settings) must disagree.
func TestKerasEpsilonDiffers(t *testing.T) {
	a, b := kerasAdam(w0, lrs, 0.9, 0.999, 0.1), torchAdam(w0, lrs, 0.9, 0.999, 0.1, 0, false)
	same := true
	for i := range a {
		same = same && math.Abs(a[i]-b[i]) < 1e-6
	}
	if same {
		t.Fatalf("Keras and PyTorch Adam agree with ε = 0.1: got %v and %v", a, b)
	}
}

// Nadam's Feed keeps the momentum product from step to step; feeding steps
// out of order (a resumed run) must give what a fresh optimizer gives.
func TestNadamFeedOutOfOrder(t *testing.T) {
	read := func(o *optim.Nadam, step int64) map[string]float64 {
		got := map[string]float64{}
		o.Feed(step, 0.01, func(n string, v float64) { got[n] = v })
		return got
	}
	o := &optim.Nadam{}
	for s := int64(1); s <= 5; s++ {
		read(o, s)
	}
	for _, s := range []int64{9, 3, 3, 4} {
		got, want := read(o, s), read(&optim.Nadam{}, s)
		for k, v := range want {
			if math.Abs(got[k]-v) > 1e-15*math.Abs(v) {
				t.Errorf("step %d %s: got %v, want %v", s, k, got[k], v)
			}
		}
	}
}

func TestAdaptiveOptimizerState(t *testing.T) {
	tests := []struct {
		opt   optim.Optimizer
		slots []string
	}{
		{&optim.RMSprop{}, []string{"rms"}},
		{&optim.RMSprop{Centered: true, Momentum: 0.9}, []string{"rms", "mean_grad", "momentum"}},
		{&optim.Adagrad{}, []string{"accumulator"}},
		{&optim.Nadam{}, []string{"m", "v"}},
	}
	for _, tc := range tests {
		s := newStepper(t, tc.opt, false, 0)
		got := map[string]bool{}
		for _, v := range s.e.Variables() {
			got[v.Name] = true
		}
		for _, p := range []string{"w1", "w2"} {
			for _, slot := range tc.slots {
				if !got[p+"/"+slot] {
					t.Errorf("%s: no state %s/%s", tc.opt.Name(), p, slot)
				}
			}
		}
		if want := 2 + 2*len(tc.slots); len(got) != want {
			t.Errorf("%s: %d variables, want %d", tc.opt.Name(), len(got), want)
		}
	}
}

func TestAdaptiveFeedDoesNotAllocate(t *testing.T) {
	var sink float64
	set := func(_ string, v float64) { sink += v }
	for _, o := range []optim.Optimizer{&optim.RMSprop{}, &optim.Adagrad{}, &optim.Nadam{}} {
		step := int64(0)
		if n := testing.AllocsPerRun(100, func() { step++; o.Feed(step, 1e-3, set) }); n != 0 {
			t.Errorf("%s: Feed allocates %v times per call, want 0", o.Name(), n)
		}
	}
	_ = sink
}
