package train_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// deepMLP is 16 dense layers of width 1024 (relu) and a 10-way head.
func deepMLP() *nn.Sequential {
	m := &nn.Sequential{InputShape: tensor.Shape{1024}}
	for i := 0; i < 16; i++ {
		m.Layers = append(m.Layers, &nn.Dense{LayerName: fmt.Sprintf("dense_%d", i), Units: 1024, Activation: "relu"})
	}
	m.Layers = append(m.Layers, &nn.Dense{LayerName: "head", Units: 10})
	return m
}

func deepConfig(remat bool) train.Config {
	return train.Config{Model: deepMLP(), Optimizer: &optim.SGD{}, Epochs: 1, Batch: 256, Seed: 1, Remat: remat}
}

// TestRematCutsActivations: on a 16-layer MLP of width 1024 at batch 256,
// √n checkpoints cut the plan's activation bytes by at least 3x.
func TestRematCutsActivations(t *testing.T) {
	keepRun, err := train.PlanFor(deepConfig(false), described(tensor.Shape{1024}, 256, 10))
	if err != nil {
		t.Fatal(err)
	}
	rematRun, err := train.PlanFor(deepConfig(true), described(tensor.Shape{1024}, 256, 10))
	if err != nil {
		t.Fatal(err)
	}
	keep, keepTotals, remat, rematTotals := keepRun.Step, keepRun.Totals, rematRun.Step, rematRun.Totals
	a, b := keep.Totals[mem.Activation], remat.Totals[mem.Activation]
	t.Logf("activations %s -> %s (%.2fx); arena %s -> %s; run total %s -> %s", mem.FormatBytes(a), mem.FormatBytes(b), float64(a)/float64(b),
		mem.FormatBytes(keep.ArenaBytes), mem.FormatBytes(remat.ArenaBytes), mem.FormatBytes(sum(keepTotals)), mem.FormatBytes(sum(rematTotals)))
	if b*3 > a {
		t.Errorf("remat keeps %d B of activations, no better than a third of %d B", b, a)
	}
	if remat.ArenaBytes >= keep.ArenaBytes {
		t.Errorf("remat arena %d B is not smaller than %d B", remat.ArenaBytes, keep.ArenaBytes)
	}
}

func sum(c [mem.NumCategories]int64) int64 {
	var s int64
	for _, b := range c {
		s += b
	}
	return s
}

// BenchmarkDeepMLPStep times one training step of the 16-layer MLP with
// and without rematerialization (run the two side by side, interleaved:
// go test -run '^$' -bench DeepMLPStep -count 5 ./train).
func BenchmarkDeepMLPStep(b *testing.B) {
	data, _ := datasets.Synthetic(tensor.Shape{1024}, 256, 0, 10, 3)
	for _, remat := range []bool{false, true} {
		b.Run(fmt.Sprintf("remat=%v", remat), func(b *testing.B) {
			cfg := deepConfig(remat)
			cfg.Epochs, cfg.Warmup = b.N, 1<<30
			tr, err := train.New(cfg, train.InMemory(data, nil))
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			b.ResetTimer()
			if _, err := tr.Fit(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestRematUnder16BitStorage: recomputation changes no number under a
// 16-bit policy, in models whose ops have further outputs (a fused layer
// norm's row statistics, attention's log-sum-exp). Before, a recomputed
// part read the 16-bit copy's up-cast as if it were the op (a wrong
// gradient), and a language model with layer norm did not build under a
// 16-bit policy at all.
func TestRematUnder16BitStorage(t *testing.T) {
	lnModel := &nn.Sequential{InputShape: tensor.Shape{16}, Layers: []nn.Layer{
		&nn.Dense{LayerName: "d0", Units: 32, Activation: "relu"},
		&nn.LayerNormalization{LayerName: "ln", Fused: true},
		&nn.Dense{LayerName: "d1", Units: 32, Activation: "relu"},
		&nn.Dense{LayerName: "d2", Units: 32, Activation: "relu"},
		&nn.Dense{LayerName: "d3", Units: 4}}}
	ex := blobs(3, 64, 16, 4)
	for _, c := range []struct {
		name  string
		model nn.Model
		data  func() *train.Data
	}{
		{"layer norm", lnModel, func() *train.Data { return train.InMemory(ex, ex) }},
		{"gpt", smallGPT(8), func() *train.Data { return train.OnText(textData(8)) }},
	} {
		for _, p := range []step.Precision{step.MixedBFloat16, step.MixedFloat16} {
			var losses []float64
			for _, remat := range []bool{false, true} {
				cfg := train.Config{Model: c.model, Optimizer: &optim.SGD{}, Schedule: optim.Constant(1), Epochs: 1, Batch: 8, MaxSteps: 1,
					Precision: p, Remat: remat, NoWatchdog: true}
				tr, h := fitOn(t, cfg, c.data())
				tr.Close()
				losses = append(losses, h.Epochs[0].ValLoss)
			}
			if losses[0] != losses[1] || math.IsNaN(losses[0]) {
				t.Errorf("%s under %v: validation loss after one step %v, with recomputation %v; want equal", c.name, p, losses[0], losses[1])
			}
		}
	}
}
