package dist

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/headroom-ml/headroom/tensor"
)

// Comm is a communicator over a fixed set of processes (ranks). Every
// collective must be called by every rank, in the same order, with matching
// sizes; it returns an error only for invalid arguments (checked before any
// communication, so every rank fails alike) or a closed Comm. A job-level
// failure (a lost, frozen or hung rank) aborts the job instead (see the
// package comment). Methods may be called from several goroutines; the
// caller orders the collectives.
type Comm interface {
	// Rank returns this process's number, 0 <= Rank < Size.
	Rank() int
	// Size returns the number of processes.
	Size() int
	// AllReduceSum sums buf (float32 or float64 elements, per dtype) over
	// all ranks, in place. Blocking.
	AllReduceSum(buf []byte, dtype tensor.DType) error
	// Start begins a non-blocking all-reduce (sum) of buf in place and
	// returns a handle; Wait completes it. buf must not be touched in
	// between. (MPI_Iallreduce + MPI_Wait.)
	Start(buf []byte, dtype tensor.DType) (Request, error)
	// ReduceScatterSum sums send over all ranks and leaves block r of the
	// sum in rank r's recv. send: Size()*len(recv) bytes.
	ReduceScatterSum(send, recv []byte, dtype tensor.DType) error
	// AllGather concatenates every rank's send into recv: recv is
	// Size()*len(send) bytes, block r from rank r.
	AllGather(send, recv []byte) error
	// StartReduceScatter begins a non-blocking ReduceScatterSum and
	// returns a handle; Wait completes it. Neither buffer may be touched in
	// between. (MPI_Ireduce_scatter_block + MPI_Wait.)
	StartReduceScatter(send, recv []byte, dtype tensor.DType) (Request, error)
	// StartAllGather begins a non-blocking AllGather and returns a handle;
	// Wait completes it. Neither buffer may be touched in between.
	// (MPI_Iallgather + MPI_Wait.)
	StartAllGather(send, recv []byte) (Request, error)
	// Broadcast copies root's buf into every other rank's buf.
	Broadcast(buf []byte, root int) error
	// Barrier returns once every rank has called it.
	Barrier() error
	// Close completes outstanding requests, meets the other ranks in a
	// final barrier and shuts the communicator down (MPI_Finalize). Every
	// rank must call it once, at the end; later calls return ErrClosed.
	Close() error
}

// Request is a started non-blocking collective. Wait blocks until it has
// completed and must be called exactly once.
type Request = interface{ Wait() error }

// DefaultTimeout is the Timeout of a zero Options.
const DefaultTimeout = 60 * time.Second

// Options configure Open.
type Options struct {
	// Timeout bounds every collective, counted from when this rank enters
	// it (0 means DefaultTimeout). A collective that does not complete in
	// time fails with a *TimeoutError naming the rank(s) that did not
	// arrive, where it can tell, and the job is aborted.
	Timeout time.Duration
}

func (o Options) timeout() (time.Duration, error) {
	switch {
	case o.Timeout < 0:
		return 0, fmt.Errorf("dist: Options.Timeout %v is negative", o.Timeout)
	case o.Timeout == 0:
		return DefaultTimeout, nil
	}
	return o.Timeout, nil
}

// ErrClosed is returned by a collective on a closed Comm.
var ErrClosed = errors.New("dist: communicator is closed")

// TimeoutError is a collective that did not complete within
// Options.Timeout. The MPI communicator prints it and aborts the job.
type TimeoutError struct {
	Rank    int           // the rank that timed out
	Op      string        // the collective, e.g. "AllReduceSum"
	Seq     int64         // its number on this communicator, from 1
	Timeout time.Duration // Options.Timeout
	Peers   []PeerState   // what every other rank answered, in rank order
}

// PeerState is one rank's answer to "which collective did you last enter?"
// when another rank timed out.
type PeerState struct {
	Rank     int
	Answered bool   // false: no answer within the grace period (dead, frozen or gone)
	Entered  int64  // number of collectives it had entered
	Last     string // the collective it entered last (number Entered), "" if none
	Op       string // the collective it entered as the timed-out number, "" if not entered (or forgotten)
}

// arrived reports whether the peer had entered collective number seq.
func (p PeerState) arrived(seq int64) bool { return p.Answered && p.Entered >= seq }

// Missing returns the ranks that did not arrive at the collective: those
// that did not answer or had not entered it yet.
func (e *TimeoutError) Missing() []int {
	var m []int
	for _, p := range e.Peers {
		if !p.arrived(e.Seq) {
			m = append(m, p.Rank)
		}
	}
	return m
}

