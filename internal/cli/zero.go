package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/train"
)

const zeroUsage = "under mpirun or srun (with plan: with --ranks): shard the model state over the processes (ZeRO): 1 the optimizer state, 2 also the gradients (reduce-scattered while backward runs), 3 also the parameters (each layer's gathered before its forward and its backward); 0 none"

// zeroStage returns the ZeRO stage --zero and --shard-optimizer ask for.
func zeroStage(zero int, shard bool) (int, error) {
	switch {
	case zero < 0 || zero > 3:
		return 0, usagef("--zero %d: want 0, 1, 2 or 3", zero)
	case shard && zero > 1:
		return 0, usagef("--shard-optimizer is --zero 1; it does not go with --zero %d", zero)
	case shard:
		return 1, nil
	}
	return zero, nil
}

// ranksReport is one process's share of a data-parallel run, as plan
// prints it with --ranks or --zero.
type ranksReport struct {
	Ranks int `json:"ranks"`
	Zero  int `json:"zero"`
	// ModelStateBytes is one process's params + grads + optimizer state,
	// OneProcessBytes one process's alone (--ranks 1, no ZeRO).
	ModelStateBytes int64          `json:"model_state_bytes"`
	OneProcessBytes int64          `json:"one_process_model_state_bytes"`
	Gathers         train.Gathers  `json:"gathers"`
	Tried           []rankPlanJSON `json:"ranks_tried,omitempty"` // with a budget: 1, 2, ... processes until one fits
	RanksNeeded     *int           `json:"ranks_needed,omitempty"`
}

type rankPlanJSON struct {
	Ranks           int   `json:"ranks"`
	Batch           int   `json:"batch_per_process"`
	PeakBytes       int64 `json:"peak_bytes"`
	ModelStateBytes int64 `json:"model_state_bytes"`
	GatherBytes     int64 `json:"gather_bytes_at_most"`
}

// mostRanks bounds the search for the number of processes a budget needs.
const mostRanks = 256

// addRanks adds one process's share to r when the plan is of several
// processes or a ZeRO stage: its model state against one process's, its
// gather buffers, and, under a budget, how many processes the run needs.
func (r *planReport) addRanks(cfg train.Config, d *train.Data, rp *train.RunPlan, ranks int) error {
	if ranks == 1 && cfg.Zero == 0 {
		return nil
	}
	one := cfg
	one.Comm, one.Zero = nil, 0
	op, err := train.PlanFor(one, d)
	if err != nil {
		return err
	}
	p := &ranksReport{Ranks: ranks, Zero: cfg.Zero, ModelStateBytes: train.ModelState(rp.Totals),
		OneProcessBytes: train.ModelState(op.Totals), Gathers: train.GathersOf(rp.Step)}
	if r.PlanBudgetBytes > 0 {
		plans, need, err := train.RanksFor(cfg, d, r.PlanBudgetBytes, mostRanks)
		if err != nil {
			return err
		}
		for _, pl := range plans {
			p.Tried = append(p.Tried, rankPlanJSON{Ranks: pl.Ranks, Batch: pl.Batch, PeakBytes: pl.Peak, ModelStateBytes: pl.State, GatherBytes: pl.Gathers.Most})
		}
		p.RanksNeeded = &need
	}
	r.Processes = p
	return nil
}

// printRanks prints r's share of one process, if it has one.
func printRanks(w io.Writer, r *planReport) {
	p := r.Processes
	if p == nil {
		return
	}
	fb := mem.FormatBytes
	if p.Ranks > 1 {
		fmt.Fprintf(w, "one process of %d (ZeRO stage %d): params + grads + optimizer state %s, %.3fx one process's alone (%s)\n",
			p.Ranks, p.Zero, fb(p.ModelStateBytes), float64(p.ModelStateBytes)/float64(max(p.OneProcessBytes, 1)), fb(p.OneProcessBytes))
	}
	if p.Gathers.Buffers > 0 {
		fmt.Fprintf(w, "  %s\n", p.Gathers)
	}
	if p.RanksNeeded == nil {
		return
	}
	fmt.Fprintf(w, "processes the run needs in the budget of %s each (the batch of %d split over them, ZeRO stage %d):\n", fb(r.PlanBudgetBytes), r.Batch, p.Zero)
	fmt.Fprintf(w, "  %6s %8s %14s %14s %14s\n", "ranks", "batch", "peak", "model state", "gathers")
	for _, t := range p.Tried {
		fmt.Fprintf(w, "  %6d %8d %14s %14s %14s\n", t.Ranks, t.Batch, fb(t.PeakBytes), fb(t.ModelStateBytes), fb(t.GatherBytes))
	}
	if *p.RanksNeeded > 0 {
		fmt.Fprintf(w, "  %d processes fit (mpirun -np %d, srun -n %d)\n", *p.RanksNeeded, *p.RanksNeeded, *p.RanksNeeded)
	} else {
		fmt.Fprintf(w, "  no number of processes up to %d that splits the batch fits\n", mostRanks)
	}
}

// perRank returns the RESULT line's keys of a data-parallel run's
// processes: the ZeRO stage, what this process (rank 0) holds by category
// after training and the most its gather buffers hold, and every
// process's planned and measured peak, comma-separated in rank order
// (every process takes part: it gathers them).
func (r *trainRun) perRank(t *train.Trainer, h *train.History) ([]any, error) {
	per, err := t.PerRank(h)
	if err != nil {
		return nil, err
	}
	zero := r.cfg.Zero
	if len(per) == 1 {
		zero = 0
	}
	var planned, measured []string
	for _, p := range per {
		planned, measured = append(planned, strconv.FormatInt(p.Planned, 10)), append(measured, strconv.FormatInt(p.Measured, 10))
	}
	live := t.Engine().Ledger().Totals()
	return []any{"zero", zero, "param_bytes", live[mem.Param], "grad_bytes", live[mem.Grad],
		"model_state_bytes", train.ModelState(live), "gather_bytes", train.GathersOf(t.Plan).Most,
		"rank_planned_peak_bytes", strings.Join(planned, ","), "rank_measured_peak_bytes", strings.Join(measured, ",")}, nil
}
