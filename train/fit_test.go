package train_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/data"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// blobs returns n examples of d features in c Gaussian clusters.
func blobs(seed uint64, n, d, c int) *data.Examples {
	rng := rand.New(rand.NewPCG(seed, 1))
	centers := make([]float64, c*d)
	for i := range centers {
		centers[i] = rng.NormFloat64() * 2
	}
	e := &data.Examples{Name: "blobs", Shape: tensor.Shape{d}, N: n, Floats: make([]float32, n*d), Labels: make([]int32, n), Classes: c}
	for i := 0; i < n; i++ {
		k := rng.IntN(c)
		e.Labels[i] = int32(k)
		for j := 0; j < d; j++ {
			e.Floats[i*d+j] = float32(centers[k*d+j] + rng.NormFloat64())
		}
	}
	return e
}

func mlp() *nn.Sequential {
	return &nn.Sequential{InputShape: tensor.Shape{8}, Layers: []nn.Layer{
		&nn.Dense{LayerName: "dense", Units: 32, Activation: "relu"},
		&nn.Dropout{LayerName: "dropout", Rate: 0.1},
		&nn.Dense{LayerName: "dense_1", Units: 4},
	}}
}

func fit(t *testing.T, cfg train.Config, data *data.Examples) (*train.Trainer, *train.History) {
	t.Helper()
	return fitOn(t, cfg, train.InMemory(data, nil))
}

// fitOn trains a new trainer on d and returns it with its history.
func fitOn(t *testing.T, cfg train.Config, d *train.Data) (*train.Trainer, *train.History) {
	t.Helper()
	tr, err := train.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	h, err := tr.Fit(context.Background())
	if err != nil {
		tr.Close()
		t.Fatal(err)
	}
	return tr, h
}

func TestFitLearnsAndMatchesPlan(t *testing.T) {
	data := blobs(1, 1000, 8, 4)
	test := blobs(1, 300, 8, 4) // same clusters (same seed), other draws
	test = test.Slice("test", 0, 300)
	cfg := train.Config{Model: mlp(), Epochs: 5, Batch: 64, Seed: 3}
	tr, h := fitOn(t, cfg, train.InMemory(data, test))
	defer tr.Close()
	last := h.Epochs[len(h.Epochs)-1]
	t.Logf("epochs %+v", h.Epochs)
	if last.ValAccuracy < 0.9 {
		t.Errorf("validation accuracy %.3f, want >= 0.9", last.ValAccuracy)
	}
	if !(last.Loss < h.Epochs[0].Loss) {
		t.Errorf("loss did not fall: %v", h.Epochs)
	}
	if h.MeasuredPeak != tr.Planned {
		t.Errorf("measured peak %d, planned %d", h.MeasuredPeak, tr.Planned)
	}
	if h.LedgerGrowth != 0 {
		t.Errorf("ledger grew by %d B: %v", h.LedgerGrowth, h.Growth)
	}
}

func TestFitIsDeterministicAndResumesExactly(t *testing.T) {
	data := blobs(2, 500, 8, 4) // 500 = 7 batches of 64 + a tail of 52
	run := func(epochs int, dir string, resume bool) *train.History {
		cfg := train.Config{Model: mlp(), Epochs: epochs, Batch: 64, Seed: 7, CheckpointDir: dir, Resume: resume}
		tr, h := fit(t, cfg, data)
		tr.Close()
		return h
	}
	a := run(2, t.TempDir(), false)
	b := run(2, "", false)
	if math.Float64bits(a.LastLoss) != math.Float64bits(b.LastLoss) {
		t.Errorf("same seed, different final loss: %v vs %v", a.LastLoss, b.LastLoss)
	}
	dir := t.TempDir()
	run(1, dir, false)
	c := run(2, dir, true)
	if c.StartEpoch != 1 || len(c.Epochs) != 1 {
		t.Errorf("resume started at epoch %d and ran %d epochs, want 1 and 1", c.StartEpoch, len(c.Epochs))
	}
	if math.Float64bits(a.LastLoss) != math.Float64bits(c.LastLoss) {
		t.Errorf("resumed run's final loss %v, uninterrupted %v", c.LastLoss, a.LastLoss)
	}
}

// TestPackingIsPlanned: with the run's threads planned, every matrix
// product of training and evaluation packs into the scratch the plan
// reserved (on the ledger), none into the backend's pool's own heap
// buffers.
func TestPackingIsPlanned(t *testing.T) {
	ds := blobs(1, 500, 8, 4)
	for _, threads := range []int{1, 2} {
		host := cpu.New(threads)
		cfg := train.Config{Model: mlp(), Epochs: 2, Batch: 64, Seed: 3, Threads: threads, Backend: host}
		tr, h := fitOn(t, cfg, train.InMemory(ds, blobs(1, 100, 8, 4)))
		if d := host.Pool().ScratchMisses(); d != 0 {
			t.Errorf("%d threads: %d products packed outside the planned scratch", threads, d)
		}
		if got := host.Pool().Threads(); got != threads {
			t.Errorf("the backend's pool runs %d threads, want %d", got, threads)
		}
		if tr.Plan.Scratch <= 0 || h.MeasuredPeak != tr.Planned {
			t.Errorf("%d threads: plan scratch %d B, measured %d B, planned %d B", threads, tr.Plan.Scratch, h.MeasuredPeak, tr.Planned)
		}
		tr.Close()
		host.Close()
	}
}

// described is data of n examples of shape with class labels, known by
// its description alone: for plans without a data set.
func described(shape tensor.Shape, n, classes int) *train.Data {
	return train.Described(data.SetInfo{Train: &data.Examples{Name: "described", Shape: shape, N: n, Classes: classes},
		Labels: data.LabelKind{Class: true, Classes: classes}})
}