// Error reads, for example: "dist: rank 0: AllReduceSum #21 did not
// complete in 5s; rank(s) 1 did not arrive (rank 1 last entered
// AllReduceSum #20)".
func (e *TimeoutError) Error() string {
	s := fmt.Sprintf("dist: rank %d: %s #%d did not complete in %v", e.Rank, e.Op, e.Seq, e.Timeout)
	if missing := e.Missing(); len(missing) > 0 {
		var why []string
		for _, p := range e.Peers {
			switch {
			case p.arrived(e.Seq):
			case !p.Answered:
				why = append(why, fmt.Sprintf("rank %d did not answer: dead, frozen or exited", p.Rank))
			case p.Entered == 0:
				why = append(why, fmt.Sprintf("rank %d has entered no collective", p.Rank))
			default:
				last := p.Last
				if last == "" {
					last = "collective"
				}
				why = append(why, fmt.Sprintf("rank %d last entered %s #%d", p.Rank, last, p.Entered))
			}
		}
		return s + "; rank(s) " + joinInts(missing) + " did not arrive (" + strings.Join(why, "; ") + ")"
	}
	var mismatched []string
	for _, p := range e.Peers {
		if p.Op != "" && p.Op != e.Op {
			mismatched = append(mismatched, fmt.Sprintf("rank %d entered %s", p.Rank, p.Op))
		}
	}
	if len(mismatched) > 0 {
		return s + fmt.Sprintf("; every rank arrived at #%d but the ranks called different collectives (%s)",
			e.Seq, strings.Join(mismatched, "; "))
	}
	if len(e.Peers) == 0 {
		return s
	}
	return s + "; every rank arrived at it (it is stalled inside MPI)"
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// reduceElems checks a reduction buffer and returns its element count.
func reduceElems(op string, buf []byte, dtype tensor.DType) (int, error) {
	if dtype != tensor.Float32 && dtype != tensor.Float64 {
		return 0, fmt.Errorf("dist: %s: dtype %v: want float32 or float64", op, dtype)
	}
	if len(buf)%dtype.Size() != 0 {
		return 0, fmt.Errorf("dist: %s: buffer of %d bytes is not a whole number of %v elements", op, len(buf), dtype)
	}
	return len(buf) / dtype.Size(), nil
}

// layout is how the small buffer of ReduceScatterSum or AllGather sits
// relative to the large one.
type layout int

const (
	disjoint layout = iota // no shared byte
	inPlace                // small == large[rank*n:(rank+1)*n]
)

// blockLayout checks that large is size blocks of len(small) bytes and
// that small either shares no byte with large or is exactly block rank.
func blockLayout(op string, large, small []byte, size, rank int) (layout, error) {
	if len(large) != size*len(small) {
		return 0, fmt.Errorf("dist: %s: large buffer of %d bytes, small of %d: want %d ranks x %d = %d bytes",
			op, len(large), len(small), size, len(small), size*len(small))
	}
	if len(small) == 0 {
		return disjoint, nil
	}
	l0 := uintptr(unsafe.Pointer(unsafe.SliceData(large)))
	s0 := uintptr(unsafe.Pointer(unsafe.SliceData(small)))
	if s0+uintptr(len(small)) <= l0 || l0+uintptr(len(large)) <= s0 {
		return disjoint, nil
	}
	if s0 == l0+uintptr(rank*len(small)) {
		return inPlace, nil
	}
	return 0, fmt.Errorf("dist: %s: buffers overlap: the small one must be this rank's block %d of the large one (offset %d bytes) or separate, got offset %d",
		op, rank, rank*len(small), int64(s0)-int64(l0))
}

func checkRoot(root, size int) error {
	if root < 0 || root >= size {
		return fmt.Errorf("dist: Broadcast: root %d: want 0 <= root < %d", root, size)
	}
	return nil
}

// maxCount is the largest count one MPI call takes (a C int), and
// chunkCount what an all-reduce or broadcast sends per MPI call: larger
// buffers are split into several calls that complete together.
const (
	maxCount   = 1<<31 - 1
	chunkCount = 1 << 30
)

// chunk returns the [lo, hi) range of chunk i when n items are sent at most
// max per call, and the number of chunks (at least 1, so that an empty
// buffer is still one collective).
func chunk(n, max, i int) (lo, hi, chunks int) {
	chunks = (n + max - 1) / max
	if chunks == 0 {
		chunks = 1
	}
	lo = i * max
	hi = min(lo+max, n)
	return lo, hi, chunks
}

// blockCount checks that one block of a ReduceScatterSum or AllGather fits
// an MPI count.
func blockCount(op string, n int, unit string) error {
	if n > maxCount {
		return fmt.Errorf("dist: %s: %d %s per rank exceeds MPI's count limit of %d; split the call", op, n, unit, maxCount)
	}
	return nil
}
