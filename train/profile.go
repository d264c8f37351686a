package train

import (
	"fmt"
	"time"
)

// InstrTime is one instruction of the training step, timed by
// ProfileStep.
type InstrTime struct {
	Op, Owner string
	Shape     []int
	Kernel    string        // the backend's choice where it had one ("direct", "im2col"), else ""
	Time      time.Duration // the fastest of the runs
	Flops     float64       // compile's count (2 per multiply-add in products and convolutions)
}

// GFLOPS returns the instruction's GFLOP/s.
func (it InstrTime) GFLOPS() float64 {
	if it.Time <= 0 {
		return 0
	}
	return it.Flops / it.Time.Seconds() / 1e9
}

// ProfileStep runs the training step runs times more on the batch it last
// trained on (applying the updates: profile after Fit, on a trainer whose
// weights are not wanted) and returns each instruction's fastest time,
// FLOPs and chosen kernel, in program order. A backend that cannot time
// instructions one by one is an error.
func (t *Trainer) ProfileStep(runs int) ([]InstrTime, error) {
	key := "train"
	if t.cfg.accumulate() > 1 {
		key = "train_accumulate"
	}
	pr := t.progs[t.cfg.progKey(key, 0)]
	if pr == nil || pr.x == nil {
		return nil, fmt.Errorf("train: no %s program to profile", key)
	}
	n := len(pr.p.Instrs)
	best, d := make([]time.Duration, n), make([]time.Duration, n)
	var kernels []string
	for r := 0; r < max(1, runs); r++ {
		clear(d)
		k, err := pr.x.RunTimed(d)
		if err != nil {
			return nil, err
		}
		kernels = k
		for i := range d {
			if r == 0 || d[i] < best[i] {
				best[i] = d[i]
			}
		}
	}
	out := make([]InstrTime, n)
	for i := range out {
		it := &pr.p.Instrs[i]
		out[i] = InstrTime{Op: it.Op.String(), Owner: it.Owner, Shape: it.Shape, Kernel: kernels[i], Time: best[i], Flops: pr.p.InstrFlops(i)}
	}
	return out, nil
}
