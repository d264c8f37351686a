package train

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// Candidate is one way to run a training step that fit-to-budget weighed.
type Candidate struct {
	Accumulate int
	MicroBatch int
	Remat      bool
	Precision  step.Precision
	Peak       int64   // planned bytes of the run (data included)
	Streamed   bool    // the data set streamed instead of loaded
	Fits       bool    // Peak <= the budget
	Estimate   float64 // modelled seconds per update
	Measured   float64 // timed seconds per update (0: not timed)
	way        int     // which way of reading the data (Data.ways)
}

func (c Candidate) String() string {
	s := fmt.Sprintf("%d x micro-batch %d, remat %v, %s", c.Accumulate, c.MicroBatch, c.Remat, c.Precision)
	if c.Streamed {
		s += ", data streamed"
	}
	s += ": peak " + mem.FormatBytes(c.Peak)
	if !c.Fits {
		return s + " (does not fit)"
	}
	s += fmt.Sprintf(", estimated %.1f ms/update", c.Estimate*1e3)
	if c.Measured > 0 {
		s += fmt.Sprintf(", measured %.1f ms/update", c.Measured*1e3)
	}
	return s
}

// Cost-model constants, calibrated afterwards by timing (see FitToBudget).
const (
	modelFlops    = 50e9 // FLOP/s
	modelBytes    = 10e9 // bytes/s
	modelPerInstr = 2e-6 // seconds of overhead per instruction
	timedSteps    = 3
	timedCount    = 3 // candidates timed
)

// FitToBudget chooses how to run cfg's training step on d under budget
// bytes, keeping the effective batch cfg.Batch and the optimizer: it plans
// every number of micro-batches that divides the batch, with and without
// rematerialization, with mixed_bfloat16 too when allowPrecision, and,
// for a data set that can be loaded or streamed (FromSet with
// StreamAuto), both ways; ranks the plans that fit by a cost model (FLOPs
// and bytes of each instruction); then times a few real updates of the
// best three and returns the config of the fastest, with every candidate
// it weighed, and sets how d is read to the chosen way. The choice is
// proved before step 1: its plan fits. Nothing large is read: the timing
// runs train on one batch of zeros shaped as the data's.
func FitToBudget(cfg Config, d *Data, budget int64, allowPrecision bool) (Config, []Candidate, error) {
	if err := cfg.check(); err != nil {
		return cfg, nil, err
	}
	cfg.defaults()
	defer cfg.closeBackend()
	ways, err := d.ways(budget)
	if err != nil {
		return cfg, nil, err
	}
	precisions := []step.Precision{cfg.Precision}
	if allowPrecision && cfg.Precision != step.MixedBFloat16 {
		precisions = append(precisions, step.MixedBFloat16)
	}
	var cands []Candidate
	for wi, w := range ways {
		for k := 1; k <= cfg.Batch; k++ {
			if cfg.Batch%k != 0 {
				continue
			}
			for _, remat := range []bool{false, true} {
				for _, prec := range precisions {
					c := cfg
					c.Accumulate, c.Remat, c.Precision = k, remat, prec
					progs, rp, err := c.planRun(w)
					if err != nil {
						return cfg, nil, err
					}
					cand := Candidate{Accumulate: k, MicroBatch: cfg.Batch / k, Remat: remat, Precision: prec, Peak: rp.Peak,
						Streamed: rp.Streamed, way: wi}
					cand.Fits = cand.Peak <= budget
					if cand.Fits {
						flops, bytes := progs["train"].p.Cost()
						per := flops/modelFlops + bytes/modelBytes + float64(len(progs["train"].p.Instrs))*modelPerInstr
						cand.Estimate = per * float64(k)
					}
					cands = append(cands, cand)
				}
			}
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].Fits != cands[j].Fits {
			return cands[i].Fits
		}
		if cands[i].Fits {
			return cands[i].Estimate < cands[j].Estimate
		}
		return cands[i].Peak < cands[j].Peak
	})
	where := mem.FormatBytes(budget)
	if cfg.BudgetSource != "" {
		where += " (" + cfg.BudgetSource + ")"
	}
	if len(cands) == 0 || !cands[0].Fits {
		least := "none planned"
		if len(cands) > 0 {
			least = cands[0].String()
		}
		msg := fmt.Sprintf("train: no way to run batch %d fits in %s; the smallest: %s, of which the data held in memory is %s",
			cfg.Batch, where, least, mem.FormatBytes(ways[0].held))
		if len(cands) > 0 {
			msg += fmt.Sprintf(": give the process at least %s", mem.FormatBytes(cands[0].Peak+ProcessOverhead))
		}
		return cfg, cands, errors.New(msg)
	}
	// Calibrate: time the best few for real, under the budget. A candidate
	// whose timing the live budget stopped (the process's own memory or a
	// neighbour's grew past what its plan left) does not fit after all.
	best, measured, stopped := 0, 0, ""
	var exhausted *BudgetExhausted
	for i := 0; i < len(cands) && i < timedCount && cands[i].Fits; i++ {
		c := cfg
		c.Accumulate, c.Remat, c.Precision, c.Budget = cands[i].Accumulate, cands[i].Remat, cands[i].Precision, budget
		c.Callbacks, c.CheckpointDir, c.Resume, c.Backend, c.ownBackend = nil, "", false, cfg.Backend, false
		secs, err := timeUpdates(c, ways[cands[i].way], timedSteps)
		if errors.As(err, &exhausted) {
			stopped = cands[i].String()
			cands[i].Fits = false
			continue
		}
		if err != nil {
			return cfg, cands, fmt.Errorf("train: timing %v: %w", cands[i], err)
		}
		cands[i].Measured = secs
		measured++
		if secs < cands[best].Measured || cands[best].Measured == 0 {
			best = i
		}
	}
	if measured == 0 {
		return cfg, cands, fmt.Errorf("train: no way to run batch %d fits in %s once running: timing %s, the memory left to the run fell to %s, below the %s its step needs: give the process at least %s more, or train with a smaller --batch",
			cfg.Batch, where, stopped, mem.FormatBytes(exhausted.Live), mem.FormatBytes(exhausted.Smallest),
			mem.FormatBytes(max(exhausted.Smallest-exhausted.Live, 1<<20)))
	}
	chosen := cfg
	chosen.Accumulate, chosen.Remat, chosen.Precision = cands[best].Accumulate, cands[best].Remat, cands[best].Precision
	chosen.Backend, chosen.ownBackend = nil, false
	if orig := cfg.Backend; !cfg.ownBackend {
		chosen.Backend = orig
	}
	d.adopt(ways[cands[best].way])
	cands[0], cands[best] = cands[best], cands[0]
	return chosen, cands, nil
}

