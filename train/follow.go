package train

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/step"
)

// Live is the memory a run may reserve now, read at each step boundary by
// a Trainer with Config.Live: a LiveBudget following the container's
// limit, or any source of the caller's (an atomic load; it must not block).
// A source that also has BoundRuntime(reserved, onHeap int64) is told the
// reservation after each re-plan, to bound the Go runtime's own memory.
type Live interface {
	Plan() int64
}

// DefaultLiveSettle is how long room for a faster plan must stay before a
// run that shrank grows back to it (Config.LiveSettle).
const DefaultLiveSettle = 2 * time.Second

// BudgetExhausted is the error Fit returns when the live budget fell below
// even the smallest way to run the step: the run stopped at a step
// boundary, before the kernel would act, and Checkpoint ("" without a
// CheckpointDir) holds exactly where it stood; Resume continues from there
// bit for bit once there is room.
type BudgetExhausted struct {
	Step       int64 // optimizer steps done
	Live       int64 // what the live budget allowed
	Smallest   int64 // the smallest plan's bytes
	Checkpoint string
}

func (e *BudgetExhausted) Error() string {
	s := fmt.Sprintf("train: the memory left to the run fell to %s after step %d; the smallest way to run the step needs %s",
		mem.FormatBytes(e.Live), e.Step, mem.FormatBytes(e.Smallest))
	if e.Checkpoint == "" {
		return s + "; stopped before the kernel's OOM killer would act (no checkpoint directory was given, so nothing was saved)"
	}
	return s + "; stopped before the kernel's OOM killer would act, with a checkpoint in " + e.Checkpoint + " (resume with more room)"
}

// rung is one way to run the step a live budget may choose: rung 0 is the
// run's own configuration, each later one needs less memory (more
// micro-batches, then recomputation, then 16-bit activations).
type rung struct {
	accumulate int
	remat      bool
	precision  step.Precision
	peak       int64 // planned bytes; 0 until planned
}

func (g rung) String() string {
	s := fmt.Sprintf("%d micro-batch", g.accumulate)
	if g.accumulate > 1 {
		s += "es"
	}
	if g.remat {
		s += ", recomputation"
	}
	if g.precision != step.Float32 {
		s += ", " + g.precision.String()
	}
	return s
}

// follower is the state of a run that follows a live budget.
type follower struct {
	ladder    []rung
	at        int       // the rung running
	roomSince time.Time // since when a faster rung fits (zero: none does)
	settle    time.Duration
	agree     []byte // the per-step agreement of a multi-process run
	gathered  []byte
	planned   *planned      // the rung planned last, kept for moveTo
	last      time.Time     // the end of the last step boundary
	stepTime  time.Duration // the longest time between boundaries lately
}

// budget returns what live allows now (raw) and the live budget the next
// step must fit (b): raw less what the other processes will take at their
// recent rate of growth before the boundary after the next step can act
// (two steps' time, the longest lately, and 50 ms to re-plan). A step's
// time runs from the end of one boundary (a re-plan's time left out) to
// the start of the next.
func (f *follower) budget(live Live, now time.Time) (b, raw int64) {
	if !f.last.IsZero() {
		f.stepTime = max(now.Sub(f.last), f.stepTime*7/8) // falls slowly: a slow step is remembered
	}
	raw = live.Plan()
	b = raw
	if g, ok := live.(interface{ Growth() int64 }); ok {
		if rate := g.Growth(); rate > 0 {
			b -= int64(float64(rate) * (2*f.stepTime + 50*time.Millisecond).Seconds())
		}
	}
	return b, raw
}

// planned is a rung's compiled programs and plan.
type planned struct {
	rung  int
	progs map[string]*program
	rp    *RunPlan
	cfg   Config
}

// newFollower lays out the ladder of cfg: its own rung, then the number of
// micro-batches doubling while it divides each process's batch, then the
// same with recomputation, then with mixed_bfloat16 where allowed.
func newFollower(cfg *Config, planned int64) *follower {
	f := &follower{settle: cfg.LiveSettle}
	if f.settle <= 0 {
		f.settle = DefaultLiveSettle
	}
	bt := cfg.Batch / cfg.ranks()
	ks := []int{}
	for k := cfg.accumulate(); k <= bt && bt%k == 0; k *= 2 {
		ks = append(ks, k)
	}
	type level struct {
		remat bool
		prec  step.Precision
	}
	levels := []level{{cfg.Remat, cfg.Precision}}
	if !cfg.Remat {
		levels = append(levels, level{true, cfg.Precision})
	}
	if cfg.LivePrecision && cfg.Precision == step.Float32 {
		levels = append(levels, level{true, step.MixedBFloat16})
	}
	for _, l := range levels {
		for _, k := range ks {
			f.ladder = append(f.ladder, rung{accumulate: k, remat: l.remat, precision: l.prec})
		}
	}
	f.ladder[0].peak = planned
	if cfg.ranks() > 1 {
		f.agree, f.gathered = make([]byte, 16), make([]byte, 16*cfg.ranks())
	}
	return f
}

