package data

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

type stageKind uint8

const (
	kindSource   stageKind = iota // reads files or memory: its time is its own
	kindSync                      // runs in its consumer's goroutine
	kindMap                       // parallel Map: workers in goroutines
	kindPrefetch                  // a goroutine filling a buffer
)

var kindNames = [...]string{"source", "sync", "parallel", "prefetch"}

// stage holds the live counters of one stage in one pass. Times are in
// nanoseconds.
type stage struct {
	name  string
	kind  stageKind
	inner bool // opened by Interleave for one of its inputs
	up    *stage

	elements, bytes, skipped atomic.Int64
	incl                     atomic.Int64 // time consumers spent in next
	busy                     atomic.Int64 // parallel map: time in the function, all workers
	blocked                  atomic.Int64 // producers waiting on a full buffer
	par, maxPar, buffered    atomic.Int64
}

func (s *stage) setPar(n int) {
	s.par.Store(int64(n))
	for {
		m := s.maxPar.Load()
		if int64(n) <= m || s.maxPar.CompareAndSwap(m, int64(n)) {
			return
		}
	}
}

// StageStats are the counters of one stage of a pass.
type StageStats struct {
	Name     string
	Kind     string // "source", "sync", "parallel" (Map with workers) or "prefetch"
	Upstream string // the stage it reads from ("" for a source)
	Elements int64  // elements it produced
	Bytes    int64  // bytes of those elements (tensors and records)
	Skipped  int64  // corrupt records skipped under the Skip policy
	// Producing is the time spent in the stage's own work: for a source,
	// reading and parsing; for a parallel Map, the function's time summed
	// over workers; for other stages, the time in next less the time in
	// the upstream's next.
	Producing time.Duration
	// Waiting is the time the stage waited for its upstream's elements.
	Waiting time.Duration
	// Blocked is the time a buffering stage's producers waited for room
	// (the consumer was slower: backpressure).
	Blocked time.Duration
	// ConsumerWait is the time the stage's consumer spent waiting in its
	// next (for the last stage: the time the training loop waited).
	ConsumerWait time.Duration
	// Parallelism is the current number of Map workers or Prefetch depth;
	// MaxParallelism the largest it reached.
	Parallelism, MaxParallelism int
	// Buffered is the number of elements a Shuffle buffer holds now.
	Buffered int

	up int // index of Upstream in Stats.Stages, -1 for none
}

// Stats are the counters of a pass, sources first.
type Stats struct {
	Stages       []StageStats
	Wall         time.Duration // since the pass was opened
	ConsumerWait time.Duration // time spent in Iterator.Next
	Elements     int64         // elements Next returned

	top int // index of the last stage
}

func (p *pass) stats(wait time.Duration, n int64) Stats {
	p.mu.Lock()
	stages := append([]*stage(nil), p.stages...)
	p.mu.Unlock()
	s := Stats{Wall: time.Since(p.start), ConsumerWait: wait, Elements: n, top: -1}
	index := make(map[*stage]int, len(stages))
	for i, st := range stages {
		index[st] = i
		if st == p.top {
			s.top = i
		}
	}
	for _, st := range stages {
		ss := StageStats{
			Name: st.name, Kind: kindNames[st.kind],
			Elements: st.elements.Load(), Bytes: st.bytes.Load(), Skipped: st.skipped.Load(),
			ConsumerWait: time.Duration(st.incl.Load()), Blocked: time.Duration(st.blocked.Load()),
			Parallelism: int(st.par.Load()), MaxParallelism: int(st.maxPar.Load()),
			Buffered: int(st.buffered.Load()), up: -1,
		}
		var upIncl time.Duration
		if st.up != nil {
			ss.Upstream = st.up.name
			ss.up = index[st.up]
			upIncl = time.Duration(st.up.incl.Load())
		}
		ss.Waiting = upIncl
		switch st.kind {
		case kindSource:
			ss.Producing, ss.Waiting = ss.ConsumerWait, 0
		case kindSync:
			ss.Producing = max(0, ss.ConsumerWait-upIncl)
		case kindMap:
			ss.Producing = time.Duration(st.busy.Load())
		case kindPrefetch:
			ss.Producing = 0
		}
		s.Stages = append(s.Stages, ss)
	}
	return s
}

// Bottleneck attributes the consumer's wait to stages and returns the stage
// with the largest share and that share (0..1). Walking from the last stage
// to the source, a stage keeps the part of the wait that its own work
// explains (Producing against Waiting; a parallel Map's work divided by its
// workers) and passes the rest upstream; a Prefetch keeps none.
func (s Stats) Bottleneck() (name string, share float64) {
	if s.top < 0 || s.top >= len(s.Stages) {
		return "", 0
	}
	blame := make([]float64, len(s.Stages))
	w := 1.0
	for i, hops := s.top, 0; i >= 0 && hops < len(s.Stages) && w > 1e-9; hops++ {
		st := s.Stages[i]
		if st.up < 0 {
			blame[i] += w
			break
		}
		self, up := st.Producing.Seconds(), st.Waiting.Seconds()
		switch st.Kind {
		case "parallel":
			self /= float64(max(1, st.Parallelism))
		case "prefetch":
			self = 0
		}
		keep := 0.0
		if self+up > 0 {
			keep = self / (self + up)
		}
		blame[i] += w * keep
		w *= 1 - keep
		i = st.up
	}
	best := 0
	for i := range blame {
		if blame[i] > blame[best] {
			best = i
		}
	}
	return s.Stages[best].Name, blame[best]
}

// Summary is one line naming the bottleneck, e.g. "map(decode) is the
// bottleneck: 92% of consumer wait (the consumer waited 61% of 2.1s)".
func (s Stats) Summary() string {
	if s.Wall <= 0 || len(s.Stages) == 0 {
		return "no data yet"
	}
	frac := s.ConsumerWait.Seconds() / s.Wall.Seconds()
	name, share := s.Bottleneck()
	if frac < 0.05 {
		return fmt.Sprintf("input is not the bottleneck: the consumer waited %.0f%% of %v", 100*frac, s.Wall.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s is the bottleneck: %.0f%% of consumer wait (the consumer waited %.0f%% of %v)",
		name, 100*share, 100*frac, s.Wall.Round(time.Millisecond))
}

// String formats a table of the stages and the summary line.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %-9s %10s %12s %10s %10s %10s %10s %5s %7s\n",
		"stage", "kind", "elements", "bytes", "producing", "waiting", "blocked", "cons.wait", "par", "skipped")
	for _, st := range s.Stages {
		par := ""
		if st.MaxParallelism > 0 {
			par = fmt.Sprint(st.Parallelism)
		}
		fmt.Fprintf(&b, "%-28s %-9s %10d %12d %10v %10v %10v %10v %5s %7d\n",
			st.Name, st.Kind, st.Elements, st.Bytes, st.Producing.Round(time.Millisecond),
			st.Waiting.Round(time.Millisecond), st.Blocked.Round(time.Millisecond),
			st.ConsumerWait.Round(time.Millisecond), par, st.Skipped)
	}
	b.WriteString(s.Summary())
	return b.String()
}
