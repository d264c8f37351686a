package optim_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/optim"
)

// kerasAdamax is keras.optimizers.Adamax's update_step.
func kerasAdamax(w, lrs []float64, b1, b2, eps float64) []float64 {
	w = append([]float64(nil), w...)
	m := make([]float64, len(w))
	u := make([]float64, len(w))
	for t, lr := range lrs {
		g := gradOf(w)
		b1p := math.Pow(b1, float64(t+1))
		for i := range w {
			m[i] += (g[i] - m[i]) * (1 - b1)
			u[i] = math.Max(b2*u[i], math.Abs(g[i]))
			w[i] -= lr * m[i] / ((1 - b1p) * (u[i] + eps))
		}
	}
	return w
}

func TestAdamaxMatchesKeras(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  optim.Optimizer
		want []float64
	}{
		{"defaults", &optim.Adamax{}, kerasAdamax(w0, lrs, 0.9, 0.999, 1e-7)},
		{"settings", &optim.Adamax{Beta1: 0.8, Beta2: 0.5, Epsilon: 0.3}, kerasAdamax(w0, lrs, 0.8, 0.5, 0.3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStepper(t, tc.opt, false, 0)
			for i, lr := range lrs {
				s.step(int64(i+1), lr)
			}
			testutil.RequireClose(t, "weights after 3 steps", s.weights(), tc.want, 1e-12, 1e-15)
		})
	}
}
