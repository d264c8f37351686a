package train_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// hoarder is a deliberately leaking callback: it keeps a copy of the
// batch's loss history as a tensor per step, in the Go heap.
type hoarder struct{ kept []tensor.Tensor }

func (h *hoarder) OnBatchEnd(epoch, batch, batches int, loss float64) {
	h.kept = append(h.kept, tensor.New(tensor.Float32, tensor.Shape{64, 1024})) // leak site
}
func (h *hoarder) OnEpochEnd(*train.Trainer, *train.EpochLog) error { return nil }

// ledgerHoarder leaks engine memory instead: a buffer per step from the
// trainer's allocator, never freed.
type ledgerHoarder struct{ kept []*mem.Buffer }

func (h *ledgerHoarder) OnEpochEnd(t *train.Trainer, log *train.EpochLog) error {
	b, err := t.Engine().Allocator().Alloc(64<<10, mem.Workspace, "callback cache") // leak site
	h.kept = append(h.kept, b)
	return err
}

// leakSites returns "watchdog_test.go:N" for each line marked "leak site".
func leakSites(t *testing.T) []string {
	src, err := os.ReadFile("watchdog_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasSuffix(line, "// leak site") {
			out = append(out, fmt.Sprintf("watchdog_test.go:%d", i+1))
		}
	}
	if len(out) != 2 {
		t.Fatalf("found %d leak sites, want 2", len(out))
	}
	return out
}

func TestWatchdogNamesLeakingCallback(t *testing.T) {
	data := blobs(12, 512, 8, 4)
	sites := leakSites(t)
	for _, c := range []struct {
		name string
		cb   train.Callback
		want string
	}{
		{"heap", &hoarder{}, sites[0]},
		{"ledger", &ledgerHoarder{}, sites[1]},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := train.Config{Model: mlp(), Epochs: 3, Batch: 32, Seed: 1, Callbacks: []train.Callback{c.cb}}
			tr, h := fit(t, cfg, data)
			defer tr.Close()
			found := false
			for _, l := range h.Leaks {
				t.Log(l)
				found = found || strings.Contains(l.Site, c.want)
			}
			if !found {
				t.Fatalf("the watchdog did not name %s among %v", c.want, h.Leaks)
			}
			cfg.StrictMemory = true
			tr2, err := train.New(cfg, train.InMemory(data, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer tr2.Close()
			_, err = tr2.Fit(context.Background())
			var le *train.LeakError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("strict memory: got %v, want a *train.LeakError naming %s", err, c.want)
			}
		})
	}
}

func TestWatchdogQuietWithoutLeak(t *testing.T) {
	cfg := train.Config{Model: mlp(), Epochs: 3, Batch: 32, Seed: 1, StrictMemory: true}
	tr, h := fit(t, cfg, blobs(13, 512, 8, 4))
	defer tr.Close()
	if len(h.Leaks) != 0 {
		t.Errorf("leaks reported for a clean run: %v", h.Leaks)
	}
}
