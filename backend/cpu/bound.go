package cpu

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/runtime"
)

// Bound is an Instr bound to the bytes of its buffers, ready to run: its
// kernel was chosen from the kernel table when it was bound, with the
// typed views of the buffers it needs.
type Bound struct {
	// Comm runs the collectives; nil means a single process.
	Comm runtime.Collective

	*compile.Instr
	run func() error // the kernel, bound (see binder)

	out  []byte
	in   [][]byte // by input
	more [][]byte // a multi-output op's further outputs (nil where not live)
	work []byte

	// all_reduce_start: the all-reduce in flight (nil when none);
	// all_reduce_wait: its start (see link)
	req   runtime.Request
	start *Bound
	// all_reduce_wait: over every run, how long its all-reduces took (where
	// the Request reports it) and how long this instruction waited for them
	took, waited time.Duration

	splits int // a kernel split over the pool's threads: into this many parts

	// pool runs the kernels that split over threads: the backend's own
	// (see Target)
	pool *kernels.Pool

	// choices picks a float32 convolution's or matrix product's algorithm
	// (choose.go; nil: the rule); pending is its measurement still to run, set by the binder
	choices *Choices
	pending *pending
	// algo is a float32 convolution's algorithm (nil for other
	// instructions): ConvAuto runs the rule; convKind is which product
	algo     *kernels.ConvAlgo
	convKind kernels.ConvKind
	// mmAlgo is a float32 matrix product's algorithm (nil for other
	// instructions)
	mmAlgo *kernels.MatMulAlgo
	// prepacked: a product that reads its second operand packed once for
	// its group (packed.go)
	prepacked bool
}

// bind binds b to in over bufs, the bytes of every buffer of the program,
// and takes its kernel from the table. comm runs its collectives.
func bind(b *Bound, in *compile.Instr, bufs [][]byte, comm runtime.Collective, pool *kernels.Pool, choices *Choices) error {
	*b = Bound{Comm: comm, Instr: in, out: bufs[in.Out], in: make([][]byte, len(in.In)), pool: pool, choices: choices}
	if in.Work >= 0 && in.Work < len(bufs) {
		b.work = bufs[in.Work]
	}
	for i, id := range in.In {
		b.in[i] = bufs[id]
	}
	if len(in.Parts) > 0 {
		b.more = make([][]byte, len(in.Parts))
		for i, id := range in.Parts {
			if id >= 0 && id < len(bufs) {
				b.more[i] = bufs[id]
			}
		}
	}
	if f := binderOf(in.Op, in.DType, in.InDType); f != nil {
		b.run = f(b)
	}
	if b.run == nil {
		return fmt.Errorf("cpu: no kernel for %s on %s (%s, built at %s)", in.Op, in.DType, in.Owner, in.Site)
	}
	return nil
}

// Run executes the instruction. It does not allocate unless it fails.
func (b *Bound) Run() error { return b.run() }

func (b *Bound) fail(format string, args ...any) error {
	return &runtime.RunError{Op: b.Op, Owner: b.Owner, Site: b.Site, Msg: fmt.Sprintf(format, args...)}
}

// failed returns a *runtime.RunError that wraps err, a collective's error.
func (b *Bound) failed(err error, format string, args ...any) error {
	return &runtime.RunError{Op: b.Op, Owner: b.Owner, Site: b.Site, Msg: fmt.Sprintf(format, args...), Err: err}
}

// asAny views b as elements of T (any fixed-size type) without copying.
func asAny[T any](b []byte) []T {
	var z T
	n := int(unsafe.Sizeof(z))
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/n)
}
