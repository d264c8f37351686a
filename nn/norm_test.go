package nn_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// bnInput is [3, 2, 2, 3]: 12 values for each of 3 channels.
var bnShape = tensor.Shape{3, 2, 2, 3}

func bnInput() []float64 {
	x := make([]float64, bnShape.Size())
	for i := range x {
		c := i % 3
		x[i] = math.Sin(float64(i)*1.7)*float64(c+1) + float64(c) - 1 // channel-dependent mean and spread
	}
	return x
}

// bnBuild returns a build function for a BatchNormalization layer over a
// float64 input of bnShape, in training mode (with the moving-statistics
// updates assigned, as train does) or inference mode.
func bnBuild(t *testing.T, bn *nn.BatchNormalization, training bool) func() (*graph.Graph, compileOptions) {
	return func() (*graph.Graph, compileOptions) {
		g := graph.New()
		c := nn.NewContext(g, training, 1)
		c.DType = tensor.Float64
		x := g.Input("x", tensor.Float64, bnShape)
		y := bn.Forward(c, x)
		if training {
			if len(c.Updates) != 2 {
				t.Fatalf("BatchNormalization in training declared %d updates, want 2 (moving mean and variance)", len(c.Updates))
			}
			old := g.SetPhase(graph.Update)
			for _, u := range c.Updates {
				graph.Assign(u[0], u[1])
			}
			g.SetPhase(old)
		} else if len(c.Updates) != 0 {
			t.Fatalf("BatchNormalization in inference declared %d updates, want 0", len(c.Updates))
		}
		return g, outputs("bn", "y", y)
	}
}

func TestBatchNormalization(t *testing.T) {
	tests := []struct {
		name          string
		bn            *nn.BatchNormalization
		momentum, eps float64
	}{
		{"keras_defaults", &nn.BatchNormalization{LayerName: "bn"}, 0.99, 1e-3},
		{"momentum_0.9_eps_1e-5", &nn.BatchNormalization{LayerName: "bn", Momentum: 0.9, Epsilon: 1e-5}, 0.9, 1e-5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const C = 3
			gamma := []float64{1.5, -0.5, 2}
			beta := []float64{0.1, 0.2, -0.3}
			mm0 := []float64{0.5, -1, 2}
			mv0 := []float64{2, 0.5, 1.5}
			x := bnInput()

			en := newEngine(t)
			tr := en.load(bnBuild(t, tc.bn, true))
			inf := en.load(bnBuild(t, tc.bn, false))
			en.setVariable("bn/gamma", gamma)
			en.setVariable("bn/beta", beta)
			en.setVariable("bn/moving_mean", mm0)
			en.setVariable("bn/moving_variance", mv0)

			// float64 reference: batch mean and biased variance per channel
			n := float64(len(x) / C)
			mean, variance := make([]float64, C), make([]float64, C)
			for i, v := range x {
				mean[i%C] += v / n
			}
			for i, v := range x {
				d := v - mean[i%C]
				variance[i%C] += d * d / n
			}

			// inference before any step: the initial moving statistics
			inf.set("x", x)
			inf.run()
			y, _ := inf.get("y")
			for i, v := range x {
				c := i % C
				want := (v-mm0[c])/math.Sqrt(mv0[c]+tc.eps)*gamma[c] + beta[c]
				if !relClose(y[i], want, 1e-13, 1e-14) {
					t.Fatalf("inference before training, element %d: got %v, want %v", i, y[i], want)
				}
			}

			// one training step: batch statistics, and the moving ones move
			tr.set("x", x)
			tr.run()
			y, _ = tr.get("y")
			for i, v := range x {
				c := i % C
				want := (v-mean[c])/math.Sqrt(variance[c]+tc.eps)*gamma[c] + beta[c]
				if !relClose(y[i], want, 1e-13, 1e-14) {
					t.Fatalf("training, element %d: got %v, want %v", i, y[i], want)
				}
			}
			mm, mv := make([]float64, C), make([]float64, C)
			gotMM, gotMV := en.variable("bn/moving_mean"), en.variable("bn/moving_variance")
			for c := range C {
				mm[c] = tc.momentum*mm0[c] + (1-tc.momentum)*mean[c]
				mv[c] = tc.momentum*mv0[c] + (1-tc.momentum)*variance[c]
				if !relClose(gotMM[c], mm[c], 1e-14, 1e-15) {
					t.Errorf("moving_mean[%d] = %v, want %v", c, gotMM[c], mm[c])
				}
				if !relClose(gotMV[c], mv[c], 1e-14, 1e-15) {
					t.Errorf("moving_variance[%d] = %v, want %v", c, gotMV[c], mv[c])
				}
			}
			// gamma and beta are the optimizer's, not the layer's
			if g := en.variable("bn/gamma"); g[0] != gamma[0] || g[1] != gamma[1] || g[2] != gamma[2] {
				t.Errorf("gamma changed in a step without an optimizer: %v", g)
			}

			// inference after the step reads the updated moving statistics
			inf.run()
			y, _ = inf.get("y")
			for i, v := range x {
				c := i % C
				want := (v-mm[c])/math.Sqrt(mv[c]+tc.eps)*gamma[c] + beta[c]
				if !relClose(y[i], want, 1e-13, 1e-14) {
					t.Fatalf("inference after training, element %d: got %v, want %v", i, y[i], want)
				}
			}
		})
	}
}

