package nn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// TestReferenceSequenceModels counts the reference models' parameters:
// peers/seq.py's gpt (875,520) and its lstm with Keras' one bias per gate
// (493,824 - 4·256 = 492,800).
func TestReferenceSequenceModels(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int
	}{{"gpt", 875520}, {"lstm", 492800}} {
		m, err := nn.NewModel(tc.name, tensor.Shape{128}, 256)
		if err != nil {
			t.Fatal(err)
		}
		total, trainable, err := nn.Params(m)
		if err != nil {
			t.Fatal(err)
		}
		if total != tc.want || trainable != tc.want {
			t.Errorf("%s: got %d parameters (%d trainable), want %d", tc.name, total, trainable, tc.want)
		}
	}
}

// load compiles m's inference step at batch 1 and loads it on e.
func loadInfer(t *testing.T, e *runtime.Engine, m nn.Model) *runtime.Executable {
	t.Helper()
	p, err := step.Compile(step.Config{Model: m, Target: cpu.New(0)}, 1, step.Infer, (*step.Builder).Standard)
	if err != nil {
		t.Fatal(err)
	}
	x, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return x
}

// TestDecodersMatchTheModels decodes a window token by token through each
// model's decoder (the gpt's key and value caches, the lstm's state) and
// compares the logits at every position with the whole window's, run by
// the model itself on the same weights.
func TestDecodersMatchTheModels(t *testing.T) {
	const T, V = 9, 11
	gpt := &nn.GPT{Vocab: V, Context: T, Dim: 8, Heads: 2, Blocks: 2, Hidden: 12}
	lstm := &nn.LSTMLM{Vocab: V, Context: T, Embed: 5, Units: 6}
	for _, tc := range []struct {
		name    string
		model   nn.Model
		decoder nn.Model
	}{{"gpt", gpt, gpt.Decoder()}, {"lstm", lstm, lstm.Decoder()}} {
		t.Run(tc.name, func(t *testing.T) {
			e := runtime.NewEngine(cpu.New(0), 0)
			defer e.Close()
			full := loadInfer(t, e, tc.model)
			dec := loadInfer(t, e, tc.decoder)
			rng := rand.New(rand.NewPCG(1, 2))
			for _, v := range e.Variables() {
				x := v.Tensor()
				for i := 0; i < x.Len(); i++ {
					x.SetFloat64At(i, 0.3*rng.NormFloat64())
				}
			}
			for _, v := range e.Variables() { // the caches and states start empty
				if n := v.Name; len(n) > 6 && (n[:6] == "cache/" || n[:6] == "state/") {
					clear(v.Tensor().Bytes())
				}
			}
			tokens := make([]int32, T)
			for i := range tokens {
				tokens[i] = int32(rng.IntN(V))
			}
			in, _ := full.Input("x")
			copy(in.Int32s(), tokens)
			if err := full.Run(); err != nil {
				t.Fatal(err)
			}
			out, _ := full.Output("out")
			want := testutil.ToFloat64s(out.Float32s()) // [1, T, V]
			var got []float64
			for pos, tok := range tokens {
				x, _ := dec.Input("x")
				x.Int32s()[0] = tok
				if p, err := dec.Input("pos"); err == nil {
					p.Int32s()[0] = int32(pos)
					m, _ := dec.Input("mask")
					mb := m.Bytes()
					clear(mb)
					for j := 0; j <= pos; j++ {
						mb[j] = 1
					}
				}
				if err := dec.Run(); err != nil {
					t.Fatal(err)
				}
				o, _ := dec.Output("out")
				got = append(got, testutil.ToFloat64s(o.Float32s())...)
			}
			testutil.RequireClose(t, "logits", got, want, 1e-4, 1e-5)
		})
	}
}

// TestSequenceStepsAllocateNothing: a training step of each reference
// model (attention, layer norm, gelu, the unrolled LSTM and its slices'
// summed gradients, clipping, Adam) runs without allocating.
func TestSequenceStepsAllocateNothing(t *testing.T) {
	const T = 8
	for _, tc := range []struct {
		name  string
		model nn.Model
	}{{"gpt", &nn.GPT{Vocab: 16, Context: T, Dim: 8, Heads: 2, Blocks: 1, Hidden: 16}}, {"lstm", &nn.LSTMLM{Vocab: 16, Context: T, Embed: 4, Units: 4}}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := step.Compile(step.Config{Model: tc.model, Target: cpu.New(2), ClipNorm: 1}, 4, step.Train, (*step.Builder).Standard)
			if err != nil {
				t.Fatal(err)
			}
			e := runtime.NewEngine(cpu.New(2), 0)
			defer e.Close()
			x, err := e.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			run := func() {
				if err := x.Run(); err != nil {
					t.Fatal(err)
				}
			}
			run()
			if n := testing.AllocsPerRun(5, run); n != 0 {
				t.Errorf("a step allocates %v times, want 0", n)
			}
		})
	}
}
