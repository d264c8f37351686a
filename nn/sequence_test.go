package nn_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// weights returns the run's float inputs and weights by name.
func (r *layerRun) weights() map[string][]float64 {
	w := map[string][]float64{}
	for i, n := range r.names {
		w[n] = r.vals[i]
	}
	return w
}

// TestConv1D computes Keras' Conv1D directly (kernel [K, C, F]; valid,
// same and causal padding; stride 2) and compares the layer's output, and
// checks its gradients.
func TestConv1D(t *testing.T) {
	const B, T, C, F, K = 2, 7, 3, 4, 3
	for _, tc := range []struct {
		padding string
		stride  int
	}{{"valid", 1}, {"same", 1}, {"causal", 1}, {"valid", 2}, {"same", 2}} {
		t.Run(tc.padding+"/"+string(rune('0'+tc.stride)), func(t *testing.T) {
			l := &nn.Conv1D{LayerName: "conv", Filters: F, KernelSize: K, Strides: tc.stride, Padding: tc.padding}
			r := runLayer(t, l, []layerIn{{name: "x", shape: tensor.Shape{B, T, C}}}, tensor.Float64, 9, false)
			r.run()
			w := r.weights()
			x, k, bias := w["x"], w["conv/kernel"], w["conv/bias"]
			// output t reads inputs t·stride - before + j, j < K (zero outside)
			out, before := (T-K)/tc.stride+1, 0
			switch tc.padding {
			case "same":
				out = (T + tc.stride - 1) / tc.stride
				before = max((out-1)*tc.stride+K-T, 0) / 2
			case "causal":
				out, before = T, K-1
			}
			var want []float64
			for b := 0; b < B; b++ {
				for o := 0; o < out; o++ {
					for f := 0; f < F; f++ {
						v := bias[f]
						for j := 0; j < K; j++ {
							if i := o*tc.stride - before + j; i >= 0 && i < T {
								for c := 0; c < C; c++ {
									v += x[(b*T+i)*C+c] * k[(j*C+c)*F+f]
								}
							}
						}
						want = append(want, v)
					}
				}
			}
			testutil.RequireClose(t, "output", r.get("out0"), want, 1e-12, 1e-13)
			r.checkGrads()
		})
	}
}

