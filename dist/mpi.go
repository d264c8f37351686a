//go:build mpi && linux

package dist

// Threading. Every MPI call of the process is made by one goroutine, the
// engine (mpi_engine.go), locked to its OS thread with runtime.LockOSThread
// for its whole life. That thread calls MPI_Init_thread(MPI_THREAD_FUNNELED),
// so it is MPI's main thread, and no other thread ever calls MPI. Callers
// hand operations to the engine through a channel and wake it through a
// pipe; a blocking collective is a Start followed by Wait.
//
// Why one dedicated thread rather than pinning each calling goroutine: Go
// moves goroutines between OS threads and the callers are several (the
// trainer, a backward pass starting bucket all-reduces); a non-blocking
// collective in Open MPI advances only while some thread calls into MPI, so
// a thread that owns all progress is what lets a bucket all-reduce overlap
// backward; and that thread can time every collective and answer other
// ranks' "which collective did you last enter?" even while this rank's own
// code is stuck. The engine never blocks inside MPI: it polls with
// MPI_Testsome, without sleeping for the first 50 µs after a collective
// starts or completes, then sleeping in ppoll between polls, backing off to
// 1 ms while a collective waits for a late rank and 10 ms when idle
// (hr_progress in mpi_cgo.go). A rank waiting for a peer costs about 2% of a
// core, where a blocking MPI_Wait in Open MPI spins one.
// The engine needs a Go P for the moment between two MPI calls: keep
// GOMAXPROCS above the number of goroutines that compute flat out, or its
// progress waits for their preemption.

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/headroom-ml/headroom/tensor"
)

// opened is set by the first Open that initializes MPI: MPI can be
// initialized once per process.
var opened atomic.Bool

