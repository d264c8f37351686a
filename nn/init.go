package nn

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/headroom-ml/headroom/tensor"
)

// Initializer fills a new weight of the given shape. Fill draws element by
// element in order, so filling a weight in successive chunks with one rng
// gives the same values as filling it at once (InitTensor does so, to
// allocate nothing as large as the weight).
type Initializer interface {
	Fill(rng *rand.Rand, shape tensor.Shape, dst []float64)
	String() string
}

// fans returns Keras' fan_in and fan_out: for a kernel [.., in, out] the
// receptive field (the leading dimensions) times in and out.
func fans(s tensor.Shape) (in, out float64) {
	switch s.Rank() {
	case 0:
		return 1, 1
	case 1:
		return float64(s[0]), float64(s[0])
	}
	rf := 1
	for _, d := range s[:s.Rank()-2] {
		rf *= d
	}
	return float64(rf * s[s.Rank()-2]), float64(rf * s[s.Rank()-1])
}

// GlorotUniform draws from U(-l, l) with l = sqrt(6/(fan_in+fan_out))
// (Glorot and Bengio, 2010).
type GlorotUniform struct{}

func (GlorotUniform) Fill(rng *rand.Rand, s tensor.Shape, dst []float64) {
	in, out := fans(s)
	l := math.Sqrt(6 / (in + out))
	for i := range dst {
		dst[i] = (2*rng.Float64() - 1) * l
	}
}
func (GlorotUniform) String() string { return "glorot_uniform" }

// HeNormal draws from a normal with stddev sqrt(2/fan_in) truncated at two
// standard deviations, as Keras' he_normal (He et al., 2015).
type HeNormal struct{}

func (HeNormal) Fill(rng *rand.Rand, s tensor.Shape, dst []float64) {
	in, _ := fans(s)
	// Keras divides by .87962566103423978, the stddev of a unit normal cut at 2.
	std := math.Sqrt(2/in) / .87962566103423978
	for i := range dst {
		for {
			v := rng.NormFloat64()
			if v >= -2 && v <= 2 {
				dst[i] = v * std
				break
			}
		}
	}
}
func (HeNormal) String() string { return "he_normal" }

// TorchUniform draws from U(-1/√fan_in, 1/√fan_in): PyTorch's default for
// the weights of nn.Conv2d and nn.Linear (kaiming_uniform_ with
// a = √5), and, with FanIn set, for their biases (the weight's fan_in).
type TorchUniform struct{ FanIn int }

func (u TorchUniform) Fill(rng *rand.Rand, s tensor.Shape, dst []float64) {
	in, _ := fans(s)
	if u.FanIn > 0 {
		in = float64(u.FanIn)
	}
	l := 1 / math.Sqrt(in)
	for i := range dst {
		dst[i] = (2*rng.Float64() - 1) * l
	}
}
func (u TorchUniform) String() string { return "torch_uniform" }

// Constant fills every element with V (zeros and ones).
type Constant struct{ V float64 }

func (c Constant) Fill(_ *rand.Rand, _ tensor.Shape, dst []float64) {
	for i := range dst {
		dst[i] = c.V
	}
}
func (c Constant) String() string { return fmt.Sprintf("constant(%g)", c.V) }

// Uniform draws from U(Lo, Hi).
type Uniform struct{ Lo, Hi float64 }

func (u Uniform) Fill(rng *rand.Rand, _ tensor.Shape, dst []float64) {
	for i := range dst {
		dst[i] = u.Lo + (u.Hi-u.Lo)*rng.Float64()
	}
}
func (u Uniform) String() string { return fmt.Sprintf("uniform(%g, %g)", u.Lo, u.Hi) }

// RandomNormal draws from N(Mean, Stddev²), as Keras' RandomNormal and
// PyTorch's normal_ (GPT-2's N(0, 0.02) weights).
type RandomNormal struct{ Mean, Stddev float64 }

func (r RandomNormal) Fill(rng *rand.Rand, _ tensor.Shape, dst []float64) {
	for i := range dst {
		dst[i] = r.Mean + r.Stddev*rng.NormFloat64()
	}
}
func (r RandomNormal) String() string { return fmt.Sprintf("random_normal(%g, %g)", r.Mean, r.Stddev) }

// Orthogonal draws a random orthogonal matrix, as Keras' Orthogonal (the
// default recurrent_kernel of LSTM, GRU and SimpleRNN; Saxe et al. 2014):
// the weight viewed as [prod(shape[:-1]), shape[-1]] has orthonormal
// columns (or rows, when it is wider than tall), times Gain (0: 1). It is
// the Q of the QR decomposition of a normal matrix with R's diagonal made
// positive, as Keras computes it; it needs the whole weight at once
// (WholeInitializer).
type Orthogonal struct{ Gain float64 }

// Fill fills dst, which must be the whole weight.
func (o Orthogonal) Fill(rng *rand.Rand, s tensor.Shape, dst []float64) {
	cols := 1
	if s.Rank() > 0 {
		cols = s[s.Rank()-1]
	}
	rows := max(1, s.Size()/max(cols, 1))
	n, m := max(rows, cols), min(rows, cols) // the normal matrix a is [n, m]
	a := make([]float64, n*m)
	for i := range a {
		a[i] = rng.NormFloat64()
	}
	// modified Gram-Schmidt over a's columns: Q with R's diagonal positive
	for j := 0; j < m; j++ {
		for k := 0; k < j; k++ {
			var d float64
			for i := 0; i < n; i++ {
				d += a[i*m+j] * a[i*m+k]
			}
			for i := 0; i < n; i++ {
				a[i*m+j] -= d * a[i*m+k]
			}
		}
		var norm float64
		for i := 0; i < n; i++ {
			norm += a[i*m+j] * a[i*m+j]
		}
		norm = math.Sqrt(norm)
		for i := 0; i < n; i++ {
			a[i*m+j] /= norm
		}
	}
	gain := o.Gain
	if gain == 0 {
		gain = 1
	}
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			v := a[r*m+c] // q [rows, cols]
			if rows < cols {
				v = a[c*m+r] // the transpose of q [cols, rows]
			}
			dst[r*cols+c] = gain * v
		}
	}
}
func (o Orthogonal) String() string { return fmt.Sprintf("orthogonal(%g)", o.Gain) }

// Whole reports that Orthogonal fills a weight at once.
func (Orthogonal) Whole() bool { return true }

// WholeInitializer is an Initializer whose values depend on the whole
// weight (Orthogonal): InitTensor fills it at once, not in chunks.
type WholeInitializer interface {
	Initializer
	Whole() bool
}

// InitTensor fills t (float32 or float64) with init's draw for the variable
// name under the model seed: the stream depends only on (seed, name).
func InitTensor(init Initializer, seed uint64, name string, t tensor.Tensor) {
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	if w, ok := init.(WholeInitializer); ok && w.Whole() {
		vals := make([]float64, t.Len())
		init.Fill(rng, t.Shape(), vals)
		for i, v := range vals {
			t.SetFloat64At(i, v)
		}
		return
	}
	var chunk [1024]float64
	for at := 0; at < t.Len(); at += len(chunk) {
		vals := chunk[:min(len(chunk), t.Len()-at)]
		init.Fill(rng, t.Shape(), vals)
		for i, v := range vals {
			t.SetFloat64At(at+i, v)
		}
	}
}

// Serializable (serialize.go).
var (
	_ = RegisterInitializer("Orthogonal", &Orthogonal{})
	_ = RegisterInitializer("RandomNormal", &RandomNormal{})
	_ = RegisterInitializer("TorchUniform", &TorchUniform{})
)
