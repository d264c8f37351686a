package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/backend/cuda"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// row is one model's results.
type row struct {
	model                      string
	weights                    float64
	planned, peak              int64
	driverDelta, driverPlanned int64
	oom, fit                   string
	samplesPerSec              float64
	torch                      map[string]torchResult // by mode
	problems                   []string               // failed checks
	targets                    []string               // targets met or missed
}

// checkModel runs one model's checks: the weights on SGD with momentum
// (see weightsOptimizer), everything else on the workload's own run with
// Adam, as the peers train.
func checkModel(target *cuda.Target, name string, o options) (*row, error) {
	wl, err := workloadFor(name, o.emulated)
	if err != nil {
		return nil, err
	}
	r := &row{model: name}
	cfg := train.Config{Model: wl.model, Epochs: 1000, Batch: wl.batch, MaxSteps: o.steps, Seed: 11, NoWatchdog: true}
	if wl.seq > 0 {
		cfg.ClipNorm = 1
	}
	start := time.Now()
	lap := func(what string) {
		fmt.Fprintf(o.log, "gpucheck: %s: %s %.1fs\n", name, what, time.Since(start).Seconds())
		start = time.Now()
	}
	if r.weights, err = compareWeights(cfg, wl, target, o); err != nil {
		return nil, err
	}
	if !(r.weights <= 1e-4) {
		r.problems = append(r.problems, fmt.Sprintf("weights differ from the host's by %.2g", r.weights))
	}
	lap("weights (host and GPU runs)")
	gpuCfg := cfg
	gpuCfg.Backend = target
	g := target.GPU()
	free0, _, err := g.MemInfo()
	if err != nil {
		return nil, err
	}
	mapped0 := g.DriverBytes()
	_, h, err := trainRun(gpuCfg, wl.data(), func(tr *train.Trainer) {
		free1, _, _ := g.MemInfo()
		r.driverDelta, r.driverPlanned = free0-free1, g.DriverBytes()-mapped0
		r.planned = tr.Planned
	})
	if err != nil {
		return nil, fmt.Errorf("the GPU run: %w", err)
	}
	r.peak, r.samplesPerSec = h.MeasuredPeak, h.SamplesPerSec
	if r.peak != r.planned {
		r.problems = append(r.problems, fmt.Sprintf("device ledger peak %d B, plan %d B", r.peak, r.planned))
	}
	if r.driverDelta != r.driverPlanned {
		r.problems = append(r.problems, fmt.Sprintf("cuMemGetInfo fell %d B, the plan's allocations take %d B", r.driverDelta, r.driverPlanned))
	}
	lap("the workload's run")
	r.oom = checkOOM(gpuCfg, wl, g, r)
	lap("OOM")
	r.fit = checkFit(gpuCfg, wl, r)
	lap("fit-to-budget")
	return r, nil
}

// weightsOptimizer is what the weights are compared under: SGD with
// momentum 0.9 at 0.01, whose update is linear in the gradient, so that
// float32 rounding differences (sums in another order, on cuBLAS) stay as
// small as they are. Adam's first steps move every weight by about ±lr
// whatever its gradient's size (m̂/√v̂ is about the gradient's sign), so a
// weight whose gradient is near zero follows rounding: two correct
// implementations then differ there by up to lr. On the emulated GPU
// the small resnet's weights differ from the host's by 1.2e-3 after 2
// Adam steps and by 2.4e-6 after 2 SGD steps.
func weightsOptimizer(cfg *train.Config) {
	cfg.Optimizer, cfg.Schedule = &optim.SGD{Momentum: 0.9}, optim.Constant(0.01)
}

// compareWeights trains cfg on the host and on the GPU (with o.plant's
// change, if any) under weightsOptimizer and returns weightsDiff.
func compareWeights(cfg train.Config, wl workload, target *cuda.Target, o options) (float64, error) {
	weightsOptimizer(&cfg)
	hostCfg, gpuCfg := cfg, cfg
	hostCfg.Backend, gpuCfg.Backend = cpu.New(o.threads), target
	if o.plant != nil {
		o.plant(&gpuCfg)
	}
	hostW, _, err := trainRun(hostCfg, wl.data(), nil)
	if err != nil {
		return 0, fmt.Errorf("the host run: %w", err)
	}
	gpuW, _, err := trainRun(gpuCfg, wl.data(), nil)
	if err != nil {
		return 0, fmt.Errorf("the GPU run: %w", err)
	}
	return weightsDiff(hostW, gpuW), nil
}

