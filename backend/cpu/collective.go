package cpu

import (
	"time"

	"github.com/headroom-ml/headroom/graph"
)

// The collectives (graph/gradops.go) on the host: each goes through the
// bound instruction's Comm; with a single process (no Comm) a sum is its
// input and a gather a copy.
func init() {
	register(graph.OpAllReduce, kernel{bind: floats(fromBound(allReduce), fromBound(allReduce))})
	register(graph.OpReduceScatter, kernel{bind: every(fromBound(reduceScatter))})
	register(graph.OpAllGather, kernel{bind: every(fromBound(allGather))})
	register(graph.OpAllReduceStart, kernel{bind: floats(fromBound(allReduceStart), fromBound(allReduceStart))})
	register(graph.OpAllReduceWait, kernel{bind: floats(fromBound(collectiveWait), fromBound(collectiveWait))})
	register(graph.OpReduceScatterStart, kernel{bind: floats(fromBound(reduceScatterStart), fromBound(reduceScatterStart))})
	register(graph.OpReduceScatterWait, kernel{bind: floats(fromBound(collectiveWait), fromBound(collectiveWait))})
	register(graph.OpAllGatherStart, kernel{bind: every(fromBound(allGatherStart))})
	register(graph.OpAllGatherWait, kernel{bind: every(fromBound(collectiveWait))})
}

// allReduce sums its input over every process into its output.
func allReduce(b *Bound) error {
	if len(b.out) > 0 && &b.out[0] != &b.in[0][0] {
		copy(b.out, b.in[0])
	}
	if b.Comm == nil || b.Comm.Size() == 1 {
		return nil
	}
	if err := b.Comm.AllReduceSum(b.out, b.DType); err != nil {
		return b.failed(err, "all-reduce over %d processes", b.Comm.Size())
	}
	return nil
}

func reduceScatter(b *Bound) error {
	if b.Comm == nil || b.Comm.Size() == 1 {
		copy(b.out, b.in[0])
		return nil
	}
	if err := b.Comm.ReduceScatterSum(b.in[0], b.out, b.DType); err != nil {
		return b.failed(err, "%s over %d processes", b.Op, b.Comm.Size())
	}
	return nil
}

func allGather(b *Bound) error {
	if b.Comm == nil || b.Comm.Size() == 1 {
		copy(b.out, b.in[0])
		return nil
	}
	if err := b.Comm.AllGather(b.in[0], b.out); err != nil {
		return b.failed(err, "%s over %d processes", b.Op, b.Comm.Size())
	}
	return nil
}

// allReduceStart starts summing its input, copied into its output, over
// every process; allReduceWait (linked to it) completes the sum.
func allReduceStart(b *Bound) error {
	if len(b.out) > 0 && &b.out[0] != &b.in[0][0] {
		copy(b.out, b.in[0])
	}
	if b.Comm == nil || b.Comm.Size() == 1 {
		return nil
	}
	if b.req != nil {
		return b.fail("the previous all-reduce of this buffer is still in flight")
	}
	req, err := b.Comm.Start(b.out, b.DType)
	if err != nil {
		return b.failed(err, "starting the all-reduce over %d processes", b.Comm.Size())
	}
	b.req = req
	return nil
}

// reduceScatterStart starts the reduce-scatter of its input into its
// output (this process's block); collectiveWait completes it. With one
// process the block is the input.
func reduceScatterStart(b *Bound) error {
	if b.Comm == nil || b.Comm.Size() == 1 {
		copy(b.out, b.in[0])
		return nil
	}
	if b.req != nil {
		return b.fail("the previous reduce-scatter into this buffer is still in flight")
	}
	req, err := b.Comm.StartReduceScatter(b.in[0], b.out, b.DType)
	if err != nil {
		return b.failed(err, "starting the reduce-scatter over %d processes", b.Comm.Size())
	}
	b.req = req
	return nil
}

// allGatherStart starts the all-gather of its input into its output;
// collectiveWait completes it.
func allGatherStart(b *Bound) error {
	if b.Comm == nil || b.Comm.Size() == 1 {
		copy(b.out, b.in[0])
		return nil
	}
	if b.req != nil {
		return b.fail("the previous all-gather into this buffer is still in flight")
	}
	req, err := b.Comm.StartAllGather(b.in[0], b.out)
	if err != nil {
		return b.failed(err, "starting the all-gather over %d processes", b.Comm.Size())
	}
	b.req = req
	return nil
}

// collectiveWait completes the collective its start (linked to it) began.
func collectiveWait(b *Bound) error {
	s := b.start
	if s == nil {
		return b.fail("not linked to its start (link)")
	}
	if s.req == nil {
		return nil // one process: the start copied
	}
	r := s.req
	s.req = nil
	t0 := time.Now()
	var err error
	if tw, ok := r.(tookWaiter); ok {
		var took time.Duration
		took, err = tw.WaitTook()
		b.took += took
	} else {
		err = r.Wait()
	}
	b.waited += time.Since(t0)
	if err != nil {
		return b.failed(err, "%s over %d processes", s.Op, b.Comm.Size())
	}
	return nil
}

// tookWaiter is a Request that reports how long its collective took
// (dist's MPI requests do).
type tookWaiter interface {
	WaitTook() (time.Duration, error)
}

// allReduceTimes sums, over the wait instructions of bound and every run
// so far, how long their collectives (bucket all-reduces, ZeRO's
// reduce-scatters and prefetched gathers) took from start to completion
// (where the communicator reports it) and how long the step waited for
// them: the difference is the time they were hidden behind computation.
func allReduceTimes(bound []Bound) (took, waited time.Duration) {
	for i := range bound {
		took += bound[i].took
		waited += bound[i].waited
	}
	return took, waited
}

// link connects every wait of bound (a program's instructions, in order)
// to its start.
func link(bound []Bound) {
	for i := range bound {
		if c := bound[i].Collective; c != nil && bound[i].Op.WaitsFor() != graph.OpInvalid {
			bound[i].start = &bound[c.Start]
		}
	}
}

// abandon completes every all-reduce still in flight in bound, after a step
// failed between a start and its wait: the processes stay in step and no
// buffer is written behind the caller's back. It returns the first error.
func abandon(bound []Bound) error {
	var first error
	for i := range bound {
		if r := bound[i].req; r != nil {
			bound[i].req = nil
			if err := r.Wait(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
