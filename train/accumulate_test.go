package train_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/data"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// weightsAfterOneStep trains one update on 128 examples and returns every
// variable's values by name.
func weightsAfterOneStep(t *testing.T, m *nn.Sequential, data *data.Examples, opt optim.Optimizer, accumulate, epochs int) map[string][]float64 {
	t.Helper()
	cfg := train.Config{Model: m, Optimizer: opt, Schedule: optim.Constant(0.05), Epochs: epochs, Batch: 128, Seed: 5, Accumulate: accumulate}
	tr, h := fit(t, cfg, data)
	defer tr.Close()
	if h.Steps != int64(epochs) {
		t.Fatalf("%d optimizer steps, want %d", h.Steps, epochs)
	}
	out := map[string][]float64{}
	for _, v := range tr.Engine().Variables() {
		if v.Role != 0 { // params only (accumulators and optimizer state differ by design)
			continue
		}
		x := v.Tensor()
		vals := make([]float64, x.Len())
		for i := range vals {
			vals[i] = x.Float64At(i)
		}
		out[v.Name] = vals
	}
	return out
}

func TestAccumulationMatchesOneBigBatch(t *testing.T) {
	cnnData := blobs(9, 128, 64, 4)
	cnnData.Shape = tensor.Shape{8, 8, 1}
	cnn, err := nn.ModelByName("cnn", tensor.Shape{8, 8, 1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		model *nn.Sequential
		data  *data.Examples
	}{
		{"mlp", &nn.Sequential{InputShape: tensor.Shape{8}, Layers: []nn.Layer{
			&nn.Dense{LayerName: "dense", Units: 32, Activation: "relu"},
			&nn.Dense{LayerName: "dense_1", Units: 4},
		}}, blobs(8, 128, 8, 4)},
		{"cnn", cnn, cnnData},
	}
	for _, c := range cases {
		// SGD for both models; Adam only for the MLP: Adam's first step is
		// about lr·g/|g|, which turns float32 summation-order noise in a
		// near-zero gradient (the CNN's dead ReLUs) into an update of up to lr.
		opts := []optim.Optimizer{&optim.SGD{}, &optim.SGD{Momentum: 0.9}}
		if c.name == "mlp" {
			opts = append(opts, &optim.Adam{})
		}
		for _, opt := range opts {
			t.Run(c.name+"/"+opt.Name(), func(t *testing.T) {
				one := weightsAfterOneStep(t, c.model, c.data, opt, 1, 1)
				four := weightsAfterOneStep(t, c.model, c.data, opt, 4, 1)
				init := weightsAfterOneStep(t, c.model, c.data, opt, 1, 0)
				worst, moved := 0.0, 0.0
				for name, w := range one {
					for i := range w {
						worst = max(worst, math.Abs(w[i]-four[name][i])/max(math.Abs(w[i]), 1e-3))
						moved = max(moved, math.Abs(w[i]-init[name][i]))
					}
				}
				t.Logf("largest relative difference %.3g (the step moved weights by up to %.3g)", worst, moved)
				if worst > 1e-5 {
					t.Errorf("4 micro-batches of 32 differ from one batch of 128 by %.3g relative, want <= 1e-5", worst)
				}
				if moved == 0 {
					t.Error("the step did not change the weights: the comparison proves nothing")
				}
			})
		}
	}
}

// TestAccumulationTailIsExact: a last partial batch of 40 examples, run as
// a micro-batch of 32 and one of 8 weighted by their shares, gives the
// weights of one plain step on the 40.
func TestAccumulationTailIsExact(t *testing.T) {
	data := blobs(10, 168, 8, 4) // one batch of 128, then 40
	run := func(k int) map[string][]float64 {
		model := &nn.Sequential{InputShape: tensor.Shape{8}, Layers: []nn.Layer{ // no dropout: masks differ per micro-batch by design
			&nn.Dense{LayerName: "dense", Units: 32, Activation: "relu"},
			&nn.Dense{LayerName: "dense_1", Units: 4},
		}}
		cfg := train.Config{Model: model, Optimizer: &optim.SGD{Momentum: 0.9}, Schedule: optim.Constant(0.05), Epochs: 1, Batch: 128, Seed: 5, Accumulate: k}
		tr, h := fit(t, cfg, data)
		defer tr.Close()
		if h.Steps != 2 {
			t.Fatalf("%d steps, want 2", h.Steps)
		}
		out := map[string][]float64{}
		for _, v := range tr.Engine().Variables() {
			x := v.Tensor()
			for i := 0; i < x.Len(); i++ {
				out[v.Name] = append(out[v.Name], x.Float64At(i))
			}
		}
		return out
	}
	one, four := run(1), run(4)
	worst := 0.0
	for name, w := range one {
		if len(four[name]) == 0 {
			continue // accumulators exist only with k > 1
		}
		for i := range w {
			worst = max(worst, math.Abs(w[i]-four[name][i])/max(math.Abs(w[i]), 1e-3))
		}
	}
	if worst > 1e-5 {
		t.Errorf("accumulated tail differs by %.3g relative, want <= 1e-5", worst)
	}
}
