package nn_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

func lstm(units int, opts ...func(*nn.LSTM)) *nn.LSTM {
	l := &nn.LSTM{}
	l.LayerName, l.Units = "lstm", units
	for _, o := range opts {
		o(l)
	}
	return l
}

// TestRecurrentOneStepByHand checks one step of each cell against values
// worked out by hand from Keras' equations (in=1, units=1, x=1; see the
// comments; computed to 12 digits).
func TestRecurrentOneStepByHand(t *testing.T) {
	tests := []struct {
		name    string
		layer   any
		ins     []layerIn
		weights map[string][]float64
		states  map[string][]float64
		want    []float64 // h, then c for the LSTM
	}{
		{
			// z = [0.5, -0.5+1, 1, 2]: i = σ(0.5), g = tanh 1, o = σ(2);
			// c = i·g = 0.474061388963, h = o·tanh c = 0.388849884437
			name: "lstm/zero_state", layer: lstm(1, func(l *nn.LSTM) { l.ReturnState = true }),
			ins:     []layerIn{{name: "x", shape: tensor.Shape{1, 1, 1}}},
			weights: map[string][]float64{"lstm/kernel": {0.5, -0.5, 1, 2}, "lstm/recurrent_kernel": {0.1, 0.2, 0.3, 0.4}, "lstm/bias": {0, 1, 0, 0}},
			want:    []float64{0.388849884437, 0.474061388963},
		},
		{
			// h0 = 0.5, c0 = -0.25: z = [0.55, 0.6, 1.15, 2.2];
			// c = σ(0.6)·c0 + σ(0.55)·tanh(1.15) = 0.357152888979,
			// h = σ(2.2)·tanh c = 0.308518892888
			name: "lstm/initial_state", layer: lstm(1, func(l *nn.LSTM) { l.ReturnState, l.InitialState = true, true }),
			ins:     []layerIn{{name: "x", shape: tensor.Shape{1, 1, 1}}, {name: "h0", shape: tensor.Shape{1, 1}}, {name: "c0", shape: tensor.Shape{1, 1}}},
			weights: map[string][]float64{"lstm/kernel": {0.5, -0.5, 1, 2}, "lstm/recurrent_kernel": {0.1, 0.2, 0.3, 0.4}, "lstm/bias": {0, 1, 0, 0}},
			states:  map[string][]float64{"h0": {0.5}, "c0": {-0.25}},
			want:    []float64{0.308518892888, 0.357152888979},
		},
		{
			// reset_after: x_zrh = [0.6, -0.8, 2.3], u_zrh = h0·U + b_rec =
			// [0.05, 0.35, -0.05]; z = σ(0.65), r = σ(-0.45),
			// h' = tanh(2.3 + r·(-0.05)), h = z·h0 + (1-z)·h' = 0.664399795700
			name: "gru/reset_after", layer: gru(1, true),
			ins:     []layerIn{{name: "x", shape: tensor.Shape{1, 1, 1}}, {name: "h0", shape: tensor.Shape{1, 1}}},
			weights: map[string][]float64{"gru/kernel": {0.5, -1, 2}, "gru/recurrent_kernel": {0.3, 0.6, -0.9}, "gru/bias": {0.1, 0.2, 0.3, -0.1, 0.05, 0.4}},
			states:  map[string][]float64{"h0": {0.5}},
			want:    []float64{0.664399795700},
		},
		{
			// reset_after=False: z = σ(0.6+0.15), r = σ(-0.8+0.3),
			// h' = tanh(2.3 + (r·h0)·(-0.9)), h = 0.651477246361
			name: "gru/reset_before", layer: gru(1, false),
			ins:     []layerIn{{name: "x", shape: tensor.Shape{1, 1, 1}}, {name: "h0", shape: tensor.Shape{1, 1}}},
			weights: map[string][]float64{"gru/kernel": {0.5, -1, 2}, "gru/recurrent_kernel": {0.3, 0.6, -0.9}, "gru/bias": {0.1, 0.2, 0.3}},
			states:  map[string][]float64{"h0": {0.5}},
			want:    []float64{0.651477246361},
		},
		{
			// h = tanh(1·0.5 + 0.5·(-2) + 0.25) = tanh(-0.25)
			name: "simple_rnn", layer: simpleRNN(1),
			ins:     []layerIn{{name: "x", shape: tensor.Shape{1, 1, 1}}, {name: "h0", shape: tensor.Shape{1, 1}}},
			weights: map[string][]float64{"rnn/kernel": {0.5}, "rnn/recurrent_kernel": {-2}, "rnn/bias": {0.25}},
			states:  map[string][]float64{"h0": {0.5}},
			want:    []float64{math.Tanh(-0.25)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runLayer(t, tc.layer, tc.ins, tensor.Float64, 1, false)
			r.set("x", []float64{1})
			for k, v := range tc.weights {
				r.set(k, v)
			}
			for k, v := range tc.states {
				r.set(k, v)
			}
			r.run()
			got := r.get("out0")
			if len(tc.want) == 2 {
				got = append(r.get("out1"), r.get("out2")...)
			}
			testutil.RequireClose(t, tc.name, got, tc.want, 1e-11, 1e-12)
		})
	}
}

