package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/headroom-ml/headroom/mem"
)

// torchResult is one line of scripts/gpu_check_torch.py: a model trained
// by PyTorch on the same GPU, eagerly or under torch.compile (mode).
type torchResult struct {
	Model         string  `json:"model"`
	Mode          string  `json:"mode"` // "eager" or "compile"
	SamplesPerSec float64 `json:"samples_per_sec"`
	PeakBytes     int64   `json:"peak_bytes"` // torch.cuda.max_memory_allocated
	Torch         string  `json:"torch"`      // PyTorch's version
	Error         string  `json:"error"`      // why the run failed, if it did
}

// The targets of the hardware run (issue 24): samples/s at least PyTorch
// eager's, device peak at most 0.7 of PyTorch eager's.
const (
	speedTarget  = 1.0
	memoryTarget = 0.7
)

// readTorch reads PyTorch's results from path ("": none), by model and
// mode.
func readTorch(path string) (map[string]map[string]torchResult, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseTorch(f, path)
}

// parseTorch parses JSON lines of torchResult (blank lines skipped); an
// error names the line.
func parseTorch(r io.Reader, name string) (map[string]map[string]torchResult, error) {
	out := map[string]map[string]torchResult{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var t torchResult
		if err := json.Unmarshal([]byte(text), &t); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if t.Model == "" || (t.Mode != "eager" && t.Mode != "compile") {
			return nil, fmt.Errorf("%s:%d: want a model and a mode eager or compile, got %q %q", name, line, t.Model, t.Mode)
		}
		if out[t.Model] == nil {
			out[t.Model] = map[string]torchResult{}
		}
		out[t.Model][t.Mode] = t
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// printTable prints the rows as one Markdown table, then each problem
// and the speed and memory targets; it reports whether no row has a
// problem.
func printTable(w io.Writer, rows []*row) bool {
	fmt.Fprintln(w, "| model | weights vs CPU, SGD (≤1e-4) | plan | ledger peak | driver drop / allocations | plan−1 B | fit-to-budget (budget: peak/micro-batches) | samples/s | torch eager | torch compile | ×eager | peak vs torch eager | result |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	ok := true
	var targets []string
	for _, r := range rows {
		targets = append(targets, r.targets...)
		result := "ok"
		if len(r.problems) > 0 {
			result, ok = "FAIL", false
		}
		eager, compiled := r.torch["eager"], r.torch["compile"]
		speed, memory := "-", "-"
		if eager.SamplesPerSec > 0 {
			x := r.samplesPerSec / eager.SamplesPerSec
			speed = fmt.Sprintf("%.2f", x)
			targets = append(targets, target(r.model, "samples/s ÷ torch eager's", x, x >= speedTarget, fmt.Sprintf("≥ %.1f", speedTarget)))
		}
		if eager.PeakBytes > 0 {
			x := float64(r.peak) / float64(eager.PeakBytes)
			memory = fmt.Sprintf("%.2f (%s)", x, mem.FormatBytes(eager.PeakBytes))
			targets = append(targets, target(r.model, "device peak ÷ torch eager's", x, x <= memoryTarget, fmt.Sprintf("≤ %.1f", memoryTarget)))
		}
		fmt.Fprintf(w, "| %s | %.2g | %s | %s | %s / %s | %s | %s | %.1f | %s | %s | %s | %s | %s |\n",
			r.model, r.weights, mem.FormatBytes(r.planned), mem.FormatBytes(r.peak),
			mem.FormatBytes(r.driverDelta), mem.FormatBytes(r.driverPlanned), r.oom, r.fit,
			r.samplesPerSec, torchCell(eager), torchCell(compiled), speed, memory, result)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		for _, p := range r.problems {
			fmt.Fprintf(w, "FAIL %s: %s\n", r.model, p)
		}
		for _, mode := range []string{"eager", "compile"} {
			if t, ok := r.torch[mode]; ok && t.Error != "" {
				fmt.Fprintf(w, "torch %s %s: %s\n", mode, r.model, t.Error)
			}
		}
	}
	for _, t := range targets {
		fmt.Fprintln(w, t)
	}
	if ok {
		fmt.Fprintln(w, "gpucheck: every correctness check passed")
	} else {
		fmt.Fprintln(w, "gpucheck: some checks FAILED")
	}
	return ok
}

// torchCell is a PyTorch run's samples/s and peak, or why there is none.
func torchCell(t torchResult) string {
	switch {
	case t.Error != "":
		return "error"
	case t.SamplesPerSec == 0:
		return "-"
	}
	return fmt.Sprintf("%.1f (%s)", t.SamplesPerSec, mem.FormatBytes(t.PeakBytes))
}

// target is one line saying whether a model met a target.
func target(model, what string, x float64, met bool, want string) string {
	verdict := "met"
	if !met {
		verdict = "missed"
	}
	return fmt.Sprintf("target %s: %s %.2f, want %s: %s", model, what, x, want, verdict)
}
