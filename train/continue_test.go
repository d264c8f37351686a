package train_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// A run that continues another's optimizer (its weights by SetWeight, its
// Adam moments and step count by ContinueOptimizer, as a Keras file's
// state is loaded) ends with the weights of one uninterrupted run, to the
// rounding of the examples' order in the batch (each epoch shuffles its
// one batch anew); the same state with the step count left at 0 ends far
// from it (the bias correction restarts: a first step 10x too long). A
// state with a slot missing is refused.
func TestContinueOptimizer(t *testing.T) {
	data := blobs(5, 64, 8, 4) // one full batch: every step sees the same examples
	model := func() *nn.Sequential {
		return &nn.Sequential{InputShape: tensor.Shape{8}, Layers: []nn.Layer{
			&nn.Dense{LayerName: "dense", Units: 16, Activation: "relu"}, &nn.Dense{LayerName: "dense_1", Units: 4}}}
	}
	cfg := func(steps int64) train.Config {
		return train.Config{Model: model(), Optimizer: &optim.Adam{}, Epochs: 100, MaxSteps: steps, Batch: 64, Seed: 3}
	}
	values := func(tr *train.Trainer, role graph.Role) map[string]tensor.Tensor {
		out := map[string]tensor.Tensor{}
		for _, v := range tr.Engine().Variables() {
			if v.Role == role {
				x := tensor.New(v.DType, v.Shape.Clone())
				if err := v.Read(x.Bytes()); err != nil {
					t.Fatal(err)
				}
				out[v.Name] = x
			}
		}
		return out
	}
	whole, _ := fit(t, cfg(10), data)
	want := values(whole, graph.RoleParam)
	whole.Close()
	first, _ := fit(t, cfg(4), data)
	weights, state := values(first, graph.RoleParam), values(first, graph.RoleOptState)
	first.Close()
	if len(state) != 8 {
		t.Fatalf("%d optimizer state variables, want Adam's m and v of 2 kernels and 2 biases: %v", len(state), state)
	}
	rest := func(steps int64, slots map[string]tensor.Tensor) (map[string]tensor.Tensor, error) {
		tr, err := train.New(cfg(6), train.InMemory(data, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		for name, w := range weights {
			if err := tr.SetWeight(name, w); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.ContinueOptimizer(slots, steps); err != nil {
			return nil, err
		}
		if _, err := tr.Fit(t.Context()); err != nil {
			t.Fatal(err)
		}
		return values(tr, graph.RoleParam), nil
	}
	// the largest difference of a weight, relative to its variable's largest magnitude
	diff := func(a, b map[string]tensor.Tensor) float64 {
		worst := 0.0
		for n, x := range a {
			scale, d := 1e-30, 0.0
			for i, v := range x.Float32s() {
				w := b[n].Float32s()[i]
				scale, d = max(scale, math.Abs(float64(w))), max(d, math.Abs(float64(v-w)))
			}
			worst = max(worst, d/scale)
		}
		return worst
	}
	got, err := rest(4, state)
	if err != nil {
		t.Fatal(err)
	}
	restarted, err := rest(0, state)
	if err != nil {
		t.Fatal(err)
	}
	dc, dr := diff(got, want), diff(restarted, want)
	t.Logf("continued: %.2g from the uninterrupted run; bias correction restarted: %.2g", dc, dr)
	if !(dc < 1e-4) || !(dr > 100*dc) {
		t.Errorf("continued %.2g, restarted %.2g from the uninterrupted run: want under 1e-4 and over 100x that", dc, dr)
	}
	short := map[string]tensor.Tensor{}
	for n, x := range state {
		if n != "dense/kernel/m" {
			short[n] = x
		}
	}
	if _, err := rest(4, short); err == nil {
		t.Error("a state without dense/kernel/m: no error")
	}
}