// TestPooling1D compares max and average pooling over time, and the
// global poolings, with direct computations.
func TestPooling1D(t *testing.T) {
	const B, T, C = 2, 7, 3
	in := []layerIn{{name: "x", shape: tensor.Shape{B, T, C}}}
	for _, tc := range []struct {
		name  string
		layer nn.Layer
		want  func(x []float64) []float64
	}{
		{"max/2", &nn.Pool1D{LayerName: "p", Max: true, PoolSize: 2}, func(x []float64) []float64 { return pool(x, B, T, C, 2, true) }},
		{"average/3", &nn.Pool1D{LayerName: "p", PoolSize: 3}, func(x []float64) []float64 { return pool(x, B, T, C, 3, false) }},
		{"global_average", &nn.GlobalPooling1D{LayerName: "g"}, func(x []float64) []float64 { return pool(x, B, T, C, T, false) }},
		{"global_max", &nn.GlobalPooling1D{LayerName: "g", Max: true}, func(x []float64) []float64 { return pool(x, B, T, C, T, true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runLayer(t, tc.layer, in, tensor.Float64, 3, false)
			r.run()
			testutil.RequireClose(t, "output", r.get("out0"), tc.want(r.weights()["x"]), 1e-12, 1e-13)
		})
	}
}

// pool pools windows of k steps (stride k, valid) of x [B, T, C].
func pool(x []float64, B, T, C, k int, isMax bool) []float64 {
	var out []float64
	for b := 0; b < B; b++ {
		for o := 0; o+k <= T; o += k {
			for c := 0; c < C; c++ {
				v := math.Inf(-1)
				if !isMax {
					v = 0
				}
				for j := o; j < o+k; j++ {
					if isMax {
						v = max(v, x[(b*T+j)*C+c])
					} else {
						v += x[(b*T+j)*C+c] / float64(k)
					}
				}
				out = append(out, v)
			}
		}
	}
	return out
}

// TestPositionEmbeddings: the learned table's first T rows added to the
// input (or returned broadcast), and keras_hub's sine encodings.
func TestPositionEmbeddings(t *testing.T) {
	const B, T, C = 2, 3, 4
	in := []layerIn{{name: "x", shape: tensor.Shape{B, T, C}}}
	for _, add := range []bool{false, true} {
		r := runLayer(t, &nn.PositionEmbedding{LayerName: "pos", SequenceLength: 5, Add: add}, in, tensor.Float64, 4, false)
		r.run()
		w := r.weights()
		var want []float64
		for b := 0; b < B; b++ {
			for i := 0; i < T*C; i++ {
				v := w["pos/embeddings"][i] // rows 0..T-1 of [5, C]
				if add {
					v += w["x"][b*T*C+i]
				}
				want = append(want, v)
			}
		}
		testutil.RequireClose(t, "learned", r.get("out0"), want, 1e-15, 0)
		r.checkGrads()
	}
	r := runLayer(t, &nn.SinePositionEncoding{LayerName: "sine", MaxWavelength: 100}, in, tensor.Float64, 4, false)
	r.run()
	var want []float64
	for b := 0; b < B; b++ {
		for p := 0; p < T; p++ {
			for i := 0; i < C; i++ {
				a := float64(p) / math.Pow(100, float64(2*(i/2))/C)
				if i%2 == 0 {
					want = append(want, math.Sin(a))
				} else {
					want = append(want, math.Cos(a))
				}
			}
		}
	}
	testutil.RequireClose(t, "sine", r.get("out0"), want, 1e-15, 1e-15)
}

// TestTimeDistributed applies a Dense to every step: the same as the
// Dense over [B, T, in] (a product with the last axis).
func TestTimeDistributed(t *testing.T) {
	const B, T, in, out = 2, 3, 4, 5
	x := []layerIn{{name: "x", shape: tensor.Shape{B, T, in}}}
	td := runLayer(t, &nn.TimeDistributed{LayerName: "td", Layer: &nn.Dense{LayerName: "dense", Units: out, Activation: "tanh"}}, x, tensor.Float64, 6, false)
	plain := runLayer(t, &nn.Dense{LayerName: "dense", Units: out, Activation: "tanh"}, x, tensor.Float64, 6, false)
	td.run()
	plain.run()
	testutil.RequireClose(t, "output", td.get("out0"), plain.get("out0"), 1e-15, 0)
	td.checkGrads()
}

// TestOrthogonal: the weight viewed as [prod(shape[:-1]), shape[-1]] has
// orthonormal columns (rows when wider than tall), times the gain.
func TestOrthogonal(t *testing.T) {
	for _, tc := range []struct {
		shape tensor.Shape
		gain  float64
	}{{tensor.Shape{6, 4}, 0}, {tensor.Shape{4, 6}, 1}, {tensor.Shape{2, 3, 4}, 2}, {tensor.Shape{5, 5}, 0.5}} {
		v := draw(nn.Orthogonal{Gain: tc.gain}, 1, "w", tc.shape)
		cols := tc.shape[tc.shape.Rank()-1]
		rows := tc.shape.Size() / cols
		g := tc.gain
		if g == 0 {
			g = 1
		}
		n, m := rows, cols // dot products of the m columns over n rows
		at := func(i, j int) float64 { return v[i*cols+j] }
		if rows < cols {
			n, m = cols, rows
			at = func(i, j int) float64 { return v[j*cols+i] }
		}
		for a := 0; a < m; a++ {
			for b := 0; b < m; b++ {
				var d float64
				for i := 0; i < n; i++ {
					d += at(i, a) * at(i, b)
				}
				want := 0.0
				if a == b {
					want = g * g
				}
				if math.Abs(d-want) > 1e-12 {
					t.Fatalf("%v gain %v: column %d · column %d = %v, want %v", tc.shape, tc.gain, a, b, d, want)
				}
			}
		}
	}
}

// TestRandomNormal checks the mean and standard deviation of 40,000 draws
// (within about 8 standard errors).
func TestRandomNormal(t *testing.T) {
	v := draw(nn.RandomNormal{Mean: 0.5, Stddev: 0.02}, 1, "w", tensor.Shape{200, 200})
	mean, variance, _ := moments(v)
	if math.Abs(mean-0.5) > 8*0.02/200 || math.Abs(math.Sqrt(variance)-0.02) > 8*0.02/math.Sqrt(2*40000) {
		t.Errorf("mean %v, stddev %v; want 0.5, 0.02", mean, math.Sqrt(variance))
	}
}

// TestFusedLayerNormalization: as one op the layer computes what its
// composition computes, values and gradients (float64 to 1e-12, float32
// within rounding), and its gradients match central differences.
func TestFusedLayerNormalization(t *testing.T) {
	in := []layerIn{{name: "x", shape: tensor.Shape{5, 8, 6}}} // 40 rows: 16 uneven chunks
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
		rtol, atol := 1e-12, 1e-13
		if dt == tensor.Float32 {
			rtol, atol = 1e-5, 1e-6
		}
		fused := runLayer(t, &nn.LayerNormalization{LayerName: "ln", Epsilon: 1e-2, Fused: true}, in, dt, 8, false)
		plain := runLayer(t, &nn.LayerNormalization{LayerName: "ln", Epsilon: 1e-2}, in, dt, 8, false)
		fused.run()
		plain.run()
		testutil.RequireClose(t, "output", fused.get("out0"), plain.get("out0"), rtol, atol)
		for _, name := range fused.names {
			testutil.RequireClose(t, "gradient of "+name, fused.get("grad:"+name), plain.get("grad:"+name), rtol, atol)
		}
		if dt == tensor.Float64 {
			fused.checkGrads()
		}
	}
}
