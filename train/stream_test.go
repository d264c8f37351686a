package train_test

import (
	"context"
	"testing"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// TestFitStream trains from an input pipeline of batches (the last one
// smaller), charging the pipeline to the trainer's ledger.
func TestFitStream(t *testing.T) {
	ex := blobs(14, 1000, 8, 4) // 15 batches of 64 and one of 40
	samples := make([]data.Sample, ex.N)
	for i := range samples {
		x := tensor.FromSlice(tensor.Shape{8}, ex.Floats[i*8:(i+1)*8])
		y := tensor.FromSlice(tensor.Shape{}, ex.Labels[i:i+1])
		samples[i] = data.NewSample(x, y)
	}
	ds := data.Batches(data.FromSlice(samples), 64, false)
	cfg := train.Config{Model: mlp(), Epochs: 5, Batch: 64, Seed: 3, Validation: ex.Slice("val", 0, 300)}
	tr, err := train.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	const budget = 1 << 20
	h, err := tr.FitStream(context.Background(), ds, data.Config{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(5 * 16); h.Steps != want {
		t.Errorf("%d steps, want %d", h.Steps, want)
	}
	if acc := h.Epochs[len(h.Epochs)-1].ValAccuracy; acc < 0.9 {
		t.Errorf("accuracy %.3f, want >= 0.9", acc)
	}
	if h.MeasuredPeak > tr.Planned+budget {
		t.Errorf("measured peak %d B exceeds the plan %d B plus the pipeline's budget %d B", h.MeasuredPeak, tr.Planned, budget)
	}
	if h.MeasuredPeak <= tr.Planned {
		t.Errorf("measured peak %d B is not above the plan %d B: the pipeline's buffers were not charged to the trainer's ledger", h.MeasuredPeak, tr.Planned)
	}
}