func gru(units int, resetAfter bool) *nn.GRU {
	l := &nn.GRU{NoResetAfter: !resetAfter}
	l.LayerName, l.Units, l.InitialState = "gru", units, true
	return l
}

func simpleRNN(units int) *nn.SimpleRNN {
	l := &nn.SimpleRNN{}
	l.LayerName, l.Units, l.InitialState = "rnn", units, true
	return l
}

// refLSTM runs Keras' LSTM equations in float64 over x [B, T, in] from
// h, c [B, u]: it returns every step's h (in the order computed) and the
// final c.
func refLSTM(x []float64, B, T, in, u int, w, rk, bias, h, c []float64, backwards bool) (hs [][]float64, cFinal []float64) {
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	h, c = append([]float64(nil), h...), append([]float64(nil), c...)
	for s := 0; s < T; s++ {
		t := s
		if backwards {
			t = T - 1 - s
		}
		nh, nc := make([]float64, B*u), make([]float64, B*u)
		for b := 0; b < B; b++ {
			z := make([]float64, 4*u)
			for j := range z {
				z[j] = bias[j]
				for k := 0; k < in; k++ {
					z[j] += x[(b*T+t)*in+k] * w[k*4*u+j]
				}
				for k := 0; k < u; k++ {
					z[j] += h[b*u+k] * rk[k*4*u+j]
				}
			}
			for j := 0; j < u; j++ {
				i, f, g, o := sig(z[j]), sig(z[u+j]), math.Tanh(z[2*u+j]), sig(z[3*u+j])
				nc[b*u+j] = f*c[b*u+j] + i*g
				nh[b*u+j] = o * math.Tanh(nc[b*u+j])
			}
		}
		h, c = nh, nc
		hs = append(hs, h)
	}
	return hs, c
}

// TestLSTMMatchesEquations runs a 3-step LSTM (both directions, with and
// without initial states) against refLSTM.
func TestLSTMMatchesEquations(t *testing.T) {
	const B, T, in, u = 2, 3, 3, 4
	for _, tc := range []struct {
		name            string
		backwards, init bool
	}{{"forward", false, false}, {"backwards", true, false}, {"initial_state", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			l := lstm(u, func(l *nn.LSTM) {
				l.ReturnSequences, l.ReturnState, l.GoBackwards, l.InitialState = true, true, tc.backwards, tc.init
			})
			ins := []layerIn{{name: "x", shape: tensor.Shape{B, T, in}}}
			if tc.init {
				ins = append(ins, layerIn{name: "h0", shape: tensor.Shape{B, u}}, layerIn{name: "c0", shape: tensor.Shape{B, u}})
			}
			r := runLayer(t, l, ins, tensor.Float64, 2, false)
			r.run()
			val := func(name string) []float64 {
				for i, n := range r.names {
					if n == name {
						return r.vals[i]
					}
				}
				return make([]float64, B*u)
			}
			hs, c := refLSTM(val("x"), B, T, in, u, val("lstm/kernel"), val("lstm/recurrent_kernel"), val("lstm/bias"), val("h0"), val("c0"), tc.backwards)
			seq := make([]float64, 0, B*T*u) // [B, T, u] in the order computed
			for b := 0; b < B; b++ {
				for s := 0; s < T; s++ {
					seq = append(seq, hs[s][b*u:(b+1)*u]...)
				}
			}
			testutil.RequireClose(t, "sequences", r.get("out0"), seq, 1e-12, 1e-13)
			testutil.RequireClose(t, "h", r.get("out1"), hs[T-1], 1e-12, 1e-13)
			testutil.RequireClose(t, "c", r.get("out2"), c, 1e-12, 1e-13)
		})
	}
}

