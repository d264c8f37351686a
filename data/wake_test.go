package data

import (
	"context"
	"errors"
	"testing"
	"time"
)

// stuck is a stage that produces nothing until its context ends.
func stuck(ctx context.Context, x int) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestWaitEndsWithTheCallersContext waits for an element of a stage that
// will never have one (a parallel map whose function waits for its
// context; a prefetch queue whose producer waits the same way) under a
// context of the caller's, and cancels only that context, as a
// prefetch's close does to its producer. The wait must end on it. When a
// pass ends, its stages' contexts and the callers' end one after another,
// and a stage's wake may come between them: with only the stage's own
// context waking it, the caller waited for an element that never came
// (a hang seen once in the race tests).
func TestWaitEndsWithTheCallersContext(t *testing.T) {
	cases := []struct {
		name string
		ds   Dataset[int]
	}{
		// (A map of one worker runs its function in the caller's
		// goroutine, under the pass's context: nothing waits there.)
		{"an ordered map of two workers", Map(FromSlice([]int{1, 2, 3}), "stuck", stuck, Parallel(2))},
		{"an unordered map", Map(FromSlice([]int{1, 2, 3}), "stuck", stuck, Parallel(2), Unordered())},
		{"an autotuned map", Map(FromSlice([]int{1, 2, 3}), "stuck", stuck, Parallel(Autotune))},
		{"a prefetch queue", Generate("stuck", func() func(context.Context) (int, error) {
			return func(ctx context.Context) (int, error) { return stuck(ctx, 0) }
		}).Prefetch(1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			it, err := c.ds.Iter(context.Background(), Config{Budget: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			for round := range 2 { // the second round waits under a new context
				ctx, cancel := context.WithCancel(context.Background())
				got := make(chan error, 1)
				go func() {
					_, err := it.top.next(ctx)
					got <- err
				}()
				time.Sleep(20 * time.Millisecond) // let it reach its wait
				cancel()
				select {
				case err := <-got:
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("round %d: next returned %v, want context.Canceled", round, err)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("round %d: next still waits after its context ended", round)
				}
			}
		})
	}
}
