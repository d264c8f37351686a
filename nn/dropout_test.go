package nn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

const dropN = 100000

func dropInput() []float64 {
	x := make([]float64, dropN)
	for i := range x {
		x[i] = float64(i%7) - 2.5 // never zero
	}
	return x
}

// dropProgram builds two dropout layers (names a and b) over the same
// float64 input [dropN] in training mode under seed.
func dropProgram(t *testing.T, seed uint64, rate float64) *program {
	t.Helper()
	en := newEngine(t)
	p := en.load(func() (*graph.Graph, compileOptions) {
		g := graph.New()
		c := nn.NewContext(g, true, seed)
		c.DType = tensor.Float64
		x := g.Input("x", tensor.Float64, tensor.Shape{dropN})
		a := (&nn.Dropout{LayerName: "a", Rate: rate}).Forward(c, x)
		b := (&nn.Dropout{LayerName: "b", Rate: rate}).Forward(c, x)
		if c.Step == nil {
			t.Fatal("Dropout in training declared no step input")
		}
		return g, outputs("drop", "a", a, "b", b)
	})
	p.set("x", dropInput())
	return p
}

// dropStep runs p at the given step and returns the kept-mask of output
// name, checking that kept elements are x/(1−rate) and the others 0.
func dropStep(t *testing.T, p *program, step int64, name string, rate float64) []bool {
	t.Helper()
	p.set("step", []float64{float64(step)})
	p.run()
	y, _ := p.get(name)
	x := dropInput()
	kept := make([]bool, len(y))
	for i, v := range y {
		switch {
		case v == 0:
		case relClose(v, x[i]/(1-rate), 1e-15, 0):
			kept[i] = true
		default:
			t.Fatalf("%s step %d element %d: got %v, want 0 or %v", name, step, i, v, x[i]/(1-rate))
		}
	}
	return kept
}

// binomialBounds returns mean ± 6 standard deviations of Binomial(n, p):
// outside them with probability below 2e-9 (and the masks are a
// deterministic function of seed and step, so a pass stays a pass).
func binomialBounds(n int, p float64) (lo, hi float64) {
	mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
	return mean - 6*sd, mean + 6*sd
}

func count(m []bool, f func(i int) bool) int {
	n := 0
	for i := range m {
		if f(i) {
			n++
		}
	}
	return n
}

func TestDropoutTraining(t *testing.T) {
	for _, rate := range []float64{0.1, 0.3, 0.5, 0.8} {
		t.Run(fmt.Sprint("rate_", rate), func(t *testing.T) {
			p := dropProgram(t, 42, rate)
			m1 := dropStep(t, p, 1, "a", rate)
			lo, hi := binomialBounds(dropN, rate)
			if z := count(m1, func(i int) bool { return !m1[i] }); float64(z) < lo || float64(z) > hi {
				t.Errorf("rate %v: %d of %d zeroed, want within [%.0f, %.0f]", rate, z, dropN, lo, hi)
			}
			// each half alone, too (no mask that is dense in one part)
			h := dropN / 2
			lo2, hi2 := binomialBounds(h, rate)
			if z := count(m1[:h], func(i int) bool { return !m1[i] }); float64(z) < lo2 || float64(z) > hi2 {
				t.Errorf("rate %v: first half: %d of %d zeroed, want within [%.0f, %.0f]", rate, z, h, lo2, hi2)
			}

			// the same step draws the same mask; another step another one,
			// independent: both dropped with probability rate²
			if again := dropStep(t, p, 1, "a", rate); count(again, func(i int) bool { return again[i] != m1[i] }) != 0 {
				t.Error("the same step drew a different mask")
			}
			m2 := dropStep(t, p, 2, "a", rate)
			lo, hi = binomialBounds(dropN, rate*rate)
			if both := count(m1, func(i int) bool { return !m1[i] && !m2[i] }); float64(both) < lo || float64(both) > hi {
				t.Errorf("steps 1 and 2: %d dropped in both, want within [%.0f, %.0f] (independent masks)", both, lo, hi)
			}
			// another layer (name) in the same step: another mask
			mb := dropStep(t, p, 1, "b", rate)
			if both := count(m1, func(i int) bool { return !m1[i] && !mb[i] }); float64(both) < lo || float64(both) > hi {
				t.Errorf("layers a and b: %d dropped in both, want within [%.0f, %.0f] (independent masks)", both, lo, hi)
			}
			// another model seed: another mask; the same seed: the same one
			other := dropStep(t, dropProgram(t, 43, rate), 1, "a", rate)
			if both := count(m1, func(i int) bool { return !m1[i] && !other[i] }); float64(both) < lo || float64(both) > hi {
				t.Errorf("seeds 42 and 43: %d dropped in both, want within [%.0f, %.0f] (independent masks)", both, lo, hi)
			}
			same := dropStep(t, dropProgram(t, 42, rate), 1, "a", rate)
			if d := count(m1, func(i int) bool { return m1[i] != same[i] }); d != 0 {
				t.Errorf("the same seed and step in a new program: %d elements differ, want 0", d)
			}
		})
	}
}

// In inference, and at rate 0, Dropout is the identity: its input node.
func TestDropoutInferenceIsIdentity(t *testing.T) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{4, 3})
	c := nn.NewContext(g, false, 1)
	if y := (&nn.Dropout{LayerName: "d", Rate: 0.5}).Forward(c, x); y != x {
		t.Errorf("inference: Dropout returned %v, want its input", y)
	}
	if c.Step != nil {
		t.Error("inference: Dropout declared a step input")
	}
	ct := nn.NewContext(g, true, 1)
	if y := (&nn.Dropout{LayerName: "d0", Rate: 0}).Forward(ct, x); y != x {
		t.Errorf("rate 0: Dropout returned %v, want its input", y)
	}
}
