package cli

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/mem"
)

// processOverhead is what a budget leaves the process itself, beside the
// bytes its plan reserves on the ledger: the Go runtime, the program's code
// and the heap's growth while the data sets load and the steps compile
// (`headroom plan --model small` peaks at about 14 MiB resident; the rest
// is room for garbage between collections). debug.SetMemoryLimit keeps the
// Go runtime within what the budget leaves it.
const processOverhead = 32 << 20

// processBudget is a run's whole-process memory budget: --budget, else the
// limit the process lives under (its container's cgroup limit, else the
// machine's available memory). The plan gets what is left after the
// process itself (processOverhead) and, in a container, what other
// processes of the container hold.
type processBudget struct {
	limit  int64  // the whole process's bytes
	source string // where limit came from
	others int64  // a container's bytes held by others at start
	plan   int64  // bytes the plan may reserve on the ledger
}

// newProcessBudget returns the budget of --budget (given > 0) or of the
// process's limit.
func newProcessBudget(given int64, flag string) (processBudget, error) {
	if given > 0 {
		p := processBudget{limit: given, source: "--budget " + flag}
		p.plan = given - processOverhead
		if p.plan <= 0 {
			return p, fmt.Errorf("--budget %s: the process itself needs about %s (Go runtime, code, setup), so nothing is left for a plan", flag, mem.FormatBytes(processOverhead))
		}
		return p, nil
	}
	lim, err := mem.ProcessLimit()
	if err != nil {
		return processBudget{}, err
	}
	p := processBudget{limit: lim.Bytes, source: fmt.Sprintf("%s of %s", lim.Source, mem.FormatBytes(lim.Bytes))}
	if lim.FromCgroup() {
		if lim.Usage > 0 {
			p.others = max(0, lim.Usage-residentBytes())
		}
		if lim.MachineAvailable > 0 && lim.MachineAvailable < lim.Bytes {
			// a container's limit above what the machine has free
			p.limit, p.source = lim.MachineAvailable, fmt.Sprintf("the machine's available memory of %s (below %s)", mem.FormatBytes(lim.MachineAvailable), p.source)
		}
	}
	p.plan = p.limit - p.others - processOverhead
	if p.plan <= 0 {
		return p, fmt.Errorf("%s leaves nothing for a plan (%s held by others, %s for the process itself)", p.source, mem.FormatBytes(p.others), mem.FormatBytes(processOverhead))
	}
	return p, nil
}

// describe says where the plan's budget comes from, for reports.
func (p processBudget) describe() string {
	s := p.source
	if p.others > 0 {
		s += fmt.Sprintf(", less %s held by other processes", mem.FormatBytes(p.others))
	}
	return s + fmt.Sprintf(", less %s for the process itself", mem.FormatBytes(processOverhead))
}

// boundRuntime bounds the Go runtime's own memory (its heap, which holds
// the data sets read into Go slices, and its stacks) to what the budget
// leaves beside the engine's reservation outside the heap (reserved bytes
// minus the data sets'), with debug.SetMemoryLimit: the collector works
// harder instead of letting garbage push the process past its limit. It
// returns the bound (0: none set).
func (p processBudget) boundRuntime(reserved, dataOnHeap int64) int64 {
	bound := p.limit - p.others - (reserved - dataOnHeap)
	if p.limit <= 0 || bound <= 0 {
		return 0
	}
	debug.SetMemoryLimit(bound)
	return bound
}

// residentBytes returns the process's resident memory (VmRSS), 0 if unknown.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
