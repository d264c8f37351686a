package nn_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// draw returns init's values for a float64 variable of the given shape.
func draw(init nn.Initializer, seed uint64, name string, shape tensor.Shape) []float64 {
	t := tensor.New(tensor.Float64, shape)
	nn.InitTensor(init, seed, name, t)
	return append([]float64(nil), t.Float64s()...)
}

func moments(v []float64) (mean, variance, maxAbs float64) {
	for _, x := range v {
		mean += x
		maxAbs = math.Max(maxAbs, math.Abs(x))
	}
	mean /= float64(len(v))
	for _, x := range v {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(v)), maxAbs
}

// Statistical checks use 18,000 to 131,000 draws from fixed seeds. The
// tolerances are about 8 standard errors of each estimate (worked out in the
// comments), so a correct initializer passes for any seed, and a wrong
// scale (e.g. fan_in alone for Glorot, or no truncation correction for He,
// both at least 10% off) fails.
func TestGlorotUniform(t *testing.T) {
	tests := []struct {
		name   string
		shape  tensor.Shape
		fanSum float64
	}{
		{"dense", tensor.Shape{300, 200}, 500},
		// conv kernel: receptive field 3·3, fan_in 9·32, fan_out 9·64
		{"conv", tensor.Shape{3, 3, 32, 64}, 9*32 + 9*64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, seed := range []uint64{1, 2, 3} {
				v := draw(nn.GlorotUniform{}, seed, "layer/kernel", tc.shape)
				limit := math.Sqrt(6 / tc.fanSum)
				mean, variance, maxAbs := moments(v)
				if maxAbs > limit {
					t.Errorf("seed %d: |value| up to %v, want <= limit sqrt(6/(fan_in+fan_out)) = %v", seed, maxAbs, limit)
				}
				// U(-l, l) reaches near l: P(max < 0.99 l) = 0.99^n
				if maxAbs < 0.99*limit {
					t.Errorf("seed %d: largest |value| %v, want near the limit %v", seed, maxAbs, limit)
				}
				// variance l²/3 = 2/(fan_in+fan_out); the sample variance's
				// relative standard error is sqrt(4/5)/sqrt(n) ≤ 0.7% here
				if want := 2 / tc.fanSum; math.Abs(variance-want) > 0.06*want {
					t.Errorf("seed %d: variance %v, want %v ± 6%%", seed, variance, want)
				}
				// mean 0 ± 8·l/sqrt(3n)
				if tol := 8 * limit / math.Sqrt(3*float64(len(v))); math.Abs(mean) > tol {
					t.Errorf("seed %d: mean %v, want 0 ± %v", seed, mean, tol)
				}
			}
		})
	}
}

func TestHeNormal(t *testing.T) {
	tests := []struct {
		name  string
		shape tensor.Shape
		fanIn float64
	}{
		{"dense", tensor.Shape{512, 256}, 512},
		{"conv", tensor.Shape{3, 3, 64, 128}, 9 * 64}, // receptive field times input channels
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := draw(nn.HeNormal{}, 7, "conv/kernel", tc.shape)
			// Keras: truncated normal with stddev s = sqrt(2/fan_in)/0.8796
			// (0.8796 the stddev of a unit normal cut at ±2), cut at ±2s, so
			// that the result's variance is 2/fan_in.
			raw := math.Sqrt(2/tc.fanIn) / truncStd(2)
			mean, variance, maxAbs := moments(v)
			if maxAbs > 2*raw {
				t.Errorf("|value| up to %v, want <= 2 stddev = %v", maxAbs, 2*raw)
			}
			// the density at the cut is not small: values come within 1%
			if maxAbs < 0.99*2*raw {
				t.Errorf("largest |value| %v, want near the cut %v", maxAbs, 2*raw)
			}
			// the sample variance's relative standard error for this
			// truncated normal is about 1.1/sqrt(n) ≤ 0.4% here
			if want := 2 / tc.fanIn; math.Abs(variance-want) > 0.04*want {
				t.Errorf("variance %v, want 2/fan_in = %v ± 4%%", variance, want)
			}
			if tol := 8 * math.Sqrt(2/tc.fanIn/float64(len(v))); math.Abs(mean) > tol {
				t.Errorf("mean %v, want 0 ± %v", mean, tol)
			}
			// the mass beyond one raw stddev: for a normal cut at 2,
			// P(|z| > 1) = (Φ(2) − Φ(1))·2 / (2Φ(2) − 1) = 0.2855
			beyond := 0
			for _, x := range v {
				if math.Abs(x) > raw {
					beyond++
				}
			}
			p := (normalCDF(2) - normalCDF(1)) * 2 / (2*normalCDF(2) - 1)
			n := float64(len(v))
			if tol := 8 * math.Sqrt(p*(1-p)/n); math.Abs(float64(beyond)/n-p) > tol {
				t.Errorf("fraction beyond one stddev %v, want %v ± %v", float64(beyond)/n, p, tol)
			}
		})
	}
}

