package train

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/headroom-ml/headroom/mem"
)

// ProcessOverhead is what a whole-process budget leaves the process
// itself, beside the bytes its plan reserves on the ledger: the Go runtime,
// the program's code and the heap's growth while the data sets load and
// the steps compile (`headroom plan --model small` peaks at about 14 MiB
// resident; the rest is room for garbage between collections).
// BoundRuntime keeps the Go runtime within what the budget leaves it.
const ProcessOverhead = 32 << 20

// ProcessBudget is a run's whole-process memory budget: given bytes (a
// --budget), else the limit the process lives under (its container's
// cgroup limit, else the machine's available memory). Plan is what the
// run's plan may reserve: the limit less the process itself
// (ProcessOverhead) and, in a container, less what the container's other
// processes hold. Every command reads it the same way.
type ProcessBudget struct {
	Limit  int64  // the whole process's bytes
	Source string // where Limit came from
	Others int64  // a container's bytes held by other processes at start
	Plan   int64  // bytes the plan may reserve
	// Container is the container's limit the budget was read from (zero
	// for a given budget or the machine's memory): what Follow follows.
	Container mem.Limit
}

// Follow starts following the container's limit the budget was read from
// (FollowLimit), for Config.Live; it returns nil for a given budget or the
// machine's memory, which nothing follows.
func (p ProcessBudget) Follow(every time.Duration) (*LiveBudget, error) {
	if !p.Container.FromCgroup() {
		return nil, nil
	}
	return FollowLimit(p.Container, every)
}

// NewProcessBudget returns the budget of given bytes (> 0; flag names it
// in reports, "--budget 512MiB"), or of the limit the process lives under.
func NewProcessBudget(given int64, flag string) (ProcessBudget, error) {
	if given > 0 {
		p := ProcessBudget{Limit: given, Source: flag}
		p.Plan = given - ProcessOverhead
		if p.Plan <= 0 {
			return p, fmt.Errorf("%s: the process itself needs about %s (Go runtime, code, setup), so nothing is left for a plan", flag, mem.FormatBytes(ProcessOverhead))
		}
		return p, nil
	}
	lim, err := mem.ProcessLimit()
	if err != nil {
		return ProcessBudget{}, err
	}
	p := ProcessBudget{Limit: lim.Bytes, Source: fmt.Sprintf("%s of %s", lim.Source, mem.FormatBytes(lim.Bytes))}
	if lim.FromCgroup() {
		p.Container = lim
		if lim.Usage > 0 {
			p.Others = max(0, lim.Usage-residentBytes())
		}
		if lim.MachineAvailable > 0 && lim.MachineAvailable < lim.Bytes {
			// a container's limit above what the machine has free
			p.Limit, p.Source = lim.MachineAvailable, fmt.Sprintf("the machine's available memory of %s (below %s)", mem.FormatBytes(lim.MachineAvailable), p.Source)
		}
	}
	p.Plan = p.Limit - p.Others - ProcessOverhead
	if p.Plan <= 0 {
		return p, fmt.Errorf("%s leaves nothing for a plan (%s held by others, %s for the process itself): the run needs at least %s more than that, and its plan",
			p.Source, mem.FormatBytes(p.Others), mem.FormatBytes(ProcessOverhead), mem.FormatBytes(-p.Plan))
	}
	return p, nil
}

// Describe says where the plan's budget comes from, for reports.
func (p ProcessBudget) Describe() string {
	s := p.Source
	if p.Others > 0 {
		s += fmt.Sprintf(", less %s held by other processes", mem.FormatBytes(p.Others))
	}
	return s + fmt.Sprintf(", less %s for the process itself", mem.FormatBytes(ProcessOverhead))
}

// BoundRuntime bounds the Go runtime's own memory (its heap, which holds
// the data sets read into Go slices and the input pipeline's buffers, and
// its stacks) to what the budget leaves beside the reservation outside the
// heap (reserved bytes minus onHeap), with debug.SetMemoryLimit: the
// collector works harder instead of letting garbage push the process past
// its limit. It returns the bound (0: none set).
func (p ProcessBudget) BoundRuntime(reserved, onHeap int64) int64 {
	bound := p.Limit - p.Others - (reserved - onHeap)
	if p.Limit <= 0 || bound <= 0 {
		return 0
	}
	debug.SetMemoryLimit(bound)
	return bound
}

// residentBytes returns the process's resident memory (VmRSS), 0 if unknown.
func residentBytes() int64 {
	rss, _ := mem.Resident()
	return rss
}
