//go:build mpi && linux

package dist

// This file is the whole of dist's C: small shims over the MPI C API and
// the progress loop. MPI_COMM_WORLD, MPI_FLOAT, MPI_IN_PLACE and the like are
// macros over implementation globals that cgo cannot use, so the shims name
// them in C. Every function here must be called on the engine's thread
// (mpi.go) except mpiWake.

/*
#cgo pkg-config: ompi-c
#cgo CFLAGS: -D_GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>

static MPI_Datatype hr_float(void) { return MPI_FLOAT; }
static MPI_Datatype hr_double(void) { return MPI_DOUBLE; }
static MPI_Request hr_request_null(void) { return MPI_REQUEST_NULL; }

// hr_init initializes MPI on the calling thread, which becomes the only one
// that calls MPI (MPI_THREAD_FUNNELED), and asks the kernel for fine timer
// slack on it so that the progress loop's short sleeps are short.
static int hr_init(int *provided) {
	int flag = 0;
	MPI_Initialized(&flag);
	if (flag) return -1;
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, provided);
	if (rc == MPI_SUCCESS && *provided < MPI_THREAD_FUNNELED) return -2;
	return rc;
}

// hr_setup makes two duplicates of MPI_COMM_WORLD, one for the collectives
// and one for the watchdog's control messages, which return errors instead
// of aborting.
static int hr_setup(MPI_Comm *coll, MPI_Comm *ctl, int *rank, int *size) {
	int rc;
	if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, coll)) != MPI_SUCCESS) return rc;
	if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, ctl)) != MPI_SUCCESS) return rc;
	if ((rc = MPI_Comm_set_errhandler(*coll, MPI_ERRORS_RETURN)) != MPI_SUCCESS) return rc;
	if ((rc = MPI_Comm_set_errhandler(*ctl, MPI_ERRORS_RETURN)) != MPI_SUCCESS) return rc;
	if ((rc = MPI_Comm_rank(*coll, rank)) != MPI_SUCCESS) return rc;
	return MPI_Comm_size(*coll, size);
}

static int hr_iallreduce(void *buf, int count, MPI_Datatype t, MPI_Comm c, MPI_Request *r) {
	return MPI_Iallreduce(MPI_IN_PLACE, buf, count, t, MPI_SUM, c, r);
}

// hr_ireduce_scatter_block: in place, the input is recv (size*count
// elements) and the result lands in recv's first count elements.
static int hr_ireduce_scatter_block(void *send, void *recv, int count, int in_place, MPI_Datatype t, MPI_Comm c, MPI_Request *r) {
	return MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : send, recv, count, t, MPI_SUM, c, r);
}

// hr_iallgather: in place, this rank's block is already in recv.
static int hr_iallgather(void *send, void *recv, int count, int in_place, MPI_Comm c, MPI_Request *r) {
	return MPI_Iallgather(in_place ? MPI_IN_PLACE : send, count, MPI_BYTE, recv, count, MPI_BYTE, c, r);
}

static int hr_ibcast(void *buf, int count, int root, MPI_Comm c, MPI_Request *r) {
	return MPI_Ibcast(buf, count, MPI_BYTE, root, c, r);
}

static int hr_ibarrier(MPI_Comm c, MPI_Request *r) { return MPI_Ibarrier(c, r); }

static int hr_isend(int64_t *buf, int n, int dest, int tag, MPI_Comm c, MPI_Request *r) {
	return MPI_Isend(buf, n, MPI_INT64_T, dest, tag, c, r);
}

// hr_irecv receives from src, or from any rank when src < 0.
static int hr_irecv(int64_t *buf, int n, int src, int tag, MPI_Comm c, MPI_Request *r) {
	return MPI_Irecv(buf, n, MPI_INT64_T, src < 0 ? MPI_ANY_SOURCE : src, tag, c, r);
}

// hr_cancel cancels a pending receive and frees it (MPI_Request_free on a
// send lets it finish on its own).
static void hr_cancel(MPI_Request *r, int recv) {
	if (recv) MPI_Cancel(r);
	MPI_Request_free(r);
}

static int hr_finalize(MPI_Comm *coll, MPI_Comm *ctl) {
	MPI_Comm_free(coll);
	MPI_Comm_free(ctl);
	return MPI_Finalize();
}

static void hr_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static void hr_error_string(int code, char *buf, int cap) {
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;
	if (MPI_Error_string(code, s, &n) != MPI_SUCCESS) n = snprintf(s, sizeof s, "MPI error %d", code);
	if (n >= cap) n = cap - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
}

static int hr_wake_pipe(int *fds) { return pipe2(fds, O_NONBLOCK | O_CLOEXEC); }

static int64_t hr_now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// hr_progress drives MPI's progress engine until one of the n requests
// completes (their indices in indices[0 .. *outcount)), the wake pipe is
// written to, or budget_ns passes. quiet_ns is the time since the engine's
// last activity (a collective started or completed) when called. Until
// spin_ns of quiet it polls without sleeping, so that a collective whose
// peers are ready completes without a trip through the scheduler; after
// that it sleeps in ppoll on the wake pipe between polls, from 1 µs doubling
// up to a cap of a sixteenth of the quiet time, held between min_cap_ns and
// max_cap_ns. A collective that waits long for a late rank thus costs a
// wake-up per max_cap_ns and at most a sixteenth more time, where a blocking
// MPI_Wait spins a core in Open MPI. Returns an MPI error code.
static int hr_progress(int n, MPI_Request *reqs, int *outcount, int *indices, MPI_Status *statuses, int wakefd,
                       int64_t budget_ns, int64_t quiet_ns, int64_t spin_ns, int64_t min_cap_ns, int64_t max_cap_ns) {
	int64_t t0 = hr_now(), sleep_ns = 1000;
	*outcount = 0;
	for (;;) {
		if (n > 0) {
			int rc = MPI_Testsome(n, reqs, outcount, indices, statuses);
			if (rc != MPI_SUCCESS) return rc;
			if (*outcount == MPI_UNDEFINED) *outcount = 0;
			if (*outcount > 0) return MPI_SUCCESS;
		}
		int64_t el = hr_now() - t0, left = budget_ns - el;
		if (left <= 0) return MPI_SUCCESS;
		if (quiet_ns + el < spin_ns) {
			struct pollfd p = { .fd = wakefd, .events = POLLIN };
			struct timespec zero = { 0, 0 };
			if (ppoll(&p, 1, &zero, NULL) > 0) {
				char buf[64];
				while (read(wakefd, buf, sizeof buf) > 0) {}
				return MPI_SUCCESS;
			}
			continue;
		}
		int64_t cap = (quiet_ns + el) / 16;
		cap = cap < min_cap_ns ? min_cap_ns : cap > max_cap_ns ? max_cap_ns : cap;
		sleep_ns = sleep_ns < cap ? sleep_ns : cap;
		int64_t wait = sleep_ns < left ? sleep_ns : left;
		sleep_ns *= 2;
		struct pollfd p = { .fd = wakefd, .events = POLLIN };
		struct timespec ts = { .tv_sec = wait / 1000000000, .tv_nsec = wait % 1000000000 };
		if (ppoll(&p, 1, &ts, NULL) > 0) {
			char buf[64];
			while (read(wakefd, buf, sizeof buf) > 0) {}
			return MPI_SUCCESS;
		}
	}
}
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

type (
	cComm     = C.MPI_Comm
	cRequest  = C.MPI_Request
	cStatus   = C.MPI_Status
	cDatatype = C.MPI_Datatype
)

// mpiError is an MPI error code with the library's own text.
type mpiError struct {
	call string
	code C.int
}

func (e *mpiError) Error() string {
	var buf [512]C.char
	C.hr_error_string(e.code, &buf[0], C.int(len(buf)))
	return fmt.Sprintf("%s: %s", e.call, C.GoString(&buf[0]))
}

func check(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &mpiError{call, rc}
}

func mpiFloat32() cDatatype    { return C.hr_float() }
func mpiFloat64() cDatatype    { return C.hr_double() }
func mpiRequestNull() cRequest { return C.hr_request_null() }

func mpiInit() error {
	var provided C.int
	switch rc := C.hr_init(&provided); rc {
	case -1:
		return fmt.Errorf("dist: MPI is already initialized in this process")
	case -2:
		return fmt.Errorf("dist: MPI_Init_thread: the MPI library does not provide MPI_THREAD_FUNNELED (gave level %d)", int(provided))
	default:
		return check("MPI_Init_thread", rc)
	}
}

func mpiSetup() (coll, ctl cComm, rank, size int, err error) {
	var r, s C.int
	err = check("MPI_Comm_dup", C.hr_setup(&coll, &ctl, &r, &s))
	return coll, ctl, int(r), int(s), err
}

func mpiIallreduce(buf unsafe.Pointer, count int, t cDatatype, c cComm, r *cRequest) error {
	return check("MPI_Iallreduce", C.hr_iallreduce(buf, C.int(count), t, c, r))
}

func mpiIreduceScatterBlock(send, recv unsafe.Pointer, count int, inPlace bool, t cDatatype, c cComm, r *cRequest) error {
	return check("MPI_Ireduce_scatter_block", C.hr_ireduce_scatter_block(send, recv, C.int(count), cbool(inPlace), t, c, r))
}

func mpiIallgather(send, recv unsafe.Pointer, count int, inPlace bool, c cComm, r *cRequest) error {
	return check("MPI_Iallgather", C.hr_iallgather(send, recv, C.int(count), cbool(inPlace), c, r))
}

func mpiIbcast(buf unsafe.Pointer, count, root int, c cComm, r *cRequest) error {
	return check("MPI_Ibcast", C.hr_ibcast(buf, C.int(count), C.int(root), c, r))
}

func mpiIbarrier(c cComm, r *cRequest) error {
	return check("MPI_Ibarrier", C.hr_ibarrier(c, r))
}

// mpiIsend and mpiIrecv move int64 control words; buf must be C memory
// (cmem) since MPI keeps it until the request completes.
func mpiIsend(buf []int64, dest, tag int, c cComm, r *cRequest) error {
	return check("MPI_Isend", C.hr_isend((*C.int64_t)(unsafe.Pointer(&buf[0])), C.int(len(buf)), C.int(dest), C.int(tag), c, r))
}

func mpiIrecv(buf []int64, src, tag int, c cComm, r *cRequest) error {
	return check("MPI_Irecv", C.hr_irecv((*C.int64_t)(unsafe.Pointer(&buf[0])), C.int(len(buf)), C.int(src), C.int(tag), c, r))
}

func mpiCancel(r *cRequest, recv bool) { C.hr_cancel(r, cbool(recv)) }

func mpiFinalize(coll, ctl cComm) error {
	// Locals: cgo checks the whole Go object a pointer argument points into.
	return check("MPI_Finalize", C.hr_finalize(&coll, &ctl))
}

func mpiAbort(code int) { C.hr_abort(C.int(code)) }

func statusSource(s *cStatus) int { return int(s.MPI_SOURCE) }

// mpiProgress is hr_progress over the engine's request table; it returns
// the number of completed requests, whose indices are in indices. out is
// the caller's (a local would escape to the heap at every call).
func mpiProgress(reqs []cRequest, indices []C.int, statuses []cStatus, out *cIndex, wakeFD int, budget, quiet, spin, minCap, maxCap time.Duration) (int, error) {
	var rp *cRequest
	var ip *C.int
	var sp *cStatus
	if len(reqs) > 0 {
		rp, ip, sp = &reqs[0], &indices[0], &statuses[0]
	}
	rc := C.hr_progress(C.int(len(reqs)), rp, out, ip, sp, C.int(wakeFD),
		C.int64_t(budget), C.int64_t(quiet), C.int64_t(spin), C.int64_t(minCap), C.int64_t(maxCap))
	return int(*out), check("MPI_Testsome", rc)
}

type cIndex = C.int

// wakePipe returns the pipe that wakes the progress loop: the engine polls
// the read end, submitters write a byte to the write end.
func wakePipe() (r, w int, err error) {
	var fds [2]C.int
	if rc, err := C.hr_wake_pipe(&fds[0]); rc != 0 {
		return 0, 0, fmt.Errorf("dist: pipe2: %w", err)
	}
	return int(fds[0]), int(fds[1]), nil
}

// cmem returns n int64 words of C memory, which MPI may keep between
// calls; it lives as long as the process.
func cmem(n int) ([]int64, error) {
	p := C.calloc(C.size_t(n), 8)
	if p == nil {
		return nil, fmt.Errorf("dist: no C memory for %d control words", n)
	}
	return unsafe.Slice((*int64)(p), n), nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