// configAt returns cfg as rung g runs it.
func configAt(cfg Config, g rung) Config {
	cfg.Accumulate, cfg.Remat, cfg.Precision = g.accumulate, g.remat, g.precision
	return cfg
}

// peakOf plans rung i (once) and returns its planned bytes; a rung that
// cannot be planned (a model recomputation or 16-bit storage does not
// apply to) counts as fitting nowhere.
func (t *Trainer) peakOf(i int) (int64, error) {
	f := t.follow
	g := &f.ladder[i]
	if g.peak == 0 {
		c := configAt(t.cfg, *g)
		progs, rp, err := c.planRun(t.data)
		if err != nil {
			g.peak = math.MaxInt64
			return g.peak, nil
		}
		g.peak = rp.Peak
		f.planned = &planned{rung: i, progs: progs, rp: rp, cfg: c}
	}
	return g.peak, nil
}

// smallest returns the smallest peak of the rungs planned.
func (f *follower) smallest() int64 {
	s := int64(math.MaxInt64)
	for _, g := range f.ladder {
		if g.peak > 0 {
			s = min(s, g.peak)
		}
	}
	return s
}

// wanted returns the rung this process wants for a live budget of b bytes
// (raw less a margin for the others' growth): below the running plan, the
// first rung from the running one down that fits b, else the first that
// fits raw (the running one when it still does), else -1 (none fits); a
// faster rung that has fitted b for the settling time; else the running
// rung. Rungs are planned as they are needed; the ones above the running
// rung are planned already.
func (t *Trainer) wanted(b, raw int64, now time.Time) (int, error) {
	f := t.follow
	cur := f.ladder[f.at].peak
	if b < cur {
		f.roomSince = time.Time{}
		fallback := -1
		if cur <= raw {
			fallback = f.at
		}
		for i := f.at + 1; i < len(f.ladder); i++ {
			p, err := t.peakOf(i)
			if err != nil {
				return 0, err
			}
			if p <= b {
				return i, nil
			}
			if fallback < 0 && p <= raw {
				fallback = i
			}
		}
		return fallback, nil
	}
	j := f.at
	for i := 0; i < f.at; i++ {
		if f.ladder[i].peak <= b {
			j = i
			break
		}
	}
	if j == f.at {
		f.roomSince = time.Time{}
		return j, nil
	}
	if f.roomSince.IsZero() {
		f.roomSince = now
	}
	if now.Sub(f.roomSince) < f.settle {
		return f.at, nil
	}
	return j, nil
}

// agree makes every process of a multi-process run take the same
// decision at the same step: it gathers each one's stop flag and wanted
// rung, and returns whether any wants to stop and the most frugal rung
// wanted (-1 when one found none fits).
func (t *Trainer) agreeAll(stop bool, want int) (bool, int, error) {
	f := t.follow
	if t.cfg.ranks() == 1 {
		return stop, want, nil
	}
	var s uint64
	if stop {
		s = 1
	}
	binary.LittleEndian.PutUint64(f.agree[0:], s)
	binary.LittleEndian.PutUint64(f.agree[8:], uint64(int64(want)))
	if err := t.cfg.Comm.AllGather(f.agree, f.gathered); err != nil {
		return false, 0, fmt.Errorf("train: agreeing on the next step with the other processes: %w", err)
	}
	anyStop, most := false, 0
	for r := 0; r < t.cfg.ranks(); r++ {
		anyStop = anyStop || binary.LittleEndian.Uint64(f.gathered[16*r:]) != 0
		w := int(int64(binary.LittleEndian.Uint64(f.gathered[16*r+8:])))
		if w < 0 || most < 0 {
			most = -1
		} else {
			most = max(most, w)
		}
	}
	return anyStop, most, nil
}

// boundary is the step boundary of a run with a live budget or several
// processes: every process agrees whether to stop (an interrupt on any
// one of them) and which rung to run next; a new rung is reserved here,
// before the next step. It returns whether to stop.
func (r *fitRun) boundary(interrupted bool) (bool, error) {
	t := r.t
	want := 0
	if t.follow != nil {
		want = t.follow.at
		if t.cfg.Live != nil {
			var err error
			now := time.Now()
			b, raw := t.follow.budget(t.cfg.Live, now)
			if want, err = t.wanted(b, raw, now); err != nil {
				return false, fmt.Errorf("train: re-planning for the live budget after step %d: %w", r.step, err)
			}
		}
	}
	mine := want
	stop, want, err := t.agreeAll(interrupted, want)
	if err != nil || stop || want == t.follow.at {
		t.follow.last = time.Now()
		return stop, err
	}
	if want < 0 {
		return false, r.exhausted()
	}
	err = r.moveTo(want, want != mine)
	t.follow.last = time.Now()
	return false, err
}

