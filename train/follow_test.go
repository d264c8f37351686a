package train_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/train"
)

// liveSource is a live budget a test sets: from step `from` it is `low`,
// from step `back` (0: never) it is room again; other times it is `room`.
type liveSource struct {
	budget          atomic.Int64
	room, low       int64
	from, back, now int
}

func (l *liveSource) Plan() int64 { return l.budget.Load() }

func (l *liveSource) OnBatchEnd(epoch, batch, batches int, loss float64) {
	l.now++
	switch {
	case l.back > 0 && l.now >= l.back:
		l.budget.Store(l.room)
	case l.now >= l.from:
		l.budget.Store(l.low)
	}
}
func (l *liveSource) OnEpochEnd(*train.Trainer, *train.EpochLog) error { return nil }

// TestLiveBudgetShrinksAndGrowsBack: the live budget falls below the
// run's plan after step 5 and returns after step 12 (growing back after
// step 13, when it has stayed). The trainer re-plans
// as micro-batches at the step boundary (no step lost or repeated), gives
// the memory back, logs both moves, and ends with the weights of an
// undisturbed run (to rounding) and its own plan back.
func TestLiveBudgetShrinksAndGrowsBack(t *testing.T) {
	data := blobs(11, 2048, 16, 4)
	cfg := func() train.Config {
		return train.Config{Model: recoveryModel(), Optimizer: &optim.SGD{Momentum: 0.9}, Schedule: optim.Constant(0.05), Epochs: 4, Batch: 512, Seed: 5}
	}
	plain, hPlain := fit(t, cfg(), data)
	defer plain.Close()

	c4 := cfg()
	c4.Accumulate = 4
	rp, err := train.PlanFor(c4, train.InMemory(data, nil))
	if err != nil {
		t.Fatal(err)
	}
	live := &liveSource{room: 1 << 40, low: rp.Peak, from: 5, back: 12}
	live.budget.Store(live.room)
	c := cfg()
	var logged []string
	c.Callbacks, c.Live, c.LiveSettle = []train.Callback{live}, live, time.Nanosecond
	c.Log = func(m string) { logged = append(logged, m) }
	tr, err := train.New(c, train.InMemory(data, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	planned := tr.Planned
	if rp.Peak >= planned {
		t.Fatalf("4 micro-batches plan %d B, no less than the plain run's %d B: the test cannot squeeze it", rp.Peak, planned)
	}
	h, err := tr.Fit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range logged {
		t.Log(m)
	}
	if len(h.Events) != 2 {
		t.Fatalf("got %d events, want a shrink and a grow-back: %v", len(h.Events), h.Events)
	}
	shrink, grow := h.Events[0], h.Events[1]
	if shrink.Step != 5 || !strings.Contains(shrink.Message, "shrank") || shrink.PeakAfter > rp.Peak || shrink.PeakBefore != planned {
		t.Errorf("first event %v: want a shrink after step 5 from %d B to at most %d B", shrink, planned, rp.Peak)
	}
	if grow.Step != 13 || !strings.Contains(grow.Message, "grew back") || grow.PeakAfter != planned || grow.Accumulate != 1 {
		t.Errorf("second event %v: want a grow-back after step 13 (room seen after step 12, settled by the next boundary) to the run's own %d B", grow, planned)
	}
	if len(logged) != 2 {
		t.Errorf("logged %d messages, want the 2 events", len(logged))
	}
	if h.Steps != hPlain.Steps {
		t.Errorf("%d steps, the undisturbed run took %d: a step was lost or repeated", h.Steps, hPlain.Steps)
	}
	if tr.Planned != planned {
		t.Errorf("after growing back the run plans %d B, want its own %d B", tr.Planned, planned)
	}
	if got := tr.Engine().Ledger().Live(); got != planned {
		t.Errorf("after growing back the ledger holds %d B, want the plan's %d B (accumulators left behind?)", got, planned)
	}
	rel := math.Abs(h.LastLoss-hPlain.LastLoss) / math.Abs(hPlain.LastLoss)
	t.Logf("final loss %.9g, undisturbed %.9g: %.3g relative", h.LastLoss, hPlain.LastLoss, rel)
	if rel > 1e-5 {
		t.Errorf("final loss %v differs from the undisturbed run's %v by %.3g relative, want <= 1e-5", h.LastLoss, hPlain.LastLoss, rel)
	}
}

// TestLiveBudgetExhaustedCheckpoints: when the live budget falls below
// every way to run the step, Fit stops at the step boundary with a
// checkpoint and a *BudgetExhausted; resuming with room continues bit for
// bit.
func TestLiveBudgetExhaustedCheckpoints(t *testing.T) {
	data := blobs(11, 2048, 16, 4)
	cfg := func() train.Config {
		return train.Config{Model: recoveryModel(), Optimizer: &optim.SGD{Momentum: 0.9}, Schedule: optim.Constant(0.05), Epochs: 2, Batch: 512, Seed: 5}
	}
	plain, hPlain := fit(t, cfg(), data)
	plain.Close()

	dir := t.TempDir()
	live := &liveSource{room: 1 << 40, low: 1 << 10, from: 6}
	live.budget.Store(live.room)
	c := cfg()
	c.Callbacks, c.Live, c.CheckpointDir = []train.Callback{live}, live, dir
	tr, err := train.New(c, train.InMemory(data, nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Fit(context.Background())
	tr.Close()
	var ex *train.BudgetExhausted
	if !errors.As(err, &ex) {
		t.Fatalf("got %v, want a *train.BudgetExhausted", err)
	}
	t.Log(ex)
	if ex.Step != 6 || ex.Checkpoint == "" || ex.Smallest <= ex.Live {
		t.Errorf("got %+v: want a stop after step 6 with a checkpoint, the smallest plan above the live budget", ex)
	}
	c = cfg()
	c.CheckpointDir, c.Resume = dir, true
	tr, h := fit(t, c, data)
	tr.Close()
	if math.Float64bits(h.LastLoss) != math.Float64bits(hPlain.LastLoss) {
		t.Errorf("resumed run's final loss %v, the undisturbed run's %v: want them bit for bit", h.LastLoss, hPlain.LastLoss)
	}
}

// TestLiveBudgetRanksAgree: in a 2-rank run, the live budget falls on rank
// 1 alone after step 3; both ranks re-plan at the same step to the same
// micro-batching, so their weights stay bit for bit the same. Then an
// interrupt on rank 1 alone stops both after the same step. The same
// under ZeRO stages 2 and 3 (the re-planned steps reduce-scatter, and
// gather, the same blocks).
func TestLiveBudgetRanksAgree(t *testing.T) {
	for _, zero := range []int{0, 2, 3} {
		t.Run(fmt.Sprintf("zero %d", zero), func(t *testing.T) { liveBudgetRanksAgree(t, zero) })
	}
}

func liveBudgetRanksAgree(t *testing.T, zero int) {
	data := blobs(15, 1000, 8, 4)
	cfg := train.Config{Model: parallelModel(), Optimizer: &optim.Adam{}, Epochs: 2, Batch: 128, Seed: 9, Zero: zero}
	c4 := cfg
	c4.Accumulate = 4
	c4.Comm = newLocalRank(newLocalGroup(2), 0) // plans rank 0's share
	rp, err := train.PlanFor(c4, train.InMemory(data, nil))
	if err != nil {
		t.Fatal(err)
	}
	group := newLocalGroup(2)
	type outcome struct {
		events []train.Event
		err    error
		w      []float64
	}
	outs := make([]outcome, 2)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newLocalRank(group, rank)
			defer close(r.q)
			c := cfg
			c.Comm = r
			live := &liveSource{room: 1 << 40, low: 1 << 40, from: 1 << 30}
			if rank == 1 {
				live.low, live.from = rp.Peak, 3
				c.Interrupt = stop
				c.Callbacks = []train.Callback{live, closeAt{after: 9, ch: stop}}
			} else {
				c.Callbacks = []train.Callback{live}
			}
			live.budget.Store(live.room)
			c.Live = live
			tr, err := train.New(c, train.InMemory(data, nil))
			if err != nil {
				outs[rank].err = err
				return
			}
			defer tr.Close()
			h, err := tr.Fit(context.Background())
			outs[rank] = outcome{events: h.Events, err: err, w: wholeParams(tr)}
		}()
	}
	wg.Wait()
	for rank, o := range outs {
		t.Logf("rank %d: %v, %v", rank, o.events, o.err)
		if len(o.events) != 1 || o.events[0].Step != 3 || o.events[0].Accumulate < 2 {
			t.Errorf("rank %d: events %v, want one re-plan after step 3 to micro-batches", rank, o.events)
		}
		var in *train.Interrupted
		if !errors.As(o.err, &in) || in.Step != 9 || in.ByPeer != (rank == 0) {
			t.Errorf("rank %d: got %v, want an interrupt after step 9 (by the peer on rank 0)", rank, o.err)
		}
	}
	if len(outs[0].events) == 1 && len(outs[1].events) == 1 && outs[0].events[0].Accumulate != outs[1].events[0].Accumulate {
		t.Errorf("the ranks re-planned differently: %v and %v", outs[0].events, outs[1].events)
	}
	if len(outs[0].w) == 0 || len(outs[0].w) != len(outs[1].w) {
		t.Fatalf("the ranks' weights: %d and %d values", len(outs[0].w), len(outs[1].w))
	}
	for i := range outs[0].w {
		if math.Float64bits(outs[0].w[i]) != math.Float64bits(outs[1].w[i]) {
			t.Fatalf("the ranks' weights differ at %d: %v and %v", i, outs[0].w[i], outs[1].w[i])
		}
	}
}

// closeAt closes ch after the given number of batches (an interrupt).
type closeAt struct {
	after int
	ch    chan struct{}
}

func (c closeAt) OnBatchEnd(epoch, batch, batches int, loss float64) {
	if batch+(epoch-1)*batches == c.after {
		close(c.ch)
	}
}
func (c closeAt) OnEpochEnd(*train.Trainer, *train.EpochLog) error { return nil }

// mallocCounter reads the process's mallocs after steps 20 and 60.
type mallocCounter struct {
	m  runtime.MemStats
	at []uint64
	n  int
}

func (s *mallocCounter) OnBatchEnd(epoch, batch, batches int, loss float64) {
	s.n++
	if s.n == 20 || s.n == 60 {
		runtime.ReadMemStats(&s.m)
		s.at = append(s.at, s.m.Mallocs)
	}
}
func (s *mallocCounter) OnEpochEnd(*train.Trainer, *train.EpochLog) error { return nil }

// TestLiveBudgetAllocatesNothing: following a live budget adds no heap
// allocation to the steady-state steps (40 steps counted, with and
// without a live source that never squeezes). The count is the process's,
// so a goroutine another test left may add one now and then: each way
// runs three times and its fewest count, where an allocation of the steps
// would show in every run.
func TestLiveBudgetAllocatesNothing(t *testing.T) {
	data := blobs(11, 512*64, 16, 4)
	got := [2]uint64{math.MaxUint64, math.MaxUint64}
	for range 3 {
		for i, live := range []bool{false, true} {
			c := train.Config{Model: recoveryModel(), Optimizer: &optim.SGD{Momentum: 0.9}, Epochs: 1, Batch: 512, Seed: 5, NoWatchdog: true}
			mc := &mallocCounter{}
			c.Callbacks = []train.Callback{mc}
			if live {
				ls := &liveSource{room: 1 << 40, low: 1 << 40, from: 1 << 30}
				ls.budget.Store(ls.room)
				c.Live = ls
			}
			tr, h := fit(t, c, data)
			tr.Close()
			if len(mc.at) != 2 || len(h.Events) != 0 {
				t.Fatalf("counted %v, events %v", mc.at, h.Events)
			}
			got[i] = min(got[i], mc.at[1]-mc.at[0])
		}
	}
	t.Logf("mallocs over 40 steps: %d without a live budget, %d with", got[0], got[1])
	if got[1] > got[0] {
		t.Errorf("following the live budget allocated %d more times over 40 steps, want none", got[1]-got[0])
	}
}

// fixedLive is a live budget that never moves.
type fixedLive int64

func (l fixedLive) Plan() int64 { return int64(l) }

// TestFitToBudgetRefusesWhatStopsWhileTimed: when the live budget stops
// every timed candidate of FitToBudget (the process's own memory or a
// neighbour's grew past what the plans left), the run is refused before
// step 1 with the budget, where it came from and a remedy, not with the
// stopped timing's error.
func TestFitToBudgetRefusesWhatStopsWhileTimed(t *testing.T) {
	data := blobs(11, 256, 16, 4)
	cfg := train.Config{Model: recoveryModel(), Optimizer: &optim.SGD{}, Schedule: optim.Constant(0.05), Epochs: 1, Batch: 64, Seed: 5,
		BudgetSource: "a test's limit of 1.00 GiB", Live: fixedLive(1 << 10)}
	_, _, err := train.FitToBudget(cfg, train.InMemory(data, nil), 1<<30, false)
	if err == nil {
		t.Fatal("FitToBudget chose a configuration that the live budget stops")
	}
	t.Log(err)
	for _, want := range []string{"once running", "a test's limit of 1.00 GiB", "fell to 1.00 KiB", "--batch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	var ex *train.BudgetExhausted
	if errors.As(err, &ex) {
		t.Errorf("error %q is the timing's BudgetExhausted, want a refusal", err)
	}
	// with room, the same call chooses
	cfg.Live = fixedLive(1 << 40)
	if _, _, err := train.FitToBudget(cfg, train.InMemory(data, nil), 1<<30, false); err != nil {
		t.Fatalf("with room: %v", err)
	}
}
