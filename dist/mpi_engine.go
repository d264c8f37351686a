//go:build mpi && linux

package dist

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/headroom-ml/headroom/tensor"
)

// opKind is what a collective is; ranks exchange it as a number when one
// of them times out, so the values are fixed.
type opKind uint8

const (
	opNone opKind = iota
	opAllReduce
	opReduceScatter
	opAllGather
	opBroadcast
	opBarrier
	opClose
)

var opNames = [...]string{"", "AllReduceSum", "ReduceScatterSum", "AllGather", "Broadcast", "Barrier", "Close"}

func (k opKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("collective(%d)", k)
}

const (
	historyLen    = 256                   // collectives whose kind a rank remembers
	tagQuery      = 1                     // "which collective did you last enter?": [asked seq]
	tagAnswer     = 2                     // the answer: answerWords words
	answerWords   = 4                     // asked seq, entered, kind of the last entered, kind of the asked
	pendingSpin   = 50 * time.Microsecond // while a collective is pending, poll without sleeping this long after activity,
	pendingMinCap = 20 * time.Microsecond // then sleep between polls, up to a cap between these two (see hr_progress)
	pendingMaxCap = time.Millisecond
	idleSleep     = 10 * time.Millisecond // longest sleep between polls while none is (answering queries)
	idleBudget    = time.Second           // longest stay in one progress call
	maxGrace      = 2 * time.Second       // longest time given to peers to answer a query
	abortGrace    = 10 * time.Second      // exit anyway if MPI_Abort has not ended the process by then
)

// slotKind is what one entry of the engine's request table is.
type slotKind uint8

const (
	slotColl       slotKind = iota // one MPI request of a collective op
	slotQuery                      // the standing receive of other ranks' queries
	slotAnswerSend                 // this rank's answer to peer
	slotAskSend                    // this rank's query to peer
	slotAnswerRecv                 // peer's answer to this rank's query
)

type slot struct {
	kind slotKind
	op   *op
	peer int
}

// engine owns MPI: it runs on one locked OS thread (see mpi.go), starts the
// collectives handed to it in order, drives them to completion, times them
// and answers other ranks' queries. Its state is touched by its goroutine
// only.
type engine struct {
	timeout, grace time.Duration
	submit         chan *op
	rank, size     int
	coll, ctl      cComm // duplicates of MPI_COMM_WORLD: collectives, control messages
	wakeR, wakeW   int   // the wake pipe

	// The request table: reqs[i] is described by slots[i]; indices and
	// statuses receive MPI_Testsome's output.
	reqs     []cRequest
	slots    []slot
	indices  []cIndex
	statuses []cStatus
	done     cIndex // how many completed

	pending   []*op     // started, not completed, in start order
	active    time.Time // when a collective last started or completed
	seq       int64     // collectives entered
	history   [historyLen]opKind
	closeDone bool // the final barrier of Close completed
	closing   *op

	// Control words live in C memory: MPI keeps them while a send or a
	// receive is outstanding.
	queryIn   []int64 // 1 word: the seq another rank asks about
	answers   []int64 // answerWords per peer: this rank's answer to it
	answering []bool  // an answer to peer is in flight
	askOut    []int64 // 1 word per peer: the seq this rank asks about
	asking    []bool  // a query to peer is in flight
	replies   []int64 // answerWords per peer: its answer
	answered  []bool  // peer answered the current question
	askSeq    int64   // the seq of the current question, 0 if none
}

