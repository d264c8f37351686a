package train

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
)

// Candidate is one way to run a training step that fit-to-budget weighed.
type Candidate struct {
	Accumulate int
	MicroBatch int
	Remat      bool
	Precision  string
	Peak       int64   // planned bytes of the run (data included)
	Fits       bool    // Peak <= the budget
	Estimate   float64 // modelled seconds per update
	Measured   float64 // timed seconds per update (0: not timed)
}

func (c Candidate) String() string {
	s := fmt.Sprintf("%d x micro-batch %d, remat %v, %s: peak %s", c.Accumulate, c.MicroBatch, c.Remat, c.Precision, mem.FormatBytes(c.Peak))
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

// FitToBudget chooses how to run cfg's training step under budget bytes,
// keeping the effective batch cfg.Batch and the optimizer: it plans every
// number of micro-batches that divides the batch, with and without
// rematerialization, and (when allowPrecision) with mixed_bfloat16; ranks
// the plans that fit by a cost model (FLOPs and bytes of each instruction);
// then times a few real updates of the best three and returns the config of
// the fastest, with every candidate it weighed. The choice is proved before
// step 1: its plan fits.
func FitToBudget(cfg Config, ds *data.Examples, budget int64, allowPrecision bool) (Config, []Candidate, error) {
	cfg.defaults()
	evalN := 0
	dataBytes := mem.Align(ds.Bytes())
	if cfg.Validation != nil {
		evalN = cfg.Validation.N
		dataBytes += mem.Align(cfg.Validation.Bytes())
	}
	return fitToBudget(cfg, ds.N, evalN, dataBytes, budget, allowPrecision, func(c Config) (float64, error) {
		return timeUpdates(c, ds, timedSteps)
	})
}

// fitToBudget is FitToBudget for trainN training and evalN evaluation
// examples and dataBytes of data held in memory, timing a candidate with
// timeIt (seconds per update).
func fitToBudget(cfg Config, trainN, evalN int, dataBytes, budget int64, allowPrecision bool, timeIt func(Config) (float64, error)) (Config, []Candidate, error) {
	precisions := []string{cfg.Precision}
	if allowPrecision && cfg.Precision != "mixed_bfloat16" {
		precisions = append(precisions, "mixed_bfloat16")
	}
	var cands []Candidate
	for k := 1; k <= cfg.Batch; k++ {
		if cfg.Batch%k != 0 {
			continue
		}
		for _, remat := range []bool{false, true} {
			for _, prec := range precisions {
				c := cfg
				c.Accumulate, c.Remat, c.Precision = k, remat, prec
				progs, err := c.compileAll(trainN, evalN)
				if err != nil {
					return cfg, nil, err
				}
				totals, _ := planned(progs)
				cand := Candidate{Accumulate: k, MicroBatch: cfg.Batch / k, Remat: remat, Precision: prec, Peak: sum(totals) + dataBytes}
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
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].Fits != cands[j].Fits {
			return cands[i].Fits
		}
		if cands[i].Fits {
			return cands[i].Estimate < cands[j].Estimate
		}
		return cands[i].Peak < cands[j].Peak
	})
	if len(cands) == 0 || !cands[0].Fits {
		least := "none planned"
		if len(cands) > 0 {
			least = cands[0].String()
		}
		return cfg, cands, fmt.Errorf("train: no way to run batch %d fits in %s; the smallest: %s, of which the data set held in memory is %s",
			cfg.Batch, mem.FormatBytes(budget), least, mem.FormatBytes(dataBytes))
	}
	// Calibrate: time the best few for real, under the budget.
	best := 0
	for i := 0; i < len(cands) && i < timedCount && cands[i].Fits; i++ {
		c := cfg
		c.Accumulate, c.Remat, c.Precision, c.Budget = cands[i].Accumulate, cands[i].Remat, cands[i].Precision, budget
		c.Callbacks, c.CheckpointDir, c.Resume = nil, "", false
		secs, err := timeIt(c)
		if err != nil {
			return cfg, cands, fmt.Errorf("train: timing %v: %w", cands[i], err)
		}
		cands[i].Measured = secs
		if secs < cands[best].Measured || cands[best].Measured == 0 {
			best = i
		}
	}
	chosen := cfg
	chosen.Accumulate, chosen.Remat, chosen.Precision = cands[best].Accumulate, cands[best].Remat, cands[best].Precision
	cands[0], cands[best] = cands[best], cands[0]
	return chosen, cands, nil
}

// timeUpdates returns the median seconds of n updates of cfg on the first
// examples of data (after one untimed update), in a trainer of its own.
func timeUpdates(cfg Config, ds *data.Examples, n int) (float64, error) {
	first := ds.Slice(ds.Name, 0, min(ds.N, cfg.Batch))
	cfg.Validation, cfg.Epochs, cfg.Warmup = nil, 1, 1<<30
	t, err := New(cfg, first)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	times := make([]float64, 0, n)
	for i := 0; i <= n; i++ {
		start := time.Now()
		if _, err := t.Fit(first); err != nil {
			return 0, err
		}
		if i > 0 {
			times = append(times, time.Since(start).Seconds())
		}
	}
	sort.Float64s(times)
	return times[len(times)/2], nil
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
