package nn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// mhaCase is a MultiHeadAttention under test and its inputs.
type mhaCase struct {
	name  string
	layer func(naive bool) *nn.MultiHeadAttention
	ins   []layerIn
}

func mhaCases() []mhaCase {
	const B, Tq, Tk, d = 2, 5, 7, 6
	return []mhaCase{
		{"self/causal", func(naive bool) *nn.MultiHeadAttention {
			return &nn.MultiHeadAttention{LayerName: "mha", NumHeads: 2, KeyDim: 4, UseCausalMask: true, Naive: naive}
		}, []layerIn{{name: "q", shape: tensor.Shape{B, Tq, d}}}},
		{"cross/key_mask", func(naive bool) *nn.MultiHeadAttention {
			return &nn.MultiHeadAttention{LayerName: "mha", NumHeads: 3, KeyDim: 2, OutputDim: 5, KeyInput: true, MaskInput: true, Naive: naive}
		}, []layerIn{{name: "q", shape: tensor.Shape{B, Tq, d}}, {name: "v", shape: tensor.Shape{B, Tk, 3}},
			{name: "k", shape: tensor.Shape{B, Tk, 4}}, {name: "mask", shape: tensor.Shape{B, Tq, Tk}, dtype: tensor.Bool}}},
		{"cross/causal_mask", func(naive bool) *nn.MultiHeadAttention {
			return &nn.MultiHeadAttention{LayerName: "mha", NumHeads: 1, KeyDim: 8, UseCausalMask: true, MaskInput: true, Naive: naive}
		}, []layerIn{{name: "q", shape: tensor.Shape{B, Tq, d}}, {name: "v", shape: tensor.Shape{B, Tk, d}},
			{name: "mask", shape: tensor.Shape{B, 1, Tk}, dtype: tensor.Bool}}},
	}
}

// fillMask sets a mask input with random bits, every query seeing key 0
// (a row that sees nothing differs between the two paths by design).
func fillMask(r *layerRun, shape tensor.Shape) {
	if _, ok := r.ins["mask"]; !ok {
		return
	}
	rng := rand.New(rand.NewPCG(5, 6))
	m := make([]float64, shape.Size())
	for i := range m {
		if i%shape[len(shape)-1] == 0 || rng.IntN(3) > 0 {
			m[i] = 1
		}
	}
	r.set("mask", m)
}

// TestMultiHeadAttentionMatchesNaive compares the layer on the
// memory-efficient op with the layer built from products and a softmax
// (Keras' computation), outputs and every gradient: to 1e-12 in float64
// (the op's reference loop) and within float32 rounding in float32 (the
// tiled kernels).
func TestMultiHeadAttentionMatchesNaive(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
		rtol, atol := 1e-12, 1e-13
		if dt == tensor.Float32 {
			rtol, atol = 2e-4, 2e-5
		}
		for _, tc := range mhaCases() {
			t.Run(dt.String()+"/"+tc.name, func(t *testing.T) {
				fast := runLayer(t, tc.layer(false), tc.ins, dt, 3, false)
				naive := runLayer(t, tc.layer(true), tc.ins, dt, 3, false)
				for _, in := range tc.ins {
					if in.name == "mask" {
						fillMask(fast, in.shape)
						fillMask(naive, in.shape)
					}
				}
				fast.run()
				naive.run()
				testutil.RequireClose(t, "output", fast.get("out0"), naive.get("out0"), rtol, atol)
				for _, name := range fast.names {
					testutil.RequireClose(t, "gradient of "+name, fast.get("grad:"+name), naive.get("grad:"+name), rtol, atol)
				}
			})
		}
	}
}

// TestMultiHeadAttentionGradients checks the layer's gradients (the
// attention op's, in float64) against central differences.
func TestMultiHeadAttentionGradients(t *testing.T) {
	for i, tc := range mhaCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := runLayer(t, tc.layer(false), tc.ins, tensor.Float64, uint64(20+i), false)
			for _, in := range tc.ins {
				if in.name == "mask" {
					fillMask(r, in.shape)
				}
			}
			r.checkGrads()
		})
	}
}

// TestMultiHeadAttentionFormula computes Keras' MultiHeadAttention in
// plain Go (einsum projections with the [d, H, key_dim] kernels, scaled
// dot products, causal softmax, the [H, key_dim, d] output kernel) and
// compares the layer's output with it.
func TestMultiHeadAttentionFormula(t *testing.T) {
	const B, T, d, H, k = 2, 4, 3, 2, 2
	l := &nn.MultiHeadAttention{LayerName: "mha", NumHeads: H, KeyDim: k, UseCausalMask: true}
	r := runLayer(t, l, []layerIn{{name: "x", shape: tensor.Shape{B, T, d}}}, tensor.Float64, 4, false)
	r.run()
	w := map[string][]float64{}
	for i, n := range r.names {
		w[n] = r.vals[i]
	}
	x := w["x"]
	proj := func(name string, b, t, h, j int) float64 { // einsum abc,cde->abde + bias
		v := w["mha/"+name+"/bias"][h*k+j]
		for c := 0; c < d; c++ {
			v += x[(b*T+t)*d+c] * w["mha/"+name+"/kernel"][(c*H+h)*k+j]
		}
		return v
	}
	want := make([]float64, B*T*d)
	for b := 0; b < B; b++ {
		for i := 0; i < T; i++ {
			o := make([]float64, H*k) // [H, k]
			for h := 0; h < H; h++ {
				s := make([]float64, i+1)
				m := math.Inf(-1)
				for j := 0; j <= i; j++ { // causal: keys j <= i
					for e := 0; e < k; e++ {
						s[j] += proj("query", b, i, h, e) * proj("key", b, j, h, e) / math.Sqrt(k)
					}
					m = max(m, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - m)
					sum += s[j]
				}
				for j := range s {
					for e := 0; e < k; e++ {
						o[h*k+e] += s[j] / sum * proj("value", b, j, h, e)
					}
				}
			}
			for c := 0; c < d; c++ { // einsum abcd,cde->abe + bias
				v := w["mha/attention_output/bias"][c]
				for he := range o {
					v += o[he] * w["mha/attention_output/kernel"][he*d+c]
				}
				want[(b*T+i)*d+c] = v
			}
		}
	}
	testutil.RequireClose(t, "output", r.get("out0"), want, 1e-12, 1e-13)
}

// TestMultiHeadAttentionParams counts Keras' parameters:
// 3·(d·H·k + H·k) + H·k·d + d for query dimension d.
func TestMultiHeadAttentionParams(t *testing.T) {
	const d, H, k = 5, 2, 3
	m := &nn.Sequential{Name: "m", InputShape: tensor.Shape{4, d}, Layers: []nn.Layer{&nn.MultiHeadAttention{LayerName: "mha", NumHeads: H, KeyDim: k}}}
	total, _, err := nn.Params(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3*(d*H*k+H*k) + H*k*d + d; total != want {
		t.Errorf("got %d parameters, want %d", total, want)
	}
}
