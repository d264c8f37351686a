package profile

import (
	"testing"

	"github.com/headroom-ml/headroom/mem"
)

func TestTensorBoardCallback(t *testing.T) {
	tb := &TensorBoard{Dir: t.TempDir()}
	tr, h := trainRun(t, tb)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err := ReadEvents(tb.Path())
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
