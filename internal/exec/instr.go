package exec

import (
	"fmt"
	"time"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// BinaryPath selects the loop for elementwise binary ops and comparisons.
type BinaryPath uint8

// The paths, from fastest to most general.
const (
	PathSame        BinaryPath = iota // operands have the output's shape
	PathScalarRight                   // b is a single element
	PathScalarLeft                    // a is a single element
	PathBroadcast                     // general strides
)

// Instr is one lowered op application. Buffer indices refer to the
// program's buffer table; every size is in elements unless named Bytes.
type Instr struct {
	Op      graph.Op
	Node    int    // graph node id
	Owner   string // the node's owner
	Site    string // the user's file:line
	DType   tensor.DType
	InDType tensor.DType // dtype of the first input (casts, comparisons)
	Out     int
	In      []int
	Shape   []int // output shape

	Path               BinaryPath
	AStrides, BStrides []int // broadcasting strides of the inputs into Shape
	CStrides           []int // where: strides of the condition

	M, N, K, Batch     int // matmul: per-batch op(a) [M,K] · op(b) [K,N]
	TransA, TransB     bool
	SharedB            bool // matmul: b is one matrix for every batch element
	Rows, Cols         int  // softmax family; reductions with one reduced block
	XShape, DstStrides []int
	Scale              float64 // reduce_mean: 1/count
	Perm               []int   // transpose (input shape in XShape)
	Starts, Ends       []int   // slice (input shape in XShape), unslice (output shape in Shape)
	Outer              int     // concat
	Inners             []int   // concat: inner sizes of each part
	RowSize            int     // gather, scatter_add
	Depth              int     // one_hot
	Geom               kernels.ConvGeom
	F                  int // conv: output channels
	Work               int // workspace buffer, or -1
	Rate               float64
	Seed               uint64
	Fused              *Fused // OpFused: the chain; In lists its leaves
	Pair               int    // all_reduce_wait: the index of its all_reduce_start
	BF16               bool   // matmul, conv: bfloat16 operands, float32 sums

	// ReluMask: a max_pool2d_grad whose result goes through ReluGrad by
	// its input x (compile fuses ReluGrad(x, MaxPool2DGrad(x, dy))) and
	// runs as kernels.MaxPool2DReluGrad.
	ReluMask bool
}

// collective runs a reduce-scatter or an all-gather; with a single
// process (no Comm) the block is the whole and the gather a copy.
func (b *Bound) collective() error {
	if b.Comm == nil || b.Comm.Size() == 1 {
		copy(b.out, b.in[0])
		return nil
	}
	var err error
	if b.Op == graph.OpReduceScatter {
		err = b.Comm.ReduceScatterSum(b.in[0], b.out, b.DType)
	} else {
		err = b.Comm.AllGather(b.in[0], b.out)
	}
	if err != nil {
		return b.fail("%s over %d processes: %v", b.Op, b.Comm.Size(), err)
	}
	return nil
}

// NeedsWork reports whether the instruction uses a workspace buffer.
func (in *Instr) NeedsWork() bool {
	switch in.Op {
	case graph.OpConv2D, graph.OpConv2DBackpropInput, graph.OpConv2DBackpropFilter, graph.OpFused:
		return true
	}
	return false
}

// RunError is a data error found while running an instruction.
type RunError struct {
	Op    graph.Op
	Owner string
	Site  string
	Msg   string
}

func (e *RunError) Error() string {
	s := fmt.Sprintf("%s (%s", e.Op, e.Owner)
	if e.Site != "" {
		s += ", built at " + e.Site
	}
	return s + "): " + e.Msg
}

// Collective is what an all-reduce instruction needs of the processes of a
// data-parallel run (dist.Comm provides it).
type Collective interface {
	Rank() int
	Size() int
	// AllReduceSum sums buf's float32 or float64 elements over every
	// process, in place.
	AllReduceSum(buf []byte, dtype tensor.DType) error
	// ReduceScatterSum sums send over every process; recv gets this
	// process's block (send is Size()·len(recv) bytes).
	ReduceScatterSum(send, recv []byte, dtype tensor.DType) error
	// AllGather concatenates every process's send into recv, in rank order.
	AllGather(send, recv []byte) error
	// Start begins summing buf over every process, in place, and returns
	// at once; the request's Wait completes it. buf is not touched until
	// then.
	Start(buf []byte, dtype tensor.DType) (Request, error)
}

// Request is an all-reduce in flight (dist.Request is the same type).
type Request = interface{ Wait() error }

// Bound is an Instr bound to the bytes of its buffers, ready to run.
type Bound struct {
	// Comm runs all-reduce instructions; nil means a single process.
	Comm Collective

	*Instr
	out   []byte
	in    [3][]byte
	work  []byte
	parts any // concat: [][]T for the element size

	leafViews [][]byte // fused: every leaf's bytes
	leafSlot  []int    // fused: workspace slot of each non-full leaf

	// all_reduce_start: the all-reduce in flight (nil when none);
	// all_reduce_wait: its start (see Link)
	req   Request
	start *Bound
	// all_reduce_wait: over every run, how long its all-reduces took (where
	// the Request reports it) and how long this instruction waited for them
	took, waited time.Duration

	castParts int // a cast split over the kernels' threads: into this many
}

// tookWaiter is a Request that reports how long its collective took
// (dist's MPI requests do).
type tookWaiter interface {
	WaitTook() (time.Duration, error)
}

// AllReduceTimes sums, over the all_reduce_wait instructions of bound and
// every run so far, how long their all-reduces took from start to
// completion (where the communicator reports it) and how long the step
// waited for them: the difference is the time the all-reduces were hidden
// behind computation.
func AllReduceTimes(bound []Bound) (took, waited time.Duration) {
	for i := range bound {
		took += bound[i].took
		waited += bound[i].waited
	}
	return took, waited
}

// Link connects every all_reduce_wait of bound (a program's instructions,
// in order) to its all_reduce_start.
func Link(bound []Bound) {
	for i := range bound {
		if bound[i].Op == graph.OpAllReduceWait {
			bound[i].start = &bound[bound[i].Pair]
		}
	}
}

// Abandon completes every all-reduce still in flight in bound, after a step
// failed between a start and its wait: the processes stay in step and no
// buffer is written behind the caller's back. It returns the first error.
func Abandon(bound []Bound) error {
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

// Bind binds in to bufs, the bytes of every buffer of the program.
func Bind(in *Instr, bufs [][]byte) Bound {
	b := Bound{Instr: in, out: bufs[in.Out]}
	if in.Work >= 0 && in.Work < len(bufs) {
		b.work = bufs[in.Work]
	}
	if len(in.In) <= len(b.in) {
		for i, id := range in.In {
			b.in[i] = bufs[id]
		}
	}
	if in.Op == graph.OpFused {
		b.leafViews = make([][]byte, len(in.In))
		b.leafSlot = make([]int, len(in.In))
		slot := 0
		for i, id := range in.In {
			b.leafViews[i] = bufs[id]
			if in.Fused.Leaves[i].Kind.inWorkspace() {
				b.leafSlot[i] = slot
				slot++
			}
		}
	}
	if in.Op == graph.OpConcat {
		parts := make([][]byte, len(in.In))
		for i, id := range in.In {
			parts[i] = bufs[id]
		}
		switch in.DType.Size() {
		case 1:
			b.parts = views[uint8](parts)
		case 2:
			b.parts = views[uint16](parts)
		case 4:
			b.parts = views[uint32](parts)
		case 8:
			b.parts = views[uint64](parts)
		}
	}
	return b
}

func views[T any](parts [][]byte) [][]T {
	out := make([][]T, len(parts))
	for i, p := range parts {
		out[i] = asAny[T](p)
	}
	return out
}

func (b *Bound) fail(format string, args ...any) error {
	return &RunError{Op: b.Op, Owner: b.Owner, Site: b.Site, Msg: fmt.Sprintf(format, args...)}
}

// Run executes the instruction. It does not allocate unless it fails.
func (b *Bound) Run() error {
	switch b.Op {
	case graph.OpCast:
		return b.cast()
	case graph.OpAllReduce:
		if len(b.out) > 0 && &b.out[0] != &b.in[0][0] {
			copy(b.out, b.in[0])
		}
		if b.Comm == nil || b.Comm.Size() == 1 {
			return nil
		}
		if err := b.Comm.AllReduceSum(b.out, b.DType); err != nil {
			return b.fail("all-reduce over %d processes: %v", b.Comm.Size(), err)
		}
		return nil
	case graph.OpReduceScatter, graph.OpAllGather:
		return b.collective()
	case graph.OpAllReduceStart:
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
			return b.fail("starting the all-reduce over %d processes: %v", b.Comm.Size(), err)
		}
		b.req = req
		return nil
	case graph.OpAllReduceWait:
		s := b.start
		if s == nil {
			return b.fail("not linked to its all_reduce_start (exec.Link)")
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
			return b.fail("all-reduce over %d processes: %v", b.Comm.Size(), err)
		}
		return nil
	case graph.OpEqual, graph.OpNotEqual, graph.OpLess, graph.OpLessEqual, graph.OpGreater, graph.OpGreaterEqual:
		return b.compare()
	case graph.OpTranspose, graph.OpBroadcastTo, graph.OpConcat, graph.OpSlice, graph.OpUnslice,
		graph.OpGather, graph.OpWhere, graph.OpAssign:
		switch b.DType.Size() {
		case 1:
			return move[uint8](b)
		case 2:
			return move[uint16](b)
		case 4:
			return move[uint32](b)
		case 8:
			return move[uint64](b)
		}
	}
	if b.Op == graph.OpFused {
		b.fusedParallel()
		return nil
	}
	switch b.DType {
	case tensor.Float32:
		return compute[float32](b)
	case tensor.Float64:
		return compute[float64](b)
	}
	return b.fail("no kernel for %s on %s", b.Op, b.DType)
}

// binaryOp maps an arithmetic op to its kernel operator.
func binaryOp(op graph.Op) kernels.BinaryOp { return binaryOps[op] }

// compareOp maps a comparison to its kernel operator.
func compareOp(op graph.Op) kernels.CompareOp { return compareOps[op] }

var binaryOps = [graph.NumOps]kernels.BinaryOp{
	graph.OpAdd: kernels.Add, graph.OpSub: kernels.Sub, graph.OpMul: kernels.Mul,
	graph.OpDiv: kernels.Div, graph.OpMaximum: kernels.Max, graph.OpMinimum: kernels.Min,
}

var compareOps = [graph.NumOps]kernels.CompareOp{
	graph.OpEqual: kernels.Equal, graph.OpNotEqual: kernels.NotEqual, graph.OpLess: kernels.Less,
	graph.OpLessEqual: kernels.LessEqual, graph.OpGreater: kernels.Greater, graph.OpGreaterEqual: kernels.GreaterEqual,
}