// Open returns the job's communicator: MPI over MPI_COMM_WORLD when the
// environment shows a launcher (mpirun, srun, another PMI/PMIx launcher),
// else Single(). Every launched rank must call it, once, and Close at the
// end. It fails if MPI cannot be initialized or was already opened.
func Open(opts Options) (Comm, error) {
	timeout, err := opts.timeout()
	if err != nil {
		return nil, err
	}
	if l := detectLaunch(os.Getenv); !l.launched {
		return Single(), nil
	}
	if !opened.CompareAndSwap(false, true) {
		return nil, errors.New("dist: Open: MPI was already opened in this process (it can be initialized once)")
	}
	e := &engine{timeout: timeout, submit: make(chan *op, 256)}
	ready := make(chan error)
	go e.run(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	c := &comm{rank: e.rank, size: e.size, submit: e.submit, wakeFD: e.wakeW, wakeByte: [1]byte{1}}
	return c, nil
}

// comm is the MPI communicator: the callers' side of the engine.
type comm struct {
	rank, size int
	wakeFD     int
	wakeByte   [1]byte

	mu     sync.Mutex // orders sends on submit with closing
	closed bool
	submit chan<- *op

	freeMu sync.Mutex
	free   []*op // recycled ops: a steady-state collective allocates nothing
}

// op is one collective on its way through the engine; as a Request it is
// what Start returns.
type op struct {
	c       *comm
	kind    opKind
	buf     unsafe.Pointer // all-reduce and broadcast buffer; send of reduce-scatter and all-gather
	aux     unsafe.Pointer // recv of reduce-scatter and all-gather
	n       int            // elements (reductions) or bytes (others); per block for reduce-scatter and all-gather
	esize   int            // bytes per element (1 for bytes)
	dtype   tensor.DType   // of reductions
	root    int
	inPlace bool
	pin     runtime.Pinner // Go memory stays put while MPI holds it
	done    chan struct{}  // receives once the op completed (capacity 1)
	err     error

	// engine state
	seq   int64
	start time.Time
	took  time.Duration // from start to completion
	nreq  int           // MPI requests still outstanding
}

// Wait blocks until the collective has completed and recycles the op.
func (o *op) Wait() error {
	_, err := o.WaitTook()
	return err
}

// WaitTook is Wait that also returns how long the collective took, from
// the moment this rank's MPI thread started it to its completion.
func (o *op) WaitTook() (time.Duration, error) {
	<-o.done
	err, took := o.err, o.took
	o.c.recycle(o)
	return took, err
}

func (c *comm) Rank() int { return c.rank }
func (c *comm) Size() int { return c.size }

func (c *comm) get(kind opKind) *op {
	c.freeMu.Lock()
	var o *op
	if n := len(c.free); n > 0 {
		o = c.free[n-1]
		c.free = c.free[:n-1]
	}
	c.freeMu.Unlock()
	if o == nil {
		o = &op{c: c, done: make(chan struct{}, 1)}
	}
	// Field by field: the Pinner and the channel are reused.
	o.kind, o.n, o.esize, o.dtype, o.root, o.inPlace = kind, 0, 1, 0, 0, false
	o.seq, o.start, o.took, o.nreq = 0, time.Time{}, 0, 0
	return o
}

func (c *comm) recycle(o *op) {
	o.buf, o.aux, o.err = nil, nil, nil
	c.freeMu.Lock()
	c.free = append(c.free, o)
	c.freeMu.Unlock()
}

// post pins the op's buffers and hands it to the engine.
func (c *comm) post(o *op) error {
	if o.buf != nil {
		o.pin.Pin(o.buf)
	}
	if o.aux != nil {
		o.pin.Pin(o.aux)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		o.pin.Unpin()
		c.recycle(o)
		return ErrClosed
	}
	c.submit <- o
	c.mu.Unlock()
	c.wake()
	return nil
}

// wake interrupts the engine's sleep. A full pipe already holds a wake-up.
func (c *comm) wake() { _, _ = syscall.Write(c.wakeFD, c.wakeByte[:]) }

func (c *comm) do(o *op) error {
	if err := c.post(o); err != nil {
		return err
	}
	return o.Wait()
}

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

func (c *comm) reduceOp(name string, buf []byte, dtype tensor.DType) (*op, error) {
	n, err := reduceElems(name, buf, dtype)
	if err != nil {
		return nil, err
	}
	o := c.get(opAllReduce)
	o.buf, o.n, o.esize, o.dtype = ptr(buf), n, dtype.Size(), dtype
	return o, nil
}

func (c *comm) AllReduceSum(buf []byte, dtype tensor.DType) error {
	o, err := c.reduceOp("AllReduceSum", buf, dtype)
	if err != nil {
		return err
	}
	return c.do(o)
}

func (c *comm) Start(buf []byte, dtype tensor.DType) (Request, error) {
	o, err := c.reduceOp("Start", buf, dtype)
	if err != nil {
		return nil, err
	}
	if err := c.post(o); err != nil {
		return nil, err
	}
	return o, nil
}

func (c *comm) reduceScatterOp(name string, send, recv []byte, dtype tensor.DType) (*op, error) {
	if _, err := reduceElems(name, send, dtype); err != nil {
		return nil, err
	}
	l, err := blockLayout(name, send, recv, c.size, c.rank)
	if err != nil {
		return nil, err
	}
	n := len(recv) / dtype.Size()
	if err := blockCount(name, n, "elements"); err != nil {
		return nil, err
	}
	o := c.get(opReduceScatter)
	o.buf, o.aux, o.n, o.esize, o.dtype, o.inPlace = ptr(send), ptr(recv), n, dtype.Size(), dtype, l == inPlace
	return o, nil
}

func (c *comm) ReduceScatterSum(send, recv []byte, dtype tensor.DType) error {
	o, err := c.reduceScatterOp("ReduceScatterSum", send, recv, dtype)
	if err != nil {
		return err
	}
	return c.do(o)
}

func (c *comm) StartReduceScatter(send, recv []byte, dtype tensor.DType) (Request, error) {
	o, err := c.reduceScatterOp("StartReduceScatter", send, recv, dtype)
	if err != nil {
		return nil, err
	}
	if err := c.post(o); err != nil {
		return nil, err
	}
	return o, nil
}

func (c *comm) allGatherOp(name string, send, recv []byte) (*op, error) {
	l, err := blockLayout(name, recv, send, c.size, c.rank)
	if err != nil {
		return nil, err
	}
	if err := blockCount(name, len(send), "bytes"); err != nil {
		return nil, err
	}
	o := c.get(opAllGather)
	o.buf, o.aux, o.n, o.esize, o.inPlace = ptr(send), ptr(recv), len(send), 1, l == inPlace
	return o, nil
}

func (c *comm) AllGather(send, recv []byte) error {
	o, err := c.allGatherOp("AllGather", send, recv)
	if err != nil {
		return err
	}
	return c.do(o)
}

func (c *comm) StartAllGather(send, recv []byte) (Request, error) {
	o, err := c.allGatherOp("StartAllGather", send, recv)
	if err != nil {
		return nil, err
	}
	if err := c.post(o); err != nil {
		return nil, err
	}
	return o, nil
}

func (c *comm) Broadcast(buf []byte, root int) error {
	if err := checkRoot(root, c.size); err != nil {
		return err
	}
	o := c.get(opBroadcast)
	o.buf, o.n, o.esize, o.root = ptr(buf), len(buf), 1, root
	return c.do(o)
}

func (c *comm) Barrier() error { return c.do(c.get(opBarrier)) }

// Close waits for outstanding requests, meets every rank in a final
// barrier (timed like any collective) and finalizes MPI.
func (c *comm) Close() error {
	o := c.get(opClose)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.recycle(o)
		return ErrClosed
	}
	c.closed = true
	c.submit <- o
	c.mu.Unlock()
	c.wake()
	return o.Wait()
}
