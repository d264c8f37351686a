// Command testprog exercises package dist across processes. dist's tests
// build it with -tags mpi and launch it under mpirun; it can also be run by
// hand:
//
//	go build -tags mpi -o /tmp/testprog ./dist/internal/testprog
//	mpirun --oversubscribe -np 3 /tmp/testprog                      # every collective against local expectations
//	mpirun --oversubscribe -np 2 /tmp/testprog -mode fail -how hang -timeout 5s
//	mpirun -np 2 /tmp/testprog -mode bench                          # all-reduce time per size
//
// Modes:
//   - check: every collective against values computed locally, argument
//     errors, zero allocations per steady-state collective, Close. Each rank
//     prints "testprog: rank R of N: ok (K checks)" and exits 0, or prints
//     the first mismatch ("got X, want Y") and exits 1.
//   - fail: every rank all-reduces in a loop; at iteration -at, rank
//     -victim prints "testprog: rank R: failing (HOW) at MS" (Unix
//     milliseconds) and fails: kill (SIGKILL), exit (os.Exit(3)), hang (sleeps
//     in its own code, its communicator still answering), stop (SIGSTOP: the
//     whole process frozen), mismatch (calls Broadcast where the others
//     call AllReduceSum). The others must be ended within -timeout.
//   - bench: rank 0 prints the time of a blocking AllReduceSum per size.
//   - overlap: rank 0 prints how much of a Start'ed all-reduce hides behind
//     computation on the calling goroutine (the medians of 9 rounds of
//     compute alone, the all-reduce alone, and Start + compute + Wait).
//
// Open's error (a binary built without -tags mpi under mpirun) exits 2.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/headroom-ml/headroom/dist"
	"github.com/headroom-ml/headroom/tensor"
)

func main() {
	mode := flag.String("mode", "check", "check | fail | bench | overlap")
	timeout := flag.Duration("timeout", 0, "dist.Options.Timeout (0: dist.DefaultTimeout)")
	victim := flag.Int("victim", 1, "fail: the rank that fails")
	how := flag.String("how", "kill", "fail: kill | exit | hang | stop | mismatch")
	at := flag.Int("at", 20, "fail: the iteration at which the victim fails")
	flag.Parse()

	c, err := dist.Open(dist.Options{Timeout: *timeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprog:", err)
		os.Exit(2)
	}
	switch *mode {
	case "check":
		k := &checker{c: c, rank: c.Rank(), size: c.Size()}
		k.run()
		fmt.Printf("testprog: rank %d of %d: ok (%d checks)\n", k.rank, k.size, k.checks)
	case "fail":
		fail(c, *victim, *at, *how)
	case "bench", "overlap":
		if *mode == "bench" {
			bench(c)
		} else {
			overlap(c)
		}
		if err := c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "testprog:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "testprog: unknown -mode %q\n", *mode)
		os.Exit(2)
	}
}

// fail all-reduces until the victim fails and the job is ended around the
// survivors. A survivor that is still running after 100,000 iterations
// (minutes) reports that the failure went unnoticed.
func fail(c dist.Comm, victim, at int, how string) {
	buf := make([]byte, 16*4)
	for i := range 100000 {
		if c.Rank() == victim && i == at {
			fmt.Printf("testprog: rank %d: failing (%s) at %d\n", victim, how, time.Now().UnixMilli())
			switch how {
			case "kill":
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			case "exit":
				os.Exit(3)
			case "hang":
				time.Sleep(time.Hour)
			case "stop":
				_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			case "mismatch":
				if err := c.Broadcast(buf, 0); err != nil {
					fmt.Fprintln(os.Stderr, "testprog:", err)
					os.Exit(1)
				}
			default:
				fmt.Fprintf(os.Stderr, "testprog: unknown -how %q\n", how)
				os.Exit(2)
			}
		}
		if err := c.AllReduceSum(buf, tensor.Float32); err != nil {
			fmt.Fprintln(os.Stderr, "testprog:", err)
			os.Exit(1)
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "testprog: rank %d: still running after 100000 all-reduces: the failure went unnoticed\n", c.Rank())
	os.Exit(4)
}

func bench(c dist.Comm) {
	for size := 1 << 10; size <= 1<<24; size <<= 2 {
		buf := make([]byte, size)
		n := min(2000, max(4, (1<<26)/size))
		start := time.Now()
		for range n {
			if err := c.AllReduceSum(buf, tensor.Float32); err != nil {
				fmt.Fprintln(os.Stderr, "testprog:", err)
				os.Exit(1)
			}
		}
		per := time.Since(start) / time.Duration(n)
		if c.Rank() == 0 {
			fmt.Printf("bench: AllReduceSum %9d bytes on %d ranks: %10v per call, %7.3f GB/s\n",
				size, c.Size(), per, float64(size)/per.Seconds()/1e9)
		}
	}
}

// overlap times, per all-reduce size, in 9 interleaved rounds: compute
// alone (about 20 ms of multiply-adds), the blocking all-reduce alone, and
// Start, compute, Wait; it prints the medians and hidden = (compute +
// all-reduce - both) / all-reduce.
func overlap(c dist.Comm) {
	work := make([]float32, 1<<16)
	for i := range work {
		work[i] = float32(i%7) * 0.5
	}
	compute := func(reps int) float32 {
		var s float32
		for range reps {
			for i, w := range work {
				s += w * work[len(work)-1-i]
			}
		}
		return s
	}
	reps := 1
	for start := time.Now(); compute(reps) >= 0 && time.Since(start) < 20*time.Millisecond; start = time.Now() {
		reps *= 2
	}
	must := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "testprog:", err)
			os.Exit(1)
		}
	}
	// timed runs f after a barrier and returns how long it took.
	timed := func(f func()) time.Duration {
		must(c.Barrier())
		start := time.Now()
		f()
		return time.Since(start)
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	for _, size := range []int{1 << 18, 1 << 22} {
		buf := make([]byte, size)
		var dc, da, db []time.Duration
		for range 9 { // interleaved, so that a noisy neighbour hits all three alike
			dc = append(dc, timed(func() { compute(reps) }))
			da = append(da, timed(func() { must(c.AllReduceSum(buf, tensor.Float32)) }))
			db = append(db, timed(func() {
				req, err := c.Start(buf, tensor.Float32)
				must(err)
				compute(reps)
				must(req.Wait())
			}))
		}
		tc, ta, tb := median(dc), median(da), median(db)
		if c.Rank() == 0 {
			fmt.Printf("overlap: %8d bytes on %d ranks: compute %v, all-reduce %v, both %v: %.0f%% of the all-reduce hidden\n",
				size, c.Size(), tc.Round(time.Microsecond), ta.Round(time.Microsecond), tb.Round(time.Microsecond),
				100*float64(tc+ta-tb)/float64(ta))
		}
	}
}
