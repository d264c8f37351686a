package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Target is what compile asks of the backend a program will run on: which
// ops and dtypes it runs, which fusions it runs, how it completes each
// instruction and how much
// workspace that needs, what persistent scratch its kernels hold, and how
// to evaluate an instruction on the host (constant folding runs the same
// instructions the runtime will). compile imports no backend: a caller
// passes one (backend/cpu.New, backend/sim.New) in Options.Target, and
// runtime runs the program on the same backend.
type Target interface {
	// Name names the target in plans and errors ("cpu", "sim").
	Name() string
	// Supports reports whether the target runs instructions of op whose
	// output has dtype dtype and whose first operand has dtype in
	// (Instr.DType and Instr.InDType: most kernels are chosen by the
	// output's dtype, a comparison's by its operands', a cast's by both).
	// compile refuses a graph with an instruction its target does not run
	// (*UnsupportedError) before folding or planning anything.
	Supports(op graph.Op, dtype, in tensor.DType) bool
	// Fuses reports whether the target runs fused instructions of kind f.
	Fuses(f Fusion) bool
	// Lower completes it for the target (for a fused chain: the chunk and
	// the threads it splits over) and returns the bytes of workspace it
	// needs while it runs (0: none). The planner gives the workspace an
	// arena buffer that lives for that instruction only.
	Lower(it *Instr) int64
	// Scratch returns the bytes of persistent scratch the target's kernels
	// need to run instrs (a host backend's matrix-product packing buffers,
	// one set per thread): a buffer the runtime reserves once per engine,
	// so that it is on the ledger and in the plan.
	Scratch(instrs []Instr) int64
	// Evaluate runs it on host memory: bufs[i] holds buffer i's bytes. It
	// is called for instructions that need no workspace.
	Evaluate(it *Instr, bufs [][]byte) error
}

// Fusion names a kind of fused instruction a Target may run.
type Fusion uint8

// The fusions.
const (
	// FuseElementwise: chains of elementwise ops over one shape run as one
	// pass through memory (OpFused).
	FuseElementwise Fusion = iota
	// FusePoolReluGrad: ReluGrad(x, MaxPool2DGrad(x, dy)) runs as one
	// max_pool2d_grad instruction with ReluMask set.
	FusePoolReluGrad
	// FuseChannelSums: ReduceSum(g) and ReduceSum(Mul(g, x)) over every
	// axis but the last run as one reduce_sum instruction that reads g and
	// x once (ReduceGeom.Product): the gradients of a per-channel shift
	// and scale, as BatchNormalization's backward pass has them.
	FuseChannelSums
	// FusePadIntoConv: a zero padding of the spatial axes read only by
	// "valid" convolutions and their filter gradients becomes padding in
	// their window (no padded copy), and a crop of an input gradient to
	// the unpadded input becomes padding in the input gradient's window.
	FusePadIntoConv
	// FuseConvMoments: Moments(y) of a float32 Conv2D's output y runs in
	// the convolution's instruction (WindowGeom.Moments), which writes the
	// moments to Parts[0]: BatchNormalization's statistics summed as the
	// convolution writes its output, while it is in the cache.
	FuseConvMoments
)