// trainRun trains cfg on d and returns the final weights; reserved, when
// set, is called once the trainer has reserved its plan.
func trainRun(cfg train.Config, d *train.Data, reserved func(*train.Trainer)) (map[string][]float64, *train.History, error) {
	tr, err := train.New(cfg, d)
	if err != nil {
		return nil, nil, err
	}
	defer tr.Close()
	if reserved != nil {
		reserved(tr)
	}
	h, err := tr.Fit(context.Background())
	if err != nil {
		return nil, nil, err
	}
	w := map[string][]float64{}
	for _, v := range tr.Engine().Variables() {
		host := tensor.New(v.DType, v.Shape)
		if err := v.Read(host.Bytes()); err != nil {
			return nil, nil, err
		}
		vals := make([]float64, host.Len())
		for i := range vals {
			vals[i] = host.Float64At(i)
		}
		w[v.Name] = vals
	}
	return w, h, nil
}

// weightsDiff returns the largest difference of b's variables (weights,
// optimizer state, moving statistics) from a's, relative to each
// variable's largest magnitude in a or 1e-3, whichever is larger (NaN or
// a missing variable: Inf). The floor keeps variables that stay near zero
// (attention's key bias, whose gradient is zero but for rounding: softmax
// ignores what is added to every score of a row) from dividing rounding
// by rounding.
func weightsDiff(a, b map[string][]float64) float64 {
	worst := 0.0
	for name, av := range a {
		bv, ok := b[name]
		if !ok || len(bv) != len(av) {
			return math.Inf(1)
		}
		scale := weightsFloor
		for _, v := range av {
			scale = max(scale, math.Abs(v))
		}
		for i := range av {
			d := math.Abs(bv[i]-av[i]) / scale
			if math.IsNaN(d) {
				return math.Inf(1)
			}
			worst = max(worst, d)
		}
	}
	return worst
}

// weightsFloor is the least scale weightsDiff divides by.
const weightsFloor = 1e-3

// checkOOM: a budget one byte under the plan fails in New with
// *mem.OOMError and leaves nothing mapped.
func checkOOM(cfg train.Config, wl workload, g *cuda.GPU, r *row) string {
	rp, err := train.PlanFor(cfg, wl.data())
	if err != nil {
		r.problems = append(r.problems, "planning: "+err.Error())
		return "error"
	}
	before := g.Mapped()
	cfg.Budget = rp.Peak - 1
	tr, err := train.New(cfg, wl.data())
	var oom *mem.OOMError
	switch {
	case err == nil:
		tr.Close()
		r.problems = append(r.problems, "a budget one byte under the plan trained")
		return "no"
	case !errors.As(err, &oom):
		r.problems = append(r.problems, "one byte under the plan: "+err.Error())
		return "other"
	case g.Mapped() != before:
		r.problems = append(r.problems, "one byte under the plan left memory mapped")
		return "leak"
	}
	return "yes"
}

// checkFit: --fit-to-budget under half the plan chooses a way that
// trains within it. Where no way of running the batch fits in half (the
// fixed part of the plan, weights, optimizer state and cuBLAS's
// workspace, is more than half of it), that is a target missed, said
// below the table, and the check is made under the midpoint between the
// smallest way's plan and the plan instead: the cell says which budget
// ("½" or "mid"), then the run's peak and its micro-batches.
func checkFit(cfg train.Config, wl workload, r *row) string {
	rp, err := train.PlanFor(cfg, wl.data())
	if err != nil {
		r.problems = append(r.problems, "planning: "+err.Error())
		return "error"
	}
	budget, which := rp.Peak/2, "½"
	fit, cands, err := train.FitToBudget(cfg, wl.data(), budget, false)
	if err != nil && len(cands) > 0 && !cands[0].Fits {
		smallest := cands[0].Peak
		r.targets = append(r.targets, fmt.Sprintf("target %s: fit-to-budget under half the plan (%s): missed, the smallest way (%v) plans %s",
			r.model, mem.FormatBytes(budget), cands[0], mem.FormatBytes(smallest)))
		budget, which = smallest+(rp.Peak-smallest)/2, "mid"
		fit, _, err = train.FitToBudget(cfg, wl.data(), budget, false)
	} else if err == nil {
		r.targets = append(r.targets, fmt.Sprintf("target %s: fit-to-budget under half the plan (%s): met", r.model, mem.FormatBytes(budget)))
	}
	if err != nil {
		r.problems = append(r.problems, fmt.Sprintf("fit-to-budget under %s: %v", mem.FormatBytes(budget), err))
		return "no"
	}
	fit.Budget, fit.MaxSteps = budget, 5
	_, h, err := trainRun(fit, wl.data(), nil)
	switch {
	case err != nil:
		r.problems = append(r.problems, fmt.Sprintf("fit-to-budget's choice under %s: %v", mem.FormatBytes(budget), err))
		return "no"
	case h.MeasuredPeak > budget:
		r.problems = append(r.problems, fmt.Sprintf("fit-to-budget's choice under %s peaked at %s", mem.FormatBytes(budget), mem.FormatBytes(h.MeasuredPeak)))
		return "no"
	}
	return fmt.Sprintf("%s: %s/%d", which, mem.FormatBytes(h.MeasuredPeak), fit.Accumulate)
}