// truncStd is the standard deviation of a unit normal truncated to [−c, c]:
// sqrt(1 − 2cφ(c)/(2Φ(c) − 1)).
func truncStd(c float64) float64 {
	phi := math.Exp(-c*c/2) / math.Sqrt(2*math.Pi)
	return math.Sqrt(1 - 2*c*phi/(2*normalCDF(c)-1))
}

func TestTruncStdConstant(t *testing.T) {
	// the constant HeNormal uses, .87962566103423978, is truncStd(2)
	if got := truncStd(2); math.Abs(got-0.87962566103423978) > 1e-12 {
		t.Errorf("truncStd(2) = %v, want 0.87962566103423978", got)
	}
}

func TestConstantAndUniform(t *testing.T) {
	for _, c := range []float64{0, 1, -2.5} {
		for i, v := range draw(nn.Constant{V: c}, 1, "b", tensor.Shape{3, 4}) {
			if v != c {
				t.Fatalf("Constant(%v)[%d] = %v", c, i, v)
			}
		}
	}
	// Embedding's default: U(-0.05, 0.05), variance 0.1²/12
	v := draw(nn.Uniform{Lo: -0.05, Hi: 0.05}, 3, "emb/embeddings", tensor.Shape{1000, 64})
	mean, variance, maxAbs := moments(v)
	if maxAbs > 0.05 || maxAbs < 0.0499 {
		t.Errorf("uniform(-0.05, 0.05): largest |value| %v, want just under 0.05", maxAbs)
	}
	if want := 0.01 / 12; math.Abs(variance-want) > 0.03*want {
		t.Errorf("uniform variance %v, want %v ± 3%%", variance, want)
	}
	if math.Abs(mean) > 8*math.Sqrt(0.01/12/64000) {
		t.Errorf("uniform mean %v, want 0", mean)
	}
	u := draw(nn.Uniform{Lo: 2, Hi: 3}, 3, "u", tensor.Shape{1000})
	for i, x := range u {
		if x < 2 || x >= 3 {
			t.Fatalf("uniform(2, 3)[%d] = %v", i, x)
		}
	}
}

// InitTensor's draw depends only on (seed, name): not on the order of
// calls, nor on other variables; and a float32 tensor holds the same draw
// rounded.
func TestInitTensorDependsOnSeedAndName(t *testing.T) {
	shape := tensor.Shape{20, 30}
	a := draw(nn.GlorotUniform{}, 5, "dense/kernel", shape)
	draw(nn.GlorotUniform{}, 5, "dense_1/kernel", shape) // another variable in between
	b := draw(nn.GlorotUniform{}, 5, "dense/kernel", shape)
	if d := differing(a, b); d != 0 {
		t.Errorf("same seed and name: %d of %d values differ, want 0", d, len(a))
	}
	for _, tc := range []struct {
		name string
		seed uint64
		v    string
	}{{"other_name", 5, "dense_1/kernel"}, {"other_seed", 6, "dense/kernel"}, {"prefix_name", 5, "dense/kernel2"}} {
		c := draw(nn.GlorotUniform{}, tc.seed, tc.v, shape)
		if d := differing(a, c); d < len(a)*99/100 {
			t.Errorf("%s: only %d of %d values differ, want (nearly) all", tc.name, d, len(a))
		}
	}
	f32 := tensor.New(tensor.Float32, shape)
	nn.InitTensor(nn.GlorotUniform{}, 5, "dense/kernel", f32)
	for i, v := range f32.Float32s() {
		if v != float32(a[i]) {
			t.Fatalf("float32 draw [%d] = %v, want float32(%v)", i, v, a[i])
		}
	}
}