// moveTo re-plans the run as rung i of the ladder (forPeer: another
// process of the run needed it, not this one): it gives the running
// reservation back (the arena's pages to the OS at once), reserves the new
// one and logs the event with the budgets and the peaks. Variables are
// kept, so no step is lost or applied twice.
func (r *fitRun) moveTo(i int, forPeer bool) error {
	t, f := r.t, r.t.follow
	from, to, verb := f.ladder[f.at], f.ladder[i], "shrank"
	if i < f.at {
		verb = "grew back"
	}
	live, began := t.cfg.Live.Plan(), time.Now()
	t.release()
	var cfg Config
	var progs map[string]*program
	var rp *RunPlan
	if p := f.planned; p != nil && p.rung == i { // planned while choosing it
		cfg, progs, rp = p.cfg, p.progs, p.rp
	} else {
		cfg = configAt(t.cfg, to)
		var err error
		if progs, rp, err = cfg.planRun(t.data); err != nil {
			return fmt.Errorf("train: re-planning as %v after step %d: %w", to, r.step, err)
		}
	}
	f.planned = nil
	t.dropUnused(progs)
	t.engine.Trim()
	debug.FreeOSMemory()
	budget := t.cfg.Budget
	if t.origBudget > 0 {
		budget = min(t.origBudget, max(live, rp.Peak))
	}
	t.cfg = cfg
	t.engine.Ledger().SetBudget(budget)
	t.cfg.Budget = budget
	if err := t.reserve(progs); err != nil {
		return fmt.Errorf("train: reserving the re-planned step (%v) after step %d: %w", to, r.step, err)
	}
	t.setPlan(progs, rp)
	f.at, f.roomSince = i, time.Time{}
	if b, ok := t.cfg.Live.(interface{ BoundRuntime(reserved, onHeap int64) }); ok {
		b.BoundRuntime(t.Planned, t.HeapBytes())
	}
	ev := Event{Step: r.step, PeakBefore: from.peak, PeakAfter: rp.Peak, Accumulate: to.accumulate, MicroBatch: t.cfg.Batch / t.cfg.ranks() / to.accumulate,
		Message: fmt.Sprintf("live budget %s: %s from %v to %v in %.0f ms", mem.FormatBytes(live), verb, from, to, time.Since(began).Seconds()*1e3)}
	if d, ok := t.cfg.Live.(interface{ Describe() string }); ok {
		ev.Message += " (" + d.Describe() + ")"
	}
	if forPeer {
		ev.Message += ", as another process of the run needed"
	}
	if t.cfg.Log != nil {
		t.cfg.Log(ev.String())
		ev.Logged = true
	}
	r.h.Events = append(r.h.Events, ev)
	return nil
}

// dropUnused frees the gradient accumulators no program of progs uses
// (a rung with fewer micro-batches than the one before): they hold zeros
// at a step boundary.
func (t *Trainer) dropUnused(progs map[string]*program) {
	used := map[string]bool{}
	for _, pr := range progs {
		for _, s := range pr.p.Variables {
			used[s.Name] = true
		}
	}
	for _, v := range t.engine.Variables() {
		if v.Role == graph.RoleGrad && !used[v.Name] {
			t.engine.DeleteVariable(v.Name)
		}
	}
}

// exhausted stops a run no rung fits any more: it gives the reservation
// back, writes a checkpoint of exactly where the run stands and returns a
// *BudgetExhausted.
func (r *fitRun) exhausted() error {
	t, f := r.t, r.t.follow
	live := t.cfg.Live.Plan()
	r.finish()
	t.release()
	t.engine.Trim()
	debug.FreeOSMemory()
	e := &BudgetExhausted{Step: r.step, Live: live, Smallest: f.smallest()}
	if t.cfg.CheckpointDir != "" {
		path, err := t.SaveCheckpoint(t.cfg.CheckpointDir, t.cfg.KeepCheckpoints)
		if err != nil {
			return errors.Join(e, fmt.Errorf("train: and its checkpoint failed: %w", err))
		}
		e.Checkpoint = path
	}
	if t.cfg.Log != nil {
		t.cfg.Log(e.Error())
	}
	return e
}
