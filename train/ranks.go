package train

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// PlanOnly stands for the processes of a data-parallel run that is only
// planned (PlanFor, RanksFor): this is rank 0 of PlanOnly(n) processes,
// and every collective fails, as nothing is ever exchanged.
type PlanOnly int

// ErrPlanOnly is what PlanOnly's collectives return.
var ErrPlanOnly = errors.New("train: the processes of a planned run exchange nothing")

func (r PlanOnly) Rank() int                                        { return 0 }
func (r PlanOnly) Size() int                                        { return int(r) }
func (PlanOnly) AllReduceSum([]byte, tensor.DType) error            { return ErrPlanOnly }
func (PlanOnly) ReduceScatterSum(_, _ []byte, _ tensor.DType) error { return ErrPlanOnly }
func (PlanOnly) AllGather(_, _ []byte) error                        { return ErrPlanOnly }
func (PlanOnly) Broadcast([]byte, int) error                        { return ErrPlanOnly }
func (PlanOnly) Start([]byte, tensor.DType) (interface{ Wait() error }, error) {
	return nil, ErrPlanOnly
}
func (PlanOnly) StartReduceScatter(_, _ []byte, _ tensor.DType) (interface{ Wait() error }, error) {
	return nil, ErrPlanOnly
}
func (PlanOnly) StartAllGather(_, _ []byte) (interface{ Wait() error }, error) {
	return nil, ErrPlanOnly
}

// Gathers sums up the ZeRO stage 3 gather buffers of a plan: the arena
// buffers the whole parameters are gathered into (owner gather/<weight>),
// before a layer's forward and again before its backward.
type Gathers struct {
	Buffers      int    `json:"buffers"`       // how many
	AtPeak       int64  `json:"at_peak_bytes"` // bytes of those live at the plan's peak instruction
	Most         int64  `json:"most_bytes"`    // the most bytes of them live at one instruction
	Largest      int64  `json:"largest_bytes"`
	LargestOwner string `json:"largest"`
}

// GathersOf finds the gather buffers of p.
func GathersOf(p *compile.Plan) Gathers {
	var g Gathers
	var sizes []int64
	var start, end []int
	for _, b := range p.Buffers {
		if b.Kind != compile.KindArena || !strings.HasPrefix(b.Owner, "gather/") || !strings.HasSuffix(b.Owner, "/all_gather_start") {
			continue
		}
		g.Buffers++
		sizes, start, end = append(sizes, b.Bytes), append(start, b.Start), append(end, b.End)
		if b.Start <= p.PeakInstr && p.PeakInstr <= b.End {
			g.AtPeak += b.Bytes
		}
		if b.Bytes > g.Largest {
			g.Largest, g.LargestOwner = b.Bytes, strings.TrimSuffix(strings.TrimPrefix(b.Owner, "gather/"), "/all_gather_start")
		}
	}
	if g.Buffers > 0 {
		g.Most, _ = compile.LowerBound(sizes, start, end, p.Instrs)
	}
	return g
}

// RankPlan is what one process of a data-parallel run over Ranks
// processes reserves (rank 0's share of the batch).
type RankPlan struct {
	Ranks int
	Batch int // this process's share of the global batch
	Peak  int64
	// State is params + grads + optimizer state.
	State   int64
	Totals  [mem.NumCategories]int64
	Gathers Gathers
}

// ModelState is params + grads + optimizer state of totals.
func ModelState(totals [mem.NumCategories]int64) int64 {
	return totals[mem.Param] + totals[mem.Grad] + totals[mem.OptState]
}

// RanksFor answers "how many processes does this run need in budget
// bytes each": it plans rank 0 of cfg (its ZeRO stage, the global batch
// cfg.Batch split over the processes) over each number of processes up to
// most that splits the batch evenly, in increasing order, until one fits
// budget, and returns those plans and the number that fits (0: none up to
// most).
func RanksFor(cfg Config, d *Data, budget int64, most int) ([]RankPlan, int, error) {
	var plans []RankPlan
	for n := 1; n <= most; n++ {
		if cfg.Batch%n != 0 || (n > 1 && cfg.Batch/n < max(1, cfg.Accumulate)) {
			continue
		}
		c := cfg
		c.Comm = nil
		if n > 1 {
			c.Comm = PlanOnly(n)
		}
		rp, err := PlanFor(c, d)
		if err != nil {
			return plans, 0, fmt.Errorf("train: planning %d processes: %w", n, err)
		}
		plans = append(plans, RankPlan{Ranks: n, Batch: cfg.Batch / n, Peak: rp.Peak, State: ModelState(rp.Totals),
			Totals: rp.Totals, Gathers: GathersOf(rp.Step)})
		if rp.Peak <= budget {
			return plans, n, nil
		}
	}
	return plans, 0, nil
}

// RankTotals is what one process of a run planned and held.
type RankTotals struct {
	Planned, Measured int64
	// Live is the ledger's bytes by category after training.
	Live [mem.NumCategories]int64
}

// PerRank returns every process's planned and measured peak and the
// bytes it holds by category, in rank order (one entry without Comm):
// every process must call it, after Fit.
func (t *Trainer) PerRank(h *History) ([]RankTotals, error) {
	const words = 2 + int(mem.NumCategories)
	mine := make([]byte, 8*words)
	put := func(i int, v int64) { binary.LittleEndian.PutUint64(mine[8*i:], uint64(v)) }
	put(0, h.PlannedPeak)
	put(1, h.MeasuredPeak)
	for c, v := range t.engine.Ledger().Totals() {
		put(2+c, v)
	}
	all := mine
	if n := t.cfg.ranks(); n > 1 {
		all = make([]byte, n*len(mine))
		if err := t.cfg.Comm.AllGather(mine, all); err != nil {
			return nil, fmt.Errorf("train: rank %d: gathering every process's totals: %w", t.cfg.Comm.Rank(), err)
		}
	}
	out := make([]RankTotals, len(all)/len(mine))
	for r := range out {
		get := func(i int) int64 { return int64(binary.LittleEndian.Uint64(all[r*len(mine)+8*i:])) }
		out[r].Planned, out[r].Measured = get(0), get(1)
		for c := range out[r].Live {
			out[r].Live[c] = get(2 + c)
		}
	}
	return out, nil
}

// rankNotes describes one process's share of a data-parallel run for an
// OOM report: its model state by category and its gather buffers.
func (t *Trainer) rankNotes(rp *RunPlan) []string {
	n := t.cfg.ranks()
	if n == 1 {
		return nil
	}
	fb, tot := mem.FormatBytes, rp.Totals
	notes := []string{fmt.Sprintf("per process (rank %d of %d, ZeRO stage %d): params %s, grads %s, optimizer state %s: model state %s",
		t.cfg.Comm.Rank(), n, t.cfg.zeroStage(), fb(tot[mem.Param]), fb(tot[mem.Grad]), fb(tot[mem.OptState]), fb(ModelState(tot)))}
	if g := GathersOf(rp.Step); g.Buffers > 0 {
		notes = append(notes, g.String())
	}
	return notes
}

// String describes the gather buffers in one line.
func (g Gathers) String() string {
	fb := mem.FormatBytes
	return fmt.Sprintf("gather buffers (ZeRO stage 3): %d, at most %s live at once, %s at the peak, the largest %s (%s)",
		g.Buffers, fb(g.Most), fb(g.AtPeak), fb(g.Largest), g.LargestOwner)
}