func differing(a, b []float64) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// The layers' declared initializers are Keras' defaults.
func TestDefaultInitializers(t *testing.T) {
	m := &nn.Sequential{InputShape: tensor.Shape{6, 6, 2}, Layers: []nn.Layer{
		&nn.Conv2D{LayerName: "conv", Filters: 2, Kernel: [2]int{3, 3}},
		&nn.BatchNormalization{LayerName: "bn"},
		&nn.Flatten{LayerName: "f"},
		&nn.Dense{LayerName: "d", Units: 3},
		&nn.Dense{LayerName: "he", Units: 3, KernelInit: nn.HeNormal{}},
		&nn.LayerNormalization{LayerName: "ln"},
	}}
	g, c := buildContext(m)
	want := map[string]string{
		"conv/kernel": "glorot_uniform", "conv/bias": "constant(0)",
		"bn/gamma": "constant(1)", "bn/beta": "constant(0)",
		"bn/moving_mean": "constant(0)", "bn/moving_variance": "constant(1)",
		"d/kernel": "glorot_uniform", "d/bias": "constant(0)",
		"he/kernel": "he_normal", "he/bias": "constant(0)",
		"ln/gamma": "constant(1)", "ln/beta": "constant(0)",
	}
	if len(c.Init) != len(want) {
		t.Errorf("got %d initializers, want %d: %v", len(c.Init), len(want), c.Init)
	}
	for name, w := range want {
		init := c.Init[name]
		if init == nil || init.String() != w {
			t.Errorf("%s: initializer %v, want %s", name, init, w)
		}
	}
	e := nn.NewContext(g, false, 1)
	(&nn.Embedding{LayerName: "emb", InputDim: 4, OutputDim: 2}).Forward(e, g.Input("ids", tensor.Int32, tensor.Shape{1, 3}))
	if got := e.Init["emb/embeddings"]; got == nil || got.String() != (nn.Uniform{Lo: -0.05, Hi: 0.05}).String() {
		t.Errorf("embeddings: initializer %v, want uniform(-0.05, 0.05)", got)
	}
}

// TorchUniform is U(-1/√fan_in, 1/√fan_in): PyTorch's kaiming_uniform_ with
// a = √5 (bound gain·√(3/fan_in), gain √(2/(1+5))). Its variance is
// 1/(3·fan_in); 36,864 draws estimate it within about 1.5% (8 standard
// errors of the uniform's variance estimate, √(4/5)/√n relative).
func TestTorchUniform(t *testing.T) {
	tests := []struct {
		name  string
		init  nn.TorchUniform
		shape tensor.Shape
		fanIn float64
	}{
		{"conv3x3x16x16", nn.TorchUniform{}, tensor.Shape{3, 3, 16, 16}, 144},
		{"dense_fan_in_64", nn.TorchUniform{}, tensor.Shape{64, 576}, 64},
		{"bias_of_fan_in_64", nn.TorchUniform{FanIn: 64}, tensor.Shape{36864}, 64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := draw(tc.init, 3, "w", tc.shape)
			_, variance, maxAbs := moments(v)
			bound := 1 / math.Sqrt(tc.fanIn)
			if maxAbs > bound {
				t.Errorf("max |w| = %v, want at most 1/√%v = %v", maxAbs, tc.fanIn, bound)
			}
			want := bound * bound / 3
			if tol := 8 * math.Sqrt(0.8/float64(len(v))); math.Abs(variance/want-1) > tol {
				t.Errorf("variance %v, want %v within %.1f%%", variance, want, 100*tol)
			}
		})
	}
}
