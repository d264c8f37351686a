package train

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"

	"github.com/headroom-ml/headroom/internal/site"
	"github.com/headroom-ml/headroom/mem"
)

// Leak is memory that grew between the end of the first epoch and a later
// one: on the ledger (Category is a ledger category) or in the Go heap
// (Heap is true; Owner is the allocating function).
type Leak struct {
	Epoch    int
	Heap     bool
	Owner    string
	Category mem.Category
	Bytes    int64
	Site     string // file:line that allocated it
}

func (l Leak) String() string {
	where := "ledger " + l.Category.String()
	if l.Heap {
		where = "Go heap"
	}
	s := fmt.Sprintf("epoch %d: %s grew by %s: %s", l.Epoch, where, mem.FormatBytes(l.Bytes), l.Owner)
	if l.Site != "" {
		s += " at " + l.Site
	}
	return s
}

// LeakError is Fit's error under StrictMemory when memory grew.
type LeakError struct{ Leaks []Leak }

func (e *LeakError) Error() string {
	var b strings.Builder
	b.WriteString("train: memory grew after the first epoch (strict memory):")
	for _, l := range e.Leaks {
		b.WriteString("\n  " + l.String())
	}
	return b.String()
}

// watchdog compares memory at each epoch end with the first epoch's end:
// the ledger by owner, and the Go heap's live bytes (runtime/metrics),
// attributed to allocation sites through the heap profile.
type watchdog struct {
	ledger    mem.Snapshot
	heap      uint64
	sites     map[string]int64
	armed     bool
	minGrowth int64
}

// heapSampleRate is the heap profile's sampling interval while a watchdog
// runs: a leak of a few KiB a step shows within an epoch.
const heapSampleRate = 16 << 10

func newWatchdog() *watchdog {
	if runtime.MemProfileRate > heapSampleRate {
		runtime.MemProfileRate = heapSampleRate
	}
	return &watchdog{minGrowth: 1 << 20}
}

// epochEnd records the first epoch's state, or returns what grew since.
func (w *watchdog) epochEnd(epoch int, l *mem.Ledger) []Leak {
	runtime.GC()
	runtime.GC() // the heap profile reflects the last completed cycle
	snap, heap, sites := l.Snapshot(), heapLive(), heapSites()
	if !w.armed {
		w.ledger, w.heap, w.sites, w.armed = snap, heap, sites, true
		return nil
	}
	var leaks []Leak
	for _, g := range snap.Growth(w.ledger) {
		leaks = append(leaks, Leak{Epoch: epoch, Owner: g.Owner, Category: g.Category, Bytes: g.Bytes, Site: g.Site})
	}
	if grown := int64(heap) - int64(w.heap); grown > w.minGrowth {
		var top []Leak
		for site, b := range sites {
			if d := b - w.sites[site]; d > 0 {
				fn, at, _ := strings.Cut(site, "@")
				top = append(top, Leak{Epoch: epoch, Heap: true, Owner: fn, Bytes: d, Site: at})
			}
		}
		sort.Slice(top, func(i, j int) bool { return top[i].Bytes > top[j].Bytes })
		// sites that grew by less than a sixteenth of the heap's growth are
		// the noise of maps and reports, not the leak
		kept := top[:0]
		for _, l := range top {
			if l.Bytes*16 >= grown {
				kept = append(kept, l)
			}
		}
		top = kept
		if len(top) == 0 {
			top = append(top, Leak{Epoch: epoch, Heap: true, Owner: "(unattributed)", Bytes: grown})
		}
		leaks = append(leaks, top[:min(3, len(top))]...)
	}
	return leaks
}

func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// heapSites returns in-use heap bytes by allocation site ("function@file:line"
// of the first frame outside the Go runtime and headroom's own training
// machinery), from the heap profile.
func heapSites() map[string]int64 {
	n, _ := runtime.MemProfile(nil, false)
	recs := make([]runtime.MemProfileRecord, n+50)
	n, ok := runtime.MemProfile(recs, false)
	if !ok {
		return nil
	}
	out := map[string]int64{}
	for _, r := range recs[:n] {
		pcs := r.Stack()
		at := site.First(pcs, library)
		fn := "?"
		if f, _ := runtime.CallersFrames(pcs).Next(); f.Function != "" {
			fn = firstUser(pcs)
		}
		out[fn+"@"+at] += r.InUseBytes()
	}
	return out
}

// library reports whether fn belongs to the Go runtime or to headroom's
// library packages: a heap site names the first caller outside them.
func library(fn string) bool {
	return strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "internal/") ||
		site.InPackages(fn, "tensor", "mem", "train", "runtime", "graph", "compile", "kernels", "nn", "optim", "autodiff", "data", "step", "backend/cpu", "backend/sim")
}

// firstUser returns the name of the first function of pcs outside library.
func firstUser(pcs []uintptr) string {
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if !library(f.Function) || !more {
			return f.Function
		}
	}
}