// Training output is normalized per channel: mean beta, standard deviation
// |gamma|·sqrt(var/(var+eps)).
func TestBatchNormalizationStatistics(t *testing.T) {
	en := newEngine(t)
	p := en.load(bnBuild(t, &nn.BatchNormalization{LayerName: "bn", Epsilon: 1e-12}, true))
	en.setVariable("bn/gamma", []float64{1, 1, 1})
	p.set("x", bnInput())
	p.run()
	y, _ := p.get("y")
	for c := range 3 {
		var s, s2 float64
		for i := c; i < len(y); i += 3 {
			s += y[i]
			s2 += y[i] * y[i]
		}
		mean, variance := s/12, s2/12-(s/12)*(s/12)
		if math.Abs(mean) > 1e-12 || math.Abs(variance-1) > 1e-9 {
			t.Errorf("channel %d: normalized mean %v, variance %v; want 0 and 1", c, mean, variance)
		}
	}
}

func TestLayerNormalization(t *testing.T) {
	const D = 5
	x := []float64{1, 2, 3, 4, 10, -1, -1, 0.5, 2, -3}
	gamma := []float64{1, 2, 0.5, -1, 1.5}
	beta := []float64{0, 0.1, -0.2, 0.3, 1}
	for _, tc := range []struct {
		name string
		ln   *nn.LayerNormalization
		eps  float64
	}{{"default_eps", &nn.LayerNormalization{LayerName: "ln"}, 1e-3}, {"eps_1e-6", &nn.LayerNormalization{LayerName: "ln", Epsilon: 1e-6}, 1e-6}} {
		t.Run(tc.name, func(t *testing.T) {
			en := newEngine(t)
			p := en.load(func() (*graph.Graph, compileOptions) {
				g := graph.New()
				c := nn.NewContext(g, true, 1)
				c.DType = tensor.Float64
				xin := g.Input("x", tensor.Float64, tensor.Shape{2, D})
				return g, outputs("ln", "y", tc.ln.Forward(c, xin))
			})
			en.setVariable("ln/gamma", gamma)
			en.setVariable("ln/beta", beta)
			p.set("x", x)
			p.run()
			y, _ := p.get("y")
			for r := range 2 {
				row := x[r*D : (r+1)*D]
				mean, variance := 0.0, 0.0
				for _, v := range row {
					mean += v / D
				}
				for _, v := range row {
					variance += (v - mean) * (v - mean) / D
				}
				for j, v := range row {
					want := (v-mean)/math.Sqrt(variance+tc.eps)*gamma[j] + beta[j]
					if !relClose(y[r*D+j], want, 1e-13, 1e-14) {
						t.Errorf("row %d, element %d: got %v, want %v", r, j, y[r*D+j], want)
					}
				}
			}
		})
	}
}

func TestEmbeddingLooksUpRows(t *testing.T) {
	const V, D = 5, 3
	table := make([]float64, V*D)
	for i := range table {
		table[i] = float64(i)*0.5 - 3
	}
	ids := []float64{4, 0, 2, 2, 1, 3}
	for _, dt := range []tensor.DType{tensor.Int32, tensor.Float32} { // a float input is cast
		t.Run(dt.String(), func(t *testing.T) {
			en := newEngine(t)
			p := en.load(func() (*graph.Graph, compileOptions) {
				g := graph.New()
				c := nn.NewContext(g, false, 1)
				c.DType = tensor.Float64
				x := g.Input("x", dt, tensor.Shape{2, 3})
				return g, outputs("emb", "y", (&nn.Embedding{LayerName: "emb", InputDim: V, OutputDim: D}).Forward(c, x))
			})
			en.setVariable("emb/embeddings", table)
			p.set("x", ids)
			p.run()
			y, shape := p.get("y")
			if !shape.Equal(tensor.Shape{2, 3, D}) {
				t.Fatalf("output shape %v, want [2, 3, %d]", shape, D)
			}
			for i, id := range ids {
				for j := range D {
					if got, want := y[i*D+j], table[int(id)*D+j]; got != want {
						t.Errorf("position %d (id %v), column %d: got %v, want %v", i, id, j, got, want)
					}
				}
			}
		})
	}
}

// BatchNormalization over another axis than the last (Keras' axis=1 on
// NHWC input normalizes each row of the images): in training the batch
// statistics of each row over the examples, columns and channels, in
// inference the moving ones; its gradients are checked by central
// differences.
func TestBatchNormalizationAxis(t *testing.T) {
	const B, H, W, C = 2, 3, 4, 2
	l := &nn.BatchNormalization{LayerName: "bn", Axis: 1}
	for _, training := range []bool{true, false} {
		r := runLayer(t, l, []layerIn{{name: "x", shape: tensor.Shape{B, H, W, C}}}, tensor.Float64, 3, training)
		r.set("bn/moving_variance", []float64{0.5, 2, 1.5})
		r.run()
		w := r.weights()
		x, gamma, beta := w["x"], w["bn/gamma"], w["bn/beta"]
		mean, variance := w["bn/moving_mean"], w["bn/moving_variance"]
		if training {
			mean, variance = make([]float64, H), make([]float64, H)
			n := float64(B * W * C)
			for i, v := range x {
				mean[(i/(W*C))%H] += v / n
			}
			for i, v := range x {
				d := v - mean[(i/(W*C))%H]
				variance[(i/(W*C))%H] += d * d / n
			}
		}
		y := r.get("out0")
		for i, v := range x {
			h := (i / (W * C)) % H
			want := (v-mean[h])/math.Sqrt(variance[h]+1e-3)*gamma[h] + beta[h]
			if !relClose(y[i], want, 1e-12, 1e-13) {
				t.Fatalf("training %v, element %d: got %v, want %v", training, i, y[i], want)
			}
		}
		r.checkGrads()
	}
}
