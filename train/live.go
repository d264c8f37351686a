package train

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/headroom-ml/headroom/mem"
)

// LiveBudget follows the limit a process lives under while it trains: it
// reads the container's limit and what the container's other processes
// hold (mem.LimitWatch) when asked, at most once every Every, and returns
// what a plan may reserve now: the limit less the others less
// ProcessOverhead. A Trainer with Config.Live asks at each step boundary:
// a few preads of the cgroup's files (about 20 µs on cgroup v1), no
// allocation. It samples on the caller's goroutine, not on a goroutine of
// its own: a ticker waking every few milliseconds takes a P from the
// kernels' threads while they compute, which on a 2-core machine made the
// cnn's steps 5x slower.
type LiveBudget struct {
	mu    sync.Mutex
	w     *mem.LimitWatch
	every time.Duration
	last  time.Time // when the last sample was read
	plan  int64     // bytes the plan may reserve, from the last sample
	limit int64     // the last sample's limit and others
	other int64
	err   error
	// growth is how fast the others grew over the last window of samples
	// (bytes per second, 0 when they did not): the trainer keeps that much
	// more room per second until it can act
	growth int64
	win    [liveWindow]struct {
		at     time.Time
		others int64
	}
	n int // samples taken
}

// liveWindow is how many samples the growth rate may look back over,
// and liveSpan the span it looks back over when it can.
const (
	liveWindow = 20
	liveSpan   = 100 * time.Millisecond
)

// DefaultLiveEvery is how often, at most, a LiveBudget reads the
// container's files by default.
const DefaultLiveEvery = 10 * time.Millisecond

// FollowLimit starts following lim, the container's limit the process
// lives under (mem.ProcessLimit), reading it at most every every (<= 0:
// DefaultLiveEvery). It fails for a limit that is not a container's.
func FollowLimit(lim mem.Limit, every time.Duration) (*LiveBudget, error) {
	w, err := lim.Watch()
	if err != nil {
		return nil, err
	}
	if every <= 0 {
		every = DefaultLiveEvery
	}
	b := &LiveBudget{w: w, every: every}
	if err := b.sample(time.Now()); err != nil {
		w.Close()
		return nil, err
	}
	return b, nil
}

// sample reads the watch once and records the plan's budget.
func (b *LiveBudget) sample(now time.Time) error {
	s, err := b.w.Read()
	if err != nil {
		return err
	}
	b.last = now
	limit := s.Limit
	if s.High > 0 && s.High < limit { // v2's throttle point: stay under it too
		limit = s.High
	}
	others := s.Others()
	b.win[b.n%liveWindow].at, b.win[b.n%liveWindow].others = now, others
	b.n++
	// the rate since the newest sample at least liveSpan old (else the
	// oldest held): over a span, as one sample's jitter is not a trend
	var rate int64
	held := min(b.n, liveWindow)
	for i := 2; i <= held; i++ {
		w := b.win[(b.n-i)%liveWindow]
		if dt := now.Sub(w.at); dt >= liveSpan || i == held {
			if dt > 0 && others > w.others {
				rate = int64(float64(others-w.others) / dt.Seconds())
			}
			break
		}
	}
	b.growth, b.limit, b.other = rate, limit, others
	b.plan = limit - others - ProcessOverhead
	return nil
}

// Plan returns what a plan may reserve now (it may be <= 0: nothing),
// reading the container's files when the last reading is older than
// Every. When a reading fails, the last one stands and Err says why.
func (b *LiveBudget) Plan() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now := time.Now(); b.err == nil && now.Sub(b.last) >= b.every {
		b.err = b.sample(now)
	}
	return b.plan
}

// Growth returns how fast the other processes' memory grew over the last
// samples (bytes per second; 0 when it did not).
func (b *LiveBudget) Growth() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.growth
}

// Err returns the error that stopped the readings, if any.
func (b *LiveBudget) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Describe says what the last sample saw, for the run's log.
func (b *LiveBudget) Describe() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("the container's limit %s, %s held by other processes", mem.FormatBytes(b.limit), mem.FormatBytes(b.other))
}

// BoundRuntime bounds the Go runtime's own memory to what the limit, less
// the other processes and the reservation outside the heap (reserved less
// onHeap), leaves it now (debug.SetMemoryLimit), as ProcessBudget does at
// the start; the trainer calls it after each re-plan.
func (b *LiveBudget) BoundRuntime(reserved, onHeap int64) {
	b.mu.Lock()
	bound := b.limit - b.other - (reserved - onHeap)
	b.mu.Unlock()
	if bound > 0 {
		debug.SetMemoryLimit(bound)
	}
}

// Close closes the container's files.
func (b *LiveBudget) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != nil {
		b.w.Close()
		b.w = nil
		if b.err == nil {
			b.err = errors.New("train: the live budget is closed")
		}
	}
}