// TestRecurrentGradients checks the unrolled layers' gradients (every
// weight and input, through the summed slices of their steps) against
// central differences in float64.
func TestRecurrentGradients(t *testing.T) {
	const B, T, in, u = 2, 4, 3, 3
	x := layerIn{name: "x", shape: tensor.Shape{B, T, in}}
	h0 := layerIn{name: "h0", shape: tensor.Shape{B, u}}
	tests := []struct {
		name  string
		layer any
		ins   []layerIn
	}{
		{"lstm", lstm(u, func(l *nn.LSTM) { l.ReturnSequences, l.ReturnState = true, true }), []layerIn{x}},
		{"lstm/initial_state", lstm(u, func(l *nn.LSTM) { l.ReturnSequences, l.InitialState = true, true }),
			[]layerIn{x, h0, {name: "c0", shape: tensor.Shape{B, u}}}},
		{"gru/reset_after", gru(u, true), []layerIn{x, h0}},
		{"gru/reset_before", gru(u, false), []layerIn{x, h0}},
		{"simple_rnn", simpleRNN(u), []layerIn{x, h0}},
		{"bidirectional/concat", &nn.Bidirectional{LayerName: "bi", Layer: lstm(u, func(l *nn.LSTM) { l.ReturnSequences = true })}, []layerIn{x}},
		{"bidirectional/ave", &nn.Bidirectional{LayerName: "bi", MergeMode: "ave", Layer: func() *nn.GRU { g := gru(u, true); g.InitialState = false; return g }()}, []layerIn{x}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runLayer(t, tc.layer, tc.ins, tensor.Float64, uint64(10+i), false).checkGrads()
		})
	}
}

// TestRecurrentParams counts Keras' parameters: LSTM 4u(in+u+1), GRU
// 3u(in+u+2) with reset_after (3u(in+u+1) without), SimpleRNN u(in+u+1),
// Bidirectional twice its layer's.
func TestRecurrentParams(t *testing.T) {
	const in, u = 10, 7
	for _, tc := range []struct {
		name  string
		layer nn.Layer
		want  int
	}{
		{"lstm", lstm(u), 4 * u * (in + u + 1)},
		{"gru", &nn.GRU{}, 3 * u * (in + u + 2)},
		{"simple_rnn", simpleRNN(u), u * (in + u + 1)},
		{"bidirectional", &nn.Bidirectional{LayerName: "bi", Layer: lstm(u)}, 2 * 4 * u * (in + u + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if g, ok := tc.layer.(*nn.GRU); ok {
				g.LayerName, g.Units = "gru", u
			}
			if s, ok := tc.layer.(*nn.SimpleRNN); ok {
				s.InitialState = false
			}
			m := &nn.Sequential{Name: "m", InputShape: tensor.Shape{5, in}, Layers: []nn.Layer{tc.layer}}
			total, _, err := nn.Params(m)
			if err != nil {
				t.Fatal(err)
			}
			if total != tc.want {
				t.Errorf("got %d parameters, want %d", total, tc.want)
			}
		})
	}
}

// TestBidirectionalStates: with return_state the forward layer's states,
// then the backward one's, follow the merged output; with initial_state
// they are taken in that order, and the backward layer's final state is
// the one the reversed sequence ends in (its output at input step 0).
func TestBidirectionalStates(t *testing.T) {
	const B, T, in, u = 2, 3, 4, 5
	l := &nn.Bidirectional{LayerName: "bi", Layer: lstm(u, func(l *nn.LSTM) { l.ReturnSequences, l.ReturnState, l.InitialState = true, true, true })}
	if n := l.NumOutputs(); n != 5 {
		t.Fatalf("NumOutputs %d, want 5 (output, forward h and c, backward h and c)", n)
	}
	state := tensor.Shape{B, u}
	r := runLayer(t, l, []layerIn{{name: "x", shape: tensor.Shape{B, T, in}}, {name: "fh", shape: state}, {name: "fc", shape: state},
		{name: "bh", shape: state}, {name: "bc", shape: state}}, tensor.Float64, 4, false)
	r.run()
	seq := r.get("out0") // [B, T, 2u]: forward then backward halves
	fh, bh := r.get("out1"), r.get("out3")
	for b := 0; b < B; b++ {
		for j := 0; j < u; j++ {
			if got, want := seq[(b*T+T-1)*2*u+j], fh[b*u+j]; got != want {
				t.Fatalf("forward half at the last step %v, forward h %v", got, want)
			}
			if got, want := seq[(b*T+0)*2*u+u+j], bh[b*u+j]; got != want {
				t.Fatalf("backward half at step 0 %v, backward h %v", got, want)
			}
		}
	}
	r.checkGrads()
}
