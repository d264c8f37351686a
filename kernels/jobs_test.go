package kernels_test

import (
	"sync/atomic"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// parallelCounts counts the calls of each part.
type parallelCounts struct {
	calls  [100]atomic.Int32
	nested bool
}

func countPart(arg any, p int) {
	c := arg.(*parallelCounts)
	c.calls[p].Add(1)
	if c.nested && p == 0 {
		// a call from inside a part runs on this goroutine, not on the busy pool
		inner := &parallelCounts{}
		kernels.Parallel(3, countPart, inner)
		for i := 0; i < 3; i++ {
			if inner.calls[i].Load() != 1 {
				panic("nested Parallel skipped a part")
			}
		}
	}
}

// TestParallel checks that Parallel calls every part exactly once on one to
// three threads, that a nested call completes, and that it allocates
// nothing.
func TestParallel(t *testing.T) {
	old := kernels.Threads()
	defer kernels.SetThreads(old)
	for _, threads := range []int{1, 2, 3} {
		kernels.SetThreads(threads)
		for _, parts := range []int{0, 1, 2, 7, 100} {
			for _, nested := range []bool{false, true} {
				c := &parallelCounts{nested: nested}
				kernels.Parallel(parts, countPart, c)
				for p := 0; p < len(c.calls); p++ {
					want := int32(0)
					if p < parts {
						want = 1
					}
					if got := c.calls[p].Load(); got != want {
						t.Fatalf("%d threads, %d parts, nested %v: part %d ran %d times, want %d", threads, parts, nested, p, got, want)
					}
				}
			}
		}
		c := &parallelCounts{}
		if a := testing.AllocsPerRun(20, func() { kernels.Parallel(4, countPart, c) }); a != 0 {
			t.Errorf("AllocsPerRun(Parallel) on %d threads = %v, want 0", threads, a)
		}
	}
}
