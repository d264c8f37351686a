package train_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// lowerBudget lowers the trainer's budget after the given step, as a user
// would through the API mid-run.
type lowerBudget struct {
	tr     **train.Trainer
	after  int
	budget int64
	steps  int
}

func (l *lowerBudget) OnBatchEnd(epoch, batch, batches int, loss float64) {
	l.steps++
	if l.steps == l.after {
		(*l.tr).SetBudget(l.budget)
	}
}
func (l *lowerBudget) OnEpochEnd(*train.Trainer, *train.EpochLog) error { return nil }

func recoveryModel() *nn.Sequential {
	return &nn.Sequential{InputShape: tensor.Shape{16}, Layers: []nn.Layer{
		&nn.Dense{LayerName: "dense", Units: 256, Activation: "relu"},
		&nn.Dense{LayerName: "dense_1", Units: 256, Activation: "relu"},
		&nn.Dense{LayerName: "dense_2", Units: 4},
	}}
}

// TestReservationFailureIsRecovered: after step 5 the budget drops below
// the run's reservation; step 6 fails to reserve (batch 512), is re-planned
// as micro-batches and retried. Training goes on, no step is lost or applied
// twice, and the final weights equal an undisturbed run's.
func TestReservationFailureIsRecovered(t *testing.T) {
	data := blobs(11, 2048, 16, 4)
	cfg := func() train.Config {
		return train.Config{Model: recoveryModel(), Optimizer: &optim.SGD{Momentum: 0.9}, Schedule: optim.Constant(0.05), Epochs: 2, Batch: 512, Seed: 5}
	}
	weights := func(tr *train.Trainer) []float64 {
		var w []float64
		for _, v := range tr.Engine().Variables() {
			if v.Role != 0 {
				continue
			}
			for i := 0; i < v.Shape.Size(); i++ {
				w = append(w, v.Tensor().Float64At(i))
			}
		}
		return w
	}
	plain, hPlain := fit(t, cfg(), data)
	defer plain.Close()

	var tr *train.Trainer
	c := cfg()
	hook := &lowerBudget{tr: &tr, after: 5}
	c.Callbacks = []train.Callback{hook}
	tr, err := train.New(c, train.InMemory(data, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// the budget that 4 micro-batches of 128 need: batch 512 no longer fits
	c4 := cfg()
	c4.Accumulate = 4
	rp, err := train.PlanFor(c4, train.InMemory(data, nil))
	if err != nil {
		t.Fatal(err)
	}
	hook.budget = rp.Peak
	if hook.budget >= tr.Planned {
		t.Fatalf("4 micro-batches need %d B, no less than the plain run's %d B: the test cannot inject a failure", hook.budget, tr.Planned)
	}
	h, err := tr.Fit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) == 0 {
		t.Fatal("no re-planning event: the failure was not injected")
	}
	for _, e := range h.Events {
		t.Log(e)
		var oom *mem.OOMError
		if !errors.As(e.Err, &oom) || !strings.Contains(e.Message, "micro-batches") || e.Step != 6 {
			t.Errorf("event %v: want a reservation failure at step 6 re-planned as micro-batches", e)
		}
	}
	if h.Steps != hPlain.Steps {
		t.Errorf("%d steps, the undisturbed run took %d: a step was lost or repeated", h.Steps, hPlain.Steps)
	}
	if tr.Planned > hook.budget {
		t.Errorf("after re-planning the run needs %d B, over the budget %d B", tr.Planned, hook.budget)
	}
	a, b := weights(plain), weights(tr)
	var diff, norm float64
	for i := range a {
		diff += (a[i] - b[i]) * (a[i] - b[i])
		norm += a[i] * a[i]
	}
	rel := math.Sqrt(diff / norm)
	t.Logf("final weights differ by %.3g relative (norm)", rel)
	if rel > 1e-6 {
		t.Errorf("final weights differ by %.3g relative, want <= 1e-6", rel)
	}
}
