package nn_test

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// actInput is a [2, 8] batch with zero, both signs, small and large values.
var actInput = []float64{
	-6, -2.5, -1, -0.3, 0, 0.3, 1, 2.5,
	6, 0.01, -0.01, 3, -3, 0.7, -0.7, 40,
}

// runActivation applies the named activation to actInput as dtype.
func runActivation(t *testing.T, name string, dt tensor.DType) []float64 {
	t.Helper()
	en := newEngine(t)
	p := en.load(func() (*graph.Graph, compileOptions) {
		g := graph.New()
		x := g.Input("x", dt, tensor.Shape{2, 8})
		// + 0 keeps the identity an op of its own for "linear"
		y, err := nn.Activate(name, graph.AddScalar(x, 0))
		if err != nil {
			t.Fatal(err)
		}
		return g, outputs("act", "y", y)
	})
	p.set("x", actInput)
	p.run()
	y, shape := p.get("y")
	if !shape.Equal(tensor.Shape{2, 8}) {
		t.Fatalf("%s: output shape %v, want [2, 8]", name, shape)
	}
	return y
}

// Φ(x), the standard normal CDF, through erfc (accurate in both tails).
func normalCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

func TestActivations(t *testing.T) {
	sigmoid := func(x float64) float64 {
		if x >= 0 {
			return 1 / (1 + math.Exp(-x))
		}
		e := math.Exp(x)
		return e / (1 + e)
	}
	tests := []struct {
		name string
		f    func(x float64) float64
	}{
		{"linear", func(x float64) float64 { return x }},
		{"", func(x float64) float64 { return x }},
		{"relu", func(x float64) float64 { return math.Max(x, 0) }},
		// Keras' gelu(approximate=False): x·Φ(x)
		{"gelu", func(x float64) float64 { return x * normalCDF(x) }},
		{"sigmoid", sigmoid},
		{"tanh", math.Tanh},
	}
	for _, tc := range tests {
		for _, c := range []struct {
			dt         tensor.DType
			rtol, atol float64
		}{{tensor.Float64, 1e-12, 1e-15}, {tensor.Float32, 2e-6, 1e-7}} {
			t.Run(tc.name+"/"+c.dt.String(), func(t *testing.T) {
				got := runActivation(t, tc.name, c.dt)
				for i, x := range actInput {
					want := tc.f(x)
					if c.dt == tensor.Float32 {
						want = tc.f(float64(float32(x)))
					}
					if !relClose(got[i], want, c.rtol, c.atol) {
						t.Errorf("%s(%v) = %v, want %v", tc.name, x, got[i], want)
					}
				}
			})
		}
	}
}

// gelu is the exact erf form, not the tanh approximation: at 1 they differ
// by 1.5e-4. Φ(1) = 0.8413447460685429 (the normal table).
func TestGeluIsExact(t *testing.T) {
	got := runActivation(t, "gelu", tensor.Float64)
	approx := func(x float64) float64 {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	}
	for i, x := range actInput {
		want := 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
		if !relClose(got[i], want, 1e-12, 1e-15) {
			t.Errorf("gelu(%v) = %v, want x/2·(1+erf(x/√2)) = %v", x, got[i], want)
		}
		if x == 1 {
			if !relClose(got[i], 0.8413447460685429, 1e-14, 0) {
				t.Errorf("gelu(1) = %v, want Φ(1) = 0.8413447460685429", got[i])
			}
			if relClose(got[i], approx(x), 1e-6, 0) {
				t.Errorf("gelu(1) = %v equals the tanh approximation %v", got[i], approx(x))
			}
		}
	}
}

func TestSoftmax(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			got := runActivation(t, "softmax", dt)
			tol := 1e-15
			if dt == tensor.Float32 {
				tol = 1e-6
			}
			for r := 0; r < 2; r++ {
				row, out := actInput[r*8:(r+1)*8], got[r*8:(r+1)*8]
				mx := math.Inf(-1)
				for _, x := range row {
					mx = math.Max(mx, x)
				}
				z := 0.0
				for _, x := range row {
					z += math.Exp(x - mx)
				}
				sum := 0.0
				for i, x := range row {
					if want := math.Exp(x-mx) / z; !relClose(out[i], want, 10*tol, tol) {
						t.Errorf("row %d: softmax[%d] = %v, want %v", r, i, out[i], want)
					}
					if out[i] < 0 || out[i] > 1 || math.IsNaN(out[i]) {
						t.Errorf("row %d: softmax[%d] = %v, not a probability", r, i, out[i])
					}
					sum += out[i]
				}
				if math.Abs(sum-1) > 10*tol {
					t.Errorf("row %d sums to %v, want 1", r, sum)
				}
			}
		})
	}
}

func TestApplyErrors(t *testing.T) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{2})
	if y, err := nn.Activate("linear", x); err != nil || y != x {
		t.Errorf("Apply(linear) = %v, %v; want x itself", y, err)
	}
	if _, err := nn.Activate("swishh", x); err == nil || !strings.Contains(err.Error(), "swishh") {
		t.Errorf("Apply(swishh): got %v, want an error naming it", err)
	}
	for _, name := range nn.Activations {
		if _, err := nn.Activate(name, x); err != nil {
			t.Errorf("Apply(%q), listed in Activations: %v", name, err)
		}
	}
}

// The Activation layer applies its function under its own scope.
func TestActivationLayer(t *testing.T) {
	en := newEngine(t)
	p := en.load(func() (*graph.Graph, compileOptions) {
		g := graph.New()
		c := nn.NewContext(g, false, 0)
		c.DType = tensor.Float64
		x := g.Input("x", tensor.Float64, tensor.Shape{2, 8})
		y := (&nn.Activation{LayerName: "act", Fn: "tanh"}).Forward(c, x)
		if !strings.HasPrefix(y.Owner(), "act") {
			t.Errorf("activation op owned by %q, want the layer's scope act", y.Owner())
		}
		return g, outputs("act", "y", y)
	})
	p.set("x", actInput)
	p.run()
	y, _ := p.get("y")
	for i, x := range actInput {
		if !relClose(y[i], math.Tanh(x), 1e-14, 1e-16) {
			t.Errorf("tanh(%v) = %v, want %v", x, y[i], math.Tanh(x))
		}
	}
}
