package train_test

import (
	"context"
	"testing"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// TestFitPipeline trains from an input pipeline of batches (the last one
// smaller): the pipeline's buffers come out of a reservation the plan
// holds, so the measured peak is the plan, and the pipeline's own ledger
// shows it used them, within its budget.
func TestFitPipeline(t *testing.T) {
	ex := blobs(14, 1000, 8, 4) // 15 batches of 64 and one of 40
	samples := make([]data.Sample, ex.N)
	for i := range samples {
		x := tensor.FromSlice(tensor.Shape{8}, ex.Floats[i*8:(i+1)*8])
		y := tensor.FromSlice(tensor.Shape{}, ex.Labels[i:i+1])
		samples[i] = data.NewSample(x, y)
	}
	ds := data.Batches(data.FromSlice(samples), 64, false)
	const budget = 1 << 20
	cfg := train.Config{Model: mlp(), Epochs: 5, Batch: 64, Seed: 3, InputBudget: budget}
	info := data.SetInfo{Train: &data.Examples{Name: "blobs", Shape: ex.Shape, N: ex.N, Classes: ex.Classes}, Labels: ex.Kind()}
	tr, err := train.New(cfg, train.Pipeline(ds, info, ex.Slice("val", 0, 300)))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	h, err := tr.Fit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(5 * 16); h.Steps != want {
		t.Errorf("%d steps, want %d", h.Steps, want)
	}
	if acc := h.Epochs[len(h.Epochs)-1].ValAccuracy; acc < 0.9 {
		t.Errorf("accuracy %.3f, want >= 0.9", acc)
	}
	if h.MeasuredPeak != tr.Planned || tr.PlannedTotals[mem.Input] < budget {
		t.Errorf("measured peak %d B, planned %d B of which input %d B: want equal, the pipeline's %d B in the plan", h.MeasuredPeak, tr.Planned, tr.PlannedTotals[mem.Input], budget)
	}
	if p := tr.Pipeline(); p == nil || p.Peak() <= 0 || p.Peak() > budget {
		t.Errorf("the pipeline's ledger %v: want its buffers charged to it, within %d B", p, budget)
	}
}