// ways returns the ways d can be read for FitToBudget: d itself (as
// resolved under the budget), and, for a set that can be loaded or
// streamed, the other way too (loading only when the set describes itself
// without being read).
func (d *Data) ways(budget int64) ([]*Data, error) {
	if err := d.resolve(budget); err != nil {
		return nil, err
	}
	ways := []*Data{d}
	if d.set == nil || d.mode != StreamAuto {
		return ways, nil
	}
	if d.streamed == nil {
		streamed := &Data{set: d.set, mode: StreamAlways}
		switch err := streamed.resolve(budget); {
		case err == nil:
			ways = append(ways, streamed)
		case !errors.Is(err, data.ErrNotStreamable):
			return nil, err
		}
		return ways, nil
	}
	if _, ok := d.set.Describe(); ok {
		loaded := &Data{set: d.set, mode: StreamNever}
		if err := loaded.resolve(budget); err != nil {
			return nil, err
		}
		ways = append(ways, loaded)
	}
	return ways, nil
}

// adopt makes d read as w, a way of it FitToBudget chose.
func (d *Data) adopt(w *Data) {
	if w != d {
		mode := d.mode
		*d = *w
		d.mode = mode
	}
}

// timeUpdates returns the median seconds of n updates of cfg on a batch
// shaped as d's (after one untimed update), in a trainer of its own.
func timeUpdates(cfg Config, d *Data, n int) (float64, error) {
	cfg.Epochs, cfg.Warmup, cfg.MaxSteps, cfg.NoWatchdog = 1, 1<<30, 1, true
	t, err := New(cfg, InMemory(d.standIn(cfg.Batch), nil))
	if err != nil {
		return 0, err
	}
	defer t.Close()
	times := make([]float64, 0, n)
	for i := 0; i <= n; i++ {
		t.stop = false // one update per call (each starts at step 0)
		start := time.Now()
		if _, err := t.Fit(context.Background()); err != nil {
			return 0, err
		}
		if i > 0 {
			times = append(times, time.Since(start).Seconds())
		}
	}
	sort.Float64s(times)
	return times[len(times)/2], nil
}

// standIn returns a batch of zeros shaped as d's examples (features,
// labels), for timing a step without the data.
func (d *Data) standIn(batch int) *data.Examples {
	info, k := d.info.Train, d.info.Labels
	e := &data.Examples{Name: info.Name + " (stand-in)", Shape: info.Shape.Clone(), N: batch, Classes: max(k.Classes, 1),
		Floats: make([]float32, batch*info.Shape.Size())}
	if d.text != nil {
		e.Shape, e.Floats, e.LabelShape = tensor.Shape{d.text.T}, make([]float32, batch*d.text.T), tensor.Shape{d.text.T}
		e.Labels, e.Classes = make([]int32, batch*d.text.T), 256
		return e
	}
	switch {
	case k.Class && k.Shape != nil:
		e.LabelShape, e.Labels = k.Shape.Clone(), make([]int32, batch*k.Shape.Size())
	case k.Class:
		e.Labels = make([]int32, batch)
	default:
		e.Targets = make([]float32, batch*max(1, k.TargetSize))
	}
	return e
}

// Describe formats the choice and the candidates it was chosen from (or,
// when none fits, every candidate, smallest first).
func Describe(cands []Candidate) string {
	var b strings.Builder
	if !cands[0].Fits {
		b.WriteString("fit-to-budget found no plan that fits; the candidates:\n")
		for _, c := range cands {
			fmt.Fprintf(&b, "  %v\n", c)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "fit-to-budget chose: %v\n", cands[0])
	for _, c := range cands[1:] {
		fmt.Fprintf(&b, "  rejected: %v\n", c)
	}
	return b.String()
}
