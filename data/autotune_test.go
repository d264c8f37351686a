package data

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/headroom-ml/headroom/tensor"
)

// spin busies the consumer for d (a training step), without sleeping, so
// that its pace does not depend on timer resolution.
func spin(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// sleepMap is a Map function taking 1 ms per element whose output holds
// bytes of pipeline memory.
func sleepMap(bytes int) func(ctx context.Context, x int) (Sample, error) {
	return func(ctx context.Context, x int) (Sample, error) {
		time.Sleep(time.Millisecond)
		t, b, err := NewTensor(ctx, tensor.Uint8, tensor.Shape{bytes})
		if err != nil {
			return Sample{}, err
		}
		s := NewSample(t, tensor.Tensor{}, b)
		b.Release()
		return s, nil
	}
}

type window struct {
	wait, wall time.Duration
}

// consume reads n elements spending step on each, and returns the stats and
// the consumer's wait over the last quarter of the pass.
func consume(t *testing.T, ds Dataset[Sample], cfg Config, n int, step time.Duration) (Stats, window, int64) {
	t.Helper()
	it, err := ds.Iter(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var mark Stats
	for i := 0; ; i++ {
		if i == n*3/4 {
			mark = it.Stats()
		}
		_, err := it.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		spin(step)
	}
	end := it.Stats()
	return end, window{end.ConsumerWait - mark.ConsumerWait, end.Wall - mark.Wall}, it.Ledger().Peak()
}

func mapStats(s Stats) StageStats {
	for _, st := range s.Stages {
		if strings.HasPrefix(st.Name, "map(") {
			return st
		}
	}
	return StageStats{}
}

// TestAutotuneRaisesMapParallelism: a Map of 1 ms per element feeding a
// consumer that needs 250 µs per element must reach about four workers,
// after which the consumer no longer waits.
func TestAutotuneRaisesMapParallelism(t *testing.T) {
	const n = 1200
	ds := Map(FromSlice(ints(n)), "sleep", sleepMap(64), Parallel(Autotune))
	stats, last, peak := consume(t, ds, Config{Budget: 1 << 20}, n, 250*time.Microsecond)
	m := mapStats(stats)
	t.Logf("map: parallelism %d (max %d); consumer waited %v of the last %v\n%v", m.Parallelism, m.MaxParallelism, last.wait, last.wall, stats)
	if m.MaxParallelism < 4 {
		t.Errorf("got at most %d workers, want >= 4 (1 ms per element, 250 µs per step)", m.MaxParallelism)
	}
	if frac := last.wait.Seconds() / last.wall.Seconds(); frac > 0.25 {
		t.Errorf("consumer waited %.0f%% of the last quarter, want < 25%%", 100*frac)
	}
	if peak > 1<<20 {
		t.Errorf("ledger peak %d exceeds the 1 MiB budget", peak)
	}
}

// TestAutotuneStaysWithinBudget: the same Map with 128 KiB outputs under a
// 1 MiB budget cannot afford the workers it would like; Autotune stops
// where the budget does and the ledger never passes it.
func TestAutotuneStaysWithinBudget(t *testing.T) {
	const n, size, budget = 300, 128 << 10, 1 << 20
	ds := Map(FromSlice(ints(n)), "sleep", sleepMap(size), Parallel(Autotune))
	stats, _, peak := consume(t, ds, Config{Budget: budget}, n, 250*time.Microsecond)
	m := mapStats(stats)
	t.Logf("map: parallelism %d (max %d), ledger peak %d", m.Parallelism, m.MaxParallelism, peak)
	if peak > budget {
		t.Errorf("ledger peak %d exceeds the budget %d", peak, budget)
	}
	// each worker keeps two elements in flight: the budget holds 8 elements
	if m.MaxParallelism > budget/size/2 {
		t.Errorf("got %d workers, want at most %d: the budget holds %d outputs", m.MaxParallelism, budget/size/2, budget/size)
	}
	if m.Elements != n {
		t.Errorf("got %d elements, want %d", m.Elements, n)
	}
}

func TestBottleneckSummary(t *testing.T) {
	slow := Map(FromSlice(ints(60)), "slow", func(ctx context.Context, x int) (Sample, error) {
		time.Sleep(2 * time.Millisecond)
		return Sample{}, nil
	})
	ds := slow.Prefetch(2)
	it, err := ds.Iter(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for {
		if _, err := it.Next(); err != nil {
			break
		}
	}
	s := it.Stats()
	name, share := s.Bottleneck()
	if name != "map(slow)" || share < 0.8 {
		t.Errorf("got bottleneck %s with %.2f of the wait, want map(slow) with most of it\n%v", name, share, s)
	}
	if sum := s.Summary(); !strings.HasPrefix(sum, "map(slow) is the bottleneck: ") || !strings.Contains(sum, "% of consumer wait") {
		t.Errorf("got summary %q", sum)
	}
	var src StageStats
	for _, st := range s.Stages {
		if st.Kind == "source" {
			src = st
		}
	}
	if src.Elements != 60 || src.Name != "slice(60)" {
		t.Errorf("got source stats %+v, want 60 elements from slice(60)", src)
	}
}
