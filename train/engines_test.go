package train_test

import (
	"context"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// TestTrainerAndPredictorInOneProcess: a trainer and a predictor run at
// the same time in one process, each on its own backend (its own worker
// threads and packing scratch) under its own budget: each measures exactly
// what it planned on its own ledger, neither packs a product outside its
// own planned scratch, and the predictor's outputs are those of the
// weights it was given. Before, the kernels' worker pool and scratch were
// process globals that every engine re-installed on each run.
func TestTrainerAndPredictorInOneProcess(t *testing.T) {
	trainSet, test := blobs(1, 2000, 8, 4), blobs(2, 256, 8, 4)
	first, _ := fit(t, train.Config{Model: mlp(), Epochs: 1, Batch: 64, Seed: 3, NoWatchdog: true}, trainSet)
	defer first.Close()
	want := predict(t, train.PredictConfig{Model: mlp(), Weights: first.Weight, Batch: 64}, test)

	trainHost, predictHost := cpu.New(2), cpu.New(2)
	defer trainHost.Close()
	defer predictHost.Close()
	probe, err := train.PlanFor(train.Config{Model: mlp(), Epochs: 3, Batch: 64, Threads: 2}, train.InMemory(trainSet, nil))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := train.New(train.Config{Model: mlp(), Epochs: 3, Batch: 64, Seed: 5, Threads: 2, Backend: trainHost, Budget: probe.Peak, NoWatchdog: true},
		train.InMemory(trainSet, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	p, err := train.NewPredictor(train.PredictConfig{Model: mlp(), Weights: first.Weight, Batch: 64, Threads: 2, Backend: predictHost, Budget: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	var wg sync.WaitGroup
	var h *train.History
	var fitErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		h, fitErr = tr.Fit(context.Background())
	}()
	for round := 0; round < 5; round++ { // while the trainer trains
		var got []float64
		err := p.Predict(context.Background(), examplesDataset(t, test, 64), func(o tensor.Tensor) error {
			for i := 0; i < o.Len(); i++ {
				got = append(got, o.Float64At(i))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("round %d: output %d is %v beside a training run, %v alone", round, i, got[i], want[i])
			}
		}
	}
	wg.Wait()
	if fitErr != nil {
		t.Fatal(fitErr)
	}
	if h.MeasuredPeak != tr.Planned || tr.Engine().Ledger().Budget() != probe.Peak {
		t.Errorf("trainer: planned %d B, measured %d B on its ledger (budget %d B)", tr.Planned, h.MeasuredPeak, tr.Engine().Ledger().Budget())
	}
	if got := p.Engine().Ledger().Peak(); got != p.Planned {
		t.Errorf("predictor: planned %d B, measured %d B on its ledger", p.Planned, got)
	}
	if tr.Engine().Ledger() == p.Engine().Ledger() {
		t.Error("the trainer and the predictor share a ledger")
	}
	for name, host := range map[string]*cpu.Target{"trainer": trainHost, "predictor": predictHost} {
		if m := host.Pool().ScratchMisses(); m != 0 {
			t.Errorf("%s: %d products packed outside its planned scratch", name, m)
		}
	}
}
