package train

import (
	"errors"
	"fmt"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/step"
)

// reserve reserves the shared arena and the backend's scratch and loads
// every program into them. On failure it releases what it took.
func (t *Trainer) reserve(progs map[string]*program, share [mem.NumCategories]int64) error {
	arena, err := t.engine.ReserveArena("arena", share)
	if err != nil {
		return err
	}
	t.arena, t.progs = arena, progs
	if err := t.engine.ReserveScratch(scratchOf(progs)); err != nil {
		t.release()
		return err
	}
	for _, key := range sortedKeys(progs) {
		if err := t.attach(progs[key]); err != nil {
			t.release()
			return err
		}
	}
	return nil
}

// release frees the programs and the arena, keeping the variables.
func (t *Trainer) release() {
	for _, pr := range t.progs {
		if pr.x != nil {
			pr.x.Close()
			pr.x = nil
		}
	}
	if t.arena != nil {
		t.arena.Release()
		t.arena = nil
	}
	if t.engine != nil {
		t.engine.ReleaseScratch() // every program is closed
	}
}

// SetBudget changes the run's memory budget (the ledger's limit). If the
// run's reservation does not fit under it, the next step first re-plans:
// see Replan.
func (t *Trainer) SetBudget(b int64) {
	t.cfg.Budget = b
	t.engine.Ledger().SetBudget(b)
	t.replan = true
}

// Event is something the trainer did on its own during Fit: a re-plan after
// a reservation failed (with the peaks and the micro-batching it chose), or a
// resume that passed over a damaged newer checkpoint (no peaks, no Err).
type Event struct {
	Step       int64
	Message    string
	PeakBefore int64 // planned bytes before and after
	PeakAfter  int64
	Accumulate int
	MicroBatch int
	Err        error // the reservation failure that caused it
}

func (e Event) String() string {
	if e.PeakBefore == 0 && e.PeakAfter == 0 { // not a re-plan
		return fmt.Sprintf("step %d: %s", e.Step, e.Message)
	}
	return fmt.Sprintf("step %d: %s (planned %s -> %s)", e.Step, e.Message, mem.FormatBytes(e.PeakBefore), mem.FormatBytes(e.PeakAfter))
}

// Replan re-reserves the run's memory under the current budget. When the
// reservation fails with *mem.OOMError it re-plans the step as twice as
// many micro-batches (the effective batch and the update stay the same)
// and tries again, until it fits or micro-batches of one example do not.
// Variables (weights, optimizer state) are kept throughout, so the step
// about to run is neither lost nor applied twice.
func (t *Trainer) Replan(step int64) ([]Event, error) {
	t.replan = false
	var events []Event
	t.release()
	for {
		progs, err := t.cfg.compileAll(t.trainN, t.evalN)
		if err != nil {
			return events, err
		}
		totals, share := planned(progs)
		totals[mem.Input] += t.dataBytes()
		if len(events) > 0 {
			events[len(events)-1].PeakAfter = sum(totals)
		}
		err = t.reserve(progs, share)
		if err == nil {
			t.Planned, t.PlannedTotals, t.Plan = sum(totals), totals, progs["train"].p.Plan
			return events, nil
		}
		var oom *mem.OOMError
		k := t.cfg.accumulate()
		if !errors.As(err, &oom) || t.cfg.Batch%(2*k) != 0 {
			return events, fmt.Errorf("train: step %d: re-planning under a budget of %s: %w", step, mem.FormatBytes(t.cfg.Budget), err)
		}
		t.cfg.Accumulate = 2 * k
		events = append(events, Event{Step: step, Err: err, PeakBefore: sum(totals), Accumulate: 2 * k, MicroBatch: t.cfg.Batch / (2 * k),
			Message: fmt.Sprintf("reserving %s failed under a budget of %s; retrying the step as %d micro-batches of %d",
				mem.FormatBytes(sum(totals)), mem.FormatBytes(t.cfg.Budget), 2*k, t.cfg.Batch/(2*k))})
	}
}

// dataBytes returns the bytes of the data sets held in memory that count
// in Planned: those on the device's own ledger (the host's).
func (t *Trainer) dataBytes() int64 {
	if !t.cfg.Backend.HostAddressable() {
		return 0
	}
	var n int64
	for _, d := range t.data {
		n += mem.Align(d.bytes)
	}
	return n
}

// attach loads a compiled program into the shared arena and binds its
// inputs and outputs.
func (t *Trainer) attach(pr *program) error {
	var err error
	if pr.x, err = t.engine.LoadIn(pr.p, t.arena); err != nil {
		return err
	}
	return pr.bind(t.xName)
}

// load compiles and attaches a program after New (evaluation of data of a
// size New did not plan for). Its buffers add to the ledger beyond Planned.
func (t *Trainer) load(key string, b int, mode step.Mode) (*program, error) {
	p, err := t.cfg.compile(b, mode)
	if err != nil {
		return nil, err
	}
	p.Name = key
	pr := &program{p: p, batch: b, mode: mode}
	if err := t.attach(pr); err != nil {
		return nil, err
	}
	return pr, nil
}