// run initializes MPI on this goroutine's thread, reports the result on
// ready, and serves until Close. The thread stays locked: it exits with the
// goroutine.
func (e *engine) run(ready chan<- error) {
	runtime.LockOSThread()
	if err := e.init(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	e.loop()
}

func (e *engine) init() error {
	if err := mpiInit(); err != nil {
		return fmt.Errorf("dist: Open: %w", err)
	}
	var err error
	if e.coll, e.ctl, e.rank, e.size, err = mpiSetup(); err != nil {
		return fmt.Errorf("dist: Open: %w", err)
	}
	if e.wakeR, e.wakeW, err = wakePipe(); err != nil {
		return err
	}
	e.grace = min(e.timeout/5, maxGrace)
	for _, w := range []struct {
		p *[]int64
		n int
	}{{&e.queryIn, 1}, {&e.answers, answerWords * e.size}, {&e.askOut, e.size}, {&e.replies, answerWords * e.size}} {
		if *w.p, err = cmem(w.n); err != nil {
			return err
		}
	}
	e.answering, e.asking, e.answered = make([]bool, e.size), make([]bool, e.size), make([]bool, e.size)
	return e.postQuery()
}

// addSlot appends a table entry and returns the request for the MPI call
// that fills it (valid until the next addSlot).
func (e *engine) addSlot(s slot) *cRequest {
	e.reqs = append(e.reqs, mpiRequestNull())
	e.slots = append(e.slots, s)
	return &e.reqs[len(e.reqs)-1]
}

// dropLast forgets the last entry after its MPI call failed.
func (e *engine) dropLast() {
	e.reqs, e.slots = e.reqs[:len(e.reqs)-1], e.slots[:len(e.slots)-1]
}

func (e *engine) postQuery() error {
	if err := mpiIrecv(e.queryIn, -1, tagQuery, e.ctl, e.addSlot(slot{kind: slotQuery})); err != nil {
		e.dropLast()
		return fmt.Errorf("dist: rank %d: posting the watchdog's receive: %w", e.rank, err)
	}
	return nil
}

func (e *engine) loop() {
	for {
		e.accept()
		if e.closeDone && len(e.pending) == 0 {
			e.finalize()
			return
		}
		now := time.Now()
		budget, quiet, spin, minCap, maxCap := idleBudget, time.Duration(0), time.Duration(0), idleSleep, idleSleep
		if len(e.pending) > 0 {
			budget, quiet, spin, minCap, maxCap = e.untilWatch(now), now.Sub(e.active), pendingSpin, pendingMinCap, pendingMaxCap
		}
		n := len(e.reqs)
		if cap(e.indices) < n {
			e.indices, e.statuses = make([]cIndex, 2*n), make([]cStatus, 2*n)
		}
		e.indices, e.statuses = e.indices[:n], e.statuses[:n]
		done, err := mpiProgress(e.reqs, e.indices, e.statuses, &e.done, e.wakeR, budget, quiet, spin, minCap, maxCap)
		if err != nil {
			e.fatal(e.mpiFailure(err))
		}
		e.handle(done)
		e.watch(time.Now())
	}
}

// accept starts every op waiting in the submit channel, in order.
func (e *engine) accept() {
	for {
		select {
		case o := <-e.submit:
			e.start(o)
		default:
			return
		}
	}
}

func (e *engine) start(o *op) {
	e.seq++
	o.seq, o.start = e.seq, time.Now()
	e.active = o.start
	e.history[e.seq%historyLen] = o.kind
	e.pending = append(e.pending, o)
	var err error
	switch o.kind {
	case opAllReduce:
		t := mpiFloat32()
		if o.dtype == tensor.Float64 {
			t = mpiFloat64()
		}
		for i, k := 0, 1; i < k && err == nil; i++ {
			var lo, hi int
			lo, hi, k = chunk(o.n, chunkCount, i)
			o.nreq++
			err = mpiIallreduce(unsafe.Add(o.buf, lo*o.esize), hi-lo, t, e.coll, e.addSlot(slot{op: o}))
		}
	case opReduceScatter:
		t := mpiFloat32()
		if o.dtype == tensor.Float64 {
			t = mpiFloat64()
		}
		o.nreq++
		if o.inPlace { // the input is the whole send buffer; the sum lands in its first block (see finish)
			err = mpiIreduceScatterBlock(nil, o.buf, o.n, true, t, e.coll, e.addSlot(slot{op: o}))
		} else {
			err = mpiIreduceScatterBlock(o.buf, o.aux, o.n, false, t, e.coll, e.addSlot(slot{op: o}))
		}
	case opAllGather:
		o.nreq++
		err = mpiIallgather(o.buf, o.aux, o.n, o.inPlace, e.coll, e.addSlot(slot{op: o}))
	case opBroadcast:
		for i, k := 0, 1; i < k && err == nil; i++ {
			var lo, hi int
			lo, hi, k = chunk(o.n, chunkCount, i)
			o.nreq++
			err = mpiIbcast(unsafe.Add(o.buf, lo), hi-lo, o.root, e.coll, e.addSlot(slot{op: o}))
		}
	case opBarrier, opClose:
		o.nreq++
		err = mpiIbarrier(e.coll, e.addSlot(slot{op: o}))
		if o.kind == opClose {
			e.closing = o
		}
	}
	if err != nil {
		e.dropLast()
		e.fatal(fmt.Errorf("dist: rank %d: %v #%d: %w", e.rank, o.kind, o.seq, err))
	}
}

// handle processes the n requests MPI_Testsome reported complete and
// removes them from the table.
func (e *engine) handle(n int) {
	for k := range n {
		i := int(e.indices[k])
		s := e.slots[i]
		switch s.kind {
		case slotColl:
			if s.op.nreq--; s.op.nreq == 0 {
				e.finish(s.op)
			}
		case slotQuery:
			e.answer(statusSource(&e.statuses[k]), e.queryIn[0])
			if err := e.postQuery(); err != nil {
				e.fatal(err)
			}
		case slotAnswerSend:
			e.answering[s.peer] = false
		case slotAskSend:
			e.asking[s.peer] = false
		case slotAnswerRecv:
			if e.replies[s.peer*answerWords] == e.askSeq {
				e.answered[s.peer] = true
			} else { // the answer to an earlier question: wait for the current one
				e.askRecv(s.peer)
			}
		}
	}
	if n > 0 {
		e.compact()
	}
}

// compact removes the entries MPI has completed (set to MPI_REQUEST_NULL).
func (e *engine) compact() {
	null, j := mpiRequestNull(), 0
	for i := range e.reqs {
		if e.reqs[i] != null {
			e.reqs[j], e.slots[j] = e.reqs[i], e.slots[i]
			j++
		}
	}
	clear(e.slots[j:])
	e.reqs, e.slots = e.reqs[:j], e.slots[:j]
}

// finish completes op o: moves an in-place reduce-scatter's block into
// place and hands the op back to its waiter (Close waits for finalize).
func (e *engine) finish(o *op) {
	if o.kind == opReduceScatter && o.inPlace && e.rank > 0 && o.n > 0 {
		b := o.n * o.esize
		copy(unsafe.Slice((*byte)(unsafe.Add(o.buf, e.rank*b)), b), unsafe.Slice((*byte)(o.buf), b))
	}
	e.active = time.Now()
	o.took = e.active.Sub(o.start)
	i := slices.Index(e.pending, o)
	e.pending = slices.Delete(e.pending, i, i+1)
	if o.kind == opClose {
		e.closeDone = true
		return
	}
	o.pin.Unpin()
	o.done <- struct{}{}
}

// untilWatch is how long the oldest pending collective may wait before the
// watchdog's next step (asking the peers, then giving up).
func (e *engine) untilWatch(now time.Time) time.Duration {
	o := e.pending[0]
	at := o.start.Add(e.timeout)
	if e.askSeq != o.seq {
		at = at.Add(-e.grace)
	}
	return min(max(at.Sub(now), 0), idleBudget)
}

// watch asks the other ranks where they are once the oldest pending
// collective has waited Timeout minus the grace period, and aborts the job
// once it has waited Timeout.
func (e *engine) watch(now time.Time) {
	if len(e.pending) == 0 {
		return
	}
	o := e.pending[0]
	age := now.Sub(o.start)
	if age >= e.timeout-e.grace && e.askSeq != o.seq {
		e.ask(o.seq)
	}
	if age >= e.timeout {
		e.fatal(e.timeoutError(o))
	}
}

// ask sends every other rank the question "which collective did you last
// enter?" about collective seq and posts receives for the answers.
func (e *engine) ask(seq int64) {
	for i := range e.slots { // drop the answers still awaited to an earlier question
		if e.slots[i].kind == slotAnswerRecv {
			mpiCancel(&e.reqs[i], true)
		}
	}
	e.compact()
	e.askSeq = seq
	clear(e.answered)
	for p := range e.size {
		if p == e.rank {
			continue
		}
		e.askRecv(p)
		if e.asking[p] {
			continue
		}
		e.askOut[p] = seq
		if mpiIsend(e.askOut[p:p+1], p, tagQuery, e.ctl, e.addSlot(slot{kind: slotAskSend, peer: p})) != nil {
			e.dropLast() // p will count as not answering
			continue
		}
		e.asking[p] = true
	}
}

func (e *engine) askRecv(p int) {
	if mpiIrecv(e.replies[p*answerWords:(p+1)*answerWords], p, tagAnswer, e.ctl, e.addSlot(slot{kind: slotAnswerRecv, peer: p})) != nil {
		e.dropLast()
	}
}

// answer tells rank src how far this rank has got: it asked about
// collective asked.
func (e *engine) answer(src int, asked int64) {
	if src < 0 || src >= e.size || e.answering[src] {
		return // an answer to src is still in flight: it will do
	}
	a := e.answers[src*answerWords : (src+1)*answerWords]
	a[0], a[1], a[2], a[3] = asked, e.seq, int64(e.kindAt(e.seq)), int64(e.kindAt(asked))
	if mpiIsend(a, src, tagAnswer, e.ctl, e.addSlot(slot{kind: slotAnswerSend, peer: src})) != nil {
		e.dropLast()
		return
	}
	e.answering[src] = true
}

// kindAt is the kind of collective number seq on this rank, opNone if it
// has not entered it or no longer remembers.
func (e *engine) kindAt(seq int64) opKind {
	if seq < 1 || seq > e.seq || e.seq-seq >= historyLen {
		return opNone
	}
	return e.history[seq%historyLen]
}

func (e *engine) timeoutError(o *op) *TimeoutError {
	te := &TimeoutError{Rank: e.rank, Op: o.kind.String(), Seq: o.seq, Timeout: e.timeout}
	for p := range e.size {
		if p == e.rank {
			continue
		}
		ps := PeerState{Rank: p, Answered: e.answered[p]}
		if ps.Answered {
			r := e.replies[p*answerWords : (p+1)*answerWords]
			ps.Entered, ps.Last, ps.Op = r[1], opKind(r[2]).String(), opKind(r[3]).String()
		}
		te.Peers = append(te.Peers, ps)
	}
	return te
}

func (e *engine) mpiFailure(err error) error {
	if len(e.pending) == 0 {
		return fmt.Errorf("dist: rank %d: watchdog messages: %w", e.rank, err)
	}
	o := e.pending[0]
	return fmt.Errorf("dist: rank %d: %v #%d: %w", e.rank, o.kind, o.seq, err)
}

// fatal prints err and aborts the job: MPI_Abort makes the launcher end
// every rank. A collective that cannot complete leaves every rank's state
// undefined, so there is nothing to return to.
func (e *engine) fatal(err error) {
	_, _ = os.Stderr.WriteString(fmt.Sprintf("%v\ndist: rank %d: aborting the job (MPI_Abort)\n", err, e.rank))
	time.AfterFunc(abortGrace, func() { os.Exit(1) })
	mpiAbort(1)
	os.Exit(1)
}

// finalize frees the watchdog's requests, finalizes MPI and completes
// Close.
func (e *engine) finalize() {
	for i, s := range e.slots {
		mpiCancel(&e.reqs[i], s.kind == slotQuery || s.kind == slotAnswerRecv)
	}
	e.reqs, e.slots = e.reqs[:0], e.slots[:0]
	o := e.closing
	if err := mpiFinalize(e.coll, e.ctl); err != nil {
		o.err = fmt.Errorf("dist: rank %d: Close: %w", e.rank, err)
	}
	o.pin.Unpin()
	o.done <- struct{}{}
}
