package train

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/profile/tfevents"
)

func TestTensorBoardCallback(t *testing.T) {
	tb := &TensorBoard{Dir: t.TempDir()}
	tr, h := trainRun(t, tb)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err := tfevents.ReadEvents(tb.Path())
	if err != nil {
		t.Fatal(err)
	}
	byTag := map[string]map[int64]float32{}
	for _, e := range evs[1:] {
		for _, v := range e.Summary {
			if byTag[v.Tag] == nil {
				byTag[v.Tag] = map[int64]float32{}
			}
			if _, dup := byTag[v.Tag][e.Step]; dup {
				t.Errorf("%s logged twice at step %d", v.Tag, e.Step)
			}
			byTag[v.Tag][e.Step] = v.SimpleValue
		}
	}
	if got := len(byTag["batch_loss"]); int64(got) != h.Steps {
		t.Errorf("%d batch_loss events, want one per step (%d)", got, h.Steps)
	}
	for s := int64(1); s <= h.Steps; s++ {
		if _, ok := byTag["batch_loss"][s]; !ok {
			t.Errorf("no batch_loss at step %d", s)
		}
	}
	if got, want := byTag["batch_loss"][h.Steps], float32(h.LastLoss); got != want {
		t.Errorf("last batch_loss %v, want the history's last loss %v", got, want)
	}
	for _, log := range h.Epochs {
		ep := int64(log.Epoch)
		for tag, want := range map[string]float64{"epoch_loss": log.Loss, "epoch_accuracy": log.Accuracy, "epoch_val_loss": log.ValLoss, "epoch_learning_rate": log.LR} {
			if got, ok := byTag[tag][ep]; !ok || got != float32(want) {
				t.Errorf("epoch %d: %s = %v (logged %v), want %v", ep, tag, got, ok, float32(want))
			}
		}
	}
	totals := tr.Engine().Ledger().Totals()
	last := h.Epochs[len(h.Epochs)-1].Steps
	var live int64
	for c := mem.Category(0); c < mem.NumCategories; c++ {
		live += totals[c]
		if got := byTag[memoryTags[c]][last]; got != float32(totals[c]) {
			t.Errorf("%s at step %d = %v, want the ledger's %d", memoryTags[c], last, got, totals[c])
		}
	}
	if got := byTag["memory/live_bytes"][last]; got != float32(live) || live == 0 {
		t.Errorf("memory/live_bytes = %v, want the ledger's %d (> 0)", got, live)
	}
}

// trainRun fits a small model on Gaussian blobs for 3 epochs with the given
// callbacks.
func trainRun(t testing.TB, callbacks ...Callback) (*Trainer, *History) {
	t.Helper()
	model := &nn.Sequential{InputShape: tensor.Shape{8}, Layers: []nn.Layer{
		&nn.Dense{LayerName: "dense", Units: 32, Activation: "relu"},
		&nn.Dense{LayerName: "dense_1", Units: 4},
	}}
	blobs := func(seed uint64, n int) *data.Examples {
		const d, c = 8, 4
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
	ds := blobs(1, 320)
	cfg := Config{Model: model, Epochs: 3, Batch: 64, Seed: 3, Callbacks: callbacks}
	tr, err := New(cfg, InMemory(ds, blobs(1, 128)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	h, err := tr.Fit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tr, h
}
