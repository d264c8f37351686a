package train

import (
	"errors"
	"fmt"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/step"
)

// reserve opens the programs' session on the engine (the shared arena,
// the backend's scratch, every program) and binds each program's inputs
// and outputs. On failure it releases what it took.
func (t *Trainer) reserve(progs map[string]*program) error {
	var list []*compile.Program
	for _, key := range sortedKeys(progs) {
		list = append(list, progs[key].p)
	}
	s, err := t.engine.Open(list...)
	if err != nil {
		return err
	}
	t.session, t.progs = s, progs
	for _, key := range sortedKeys(progs) {
		pr := progs[key]
		pr.x, _ = s.Program(pr.p.Name)
		if err := pr.bind(t.xName); err != nil {
			t.release()
			return err
		}
	}
	return nil
}

// release closes the programs' session, keeping the variables.
func (t *Trainer) release() {
	t.session.Close()
	t.session = nil
	for _, pr := range t.progs {
		pr.x = nil
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
	// Logged: Config.Log has shown it as it happened (a report need not
	// repeat it).
	Logged bool
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
		progs, rp, err := t.cfg.planRun(t.data)
		if err != nil {
			return events, err
		}
		if len(events) > 0 {
			events[len(events)-1].PeakAfter = rp.Peak
		}
		err = t.reserve(progs)
		if err == nil {
			t.setPlan(progs, rp)
			return events, nil
		}
		totals := rp.Totals
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

// load compiles and attaches a program after New (evaluation of data of a
// size New did not plan for). Its buffers add to the ledger beyond Planned.
func (t *Trainer) load(key string, b int, mode step.Mode) (*program, error) {
	p, err := t.cfg.compile(b, mode)
	if err != nil {
		return nil, err
	}
	p.Name = key
	pr := &program{p: p, batch: b, mode: mode}
	if pr.x, err = t.session.Add(p); err != nil {
		return nil, err
	}
	if err := pr.bind(t.xName); err != nil {
		return nil, err
	}
	return pr, nil
}
