package compile

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The instruction set: what compile lowers a graph to and a backend runs.
// An Instr is one op application with every shape, stride and size
// precomputed; it says nothing about how or where it runs. A Target
// completes it for its device (Target.Lower) and a backend binds it to
// memory (package backend/cpu for the host).
//
// An Instr is a header that every instruction has (op, node, owner, site,
// dtypes, buffers, shape, workspace, parts) and one payload per op family,
// set by the family's lowering (registry.go) and nil for every other
// family: a matmul reads it.MatMul, a convolution it.Window, and a field
// of one family never shows up on another's instruction.

// Instr is one lowered op application. Buffer indices refer to the
// program's buffer table; every size is in elements unless named Bytes.
type Instr struct {
	Op      graph.Op
	Node    int    // graph node id
	Owner   string // the node's owner
	Site    string // the user's file:line
	DType   tensor.DType
	InDType tensor.DType // dtype of the first input (casts, comparisons), of the values (where)
	Out     int
	In      []int
	Shape   []int // output shape
	Work    int   // workspace buffer, or -1
	// Parts: a multi-output op's further outputs (graph.Op.NumParts): the
	// buffer of part i+1, or -1 where nothing reads it (the kernel then
	// keeps it in its workspace).
	Parts []int

	// The family payloads: the op's family sets its own, the others stay
	// nil. Ops whose header says everything (unary elementwise ops, casts,
	// assign, the collectives but a wait) have none.

	Broadcast  *BroadcastGeom  // add ... minimum, the comparisons, where, broadcast_to
	Reduce     *ReduceGeom     // reduce_sum, reduce_mean, reduce_max
	MatMul     *MatMulGeom     // matmul
	Matrix     *MatrixGeom     // the softmax family, moments, layer_norm and its gradient
	Window     *WindowGeom     // conv2d, its gradients and transpose; pools and their gradients; resize
	Move       *MoveGeom       // transpose, concat, slice, unslice, unslice_add, gather, scatter_add, one_hot, cache_write
	Attention  *AttnGeom       // attention and its gradient
	Act        *ActParams      // the vision activations and their gradients
	Random     *RandomGeom     // dropout_mask, random_uniform
	Transform  *TransformGeom  // image_transform and its gradient
	Fused      *Fused          // fused: the chain; In lists its leaves
	Collective *CollectiveGeom // all_reduce_wait, reduce_scatter_wait, all_gather_wait
}

// BinaryPath selects the loop for elementwise binary ops and comparisons.
type BinaryPath uint8

// The paths, from fastest to most general.
const (
	PathSame        BinaryPath = iota // operands have the output's shape
	PathScalarRight                   // b is a single element
	PathScalarLeft                    // a is a single element
	PathBroadcast                     // general strides
)

// BroadcastGeom is how the operands of a broadcasting op map onto its
// output's Shape: the binary arithmetic ops (with their Path), the
// comparisons, where (condition in CStrides) and broadcast_to (AStrides).
type BroadcastGeom struct {
	Path               BinaryPath
	AStrides, BStrides []int // broadcasting strides of the inputs into Shape
	CStrides           []int // where: strides of the condition
}

// ReduceGeom is a reduction of an input of shape XShape: output element
// DstStrides·index receives each input element (the reduced axes have
// stride 0); reduce_mean scales the sums by Scale, 1/count.
type ReduceGeom struct {
	XShape, DstStrides []int
	Scale              float64
	// Product: a reduce_sum over every axis but the last that reads a
	// second input x of In[0]'s shape and also writes Σ In[0]·x over the
	// same axes to Parts[0] (Target.Fuses(FuseChannelSums)).
	Product bool
}

// MatMulGeom is a product per batch element, op(a) [M, K] · op(b) [K, N].
type MatMulGeom struct {
	M, N, K, Batch int
	TransA, TransB bool
	SharedB        bool // b is one matrix for every batch element
	BF16           bool // bfloat16 operands, float32 sums
}

// MatrixGeom is the first input of an op over its last axis seen as a
// Rows×Cols matrix: the softmax family, moments and layer norm.
type MatrixGeom struct {
	Rows, Cols int
	Eps        float64 // layer_norm: added to the variance
	// Image: moments: the rows of one image (the product of the axes
	// between the first and the last; 1 below rank 3), which the kernel
	// sums apart in whole images
	Image int
}

// WindowGeom is a convolution, pooling or resize over an NHWC input.
type WindowGeom struct {
	Geom Window
	F    int  // convolutions: output channels
	BF16 bool // conv2d and its gradients: bfloat16 operands, float32 sums
	// ReluMask: a max_pool2d_grad whose result goes through ReluGrad by
	// its input x (compile fuses ReluGrad(x, MaxPool2DGrad(x, dy)), when
	// the Target runs FusePoolReluGrad).
	ReluMask bool
	// Moments: a conv2d that also writes the mean and biased variance of
	// each of its output's channels, [2, F], to Parts[0] (compile fuses
	// Moments of its output, when the Target runs FuseConvMoments).
	Moments bool
}

// MoveGeom is a data-movement op: which elements of its inputs land where.
type MoveGeom struct {
	XShape       []int // transpose, slice: the input's shape; cache_write: x's
	Perm         []int // transpose
	Starts, Ends []int // slice (of XShape); unslice, unslice_add (of Shape)
	Outer        int   // concat: the product of the dimensions before its axis
	Inners       []int // concat: each part's size from its axis on
	RowSize      int   // gather, scatter_add: elements per row
	Depth        int   // one_hot
}

// AttnGeom is the geometry of an attention over q [B, Tq, H, D] and k, v
// [B, Tk, H, D], its dropout, and where its optional inputs are.
type AttnGeom struct {
	B, Tq, Tk, H, D int
	Scale           float64
	Causal          graph.Causal
	Rate            float64 // dropout rate of the probabilities
	Seed            uint64
	// MaskIn and StepIn: the mask and step inputs (indices in In), or -1.
	MaskIn, StepIn int
}

// ActParams are the parameters of an activation op (graph.Attr.Act).
type ActParams [4]float64

// RandomGeom is a random draw: dropout_mask's rate and seed,
// random_uniform's seed.
type RandomGeom struct {
	Rate float64
	Seed uint64
}

// TransformGeom is an image transform (or its gradient) of N images of
// H×W pixels and C channels by Transforms rows of 8 (N, or 1 for every
// image): bilinear or nearest, the fill mode (graph.FillMode) and value.
type TransformGeom struct {
	N, H, W, C, Transforms int
	Bilinear               bool
	Fill                   int
	FillValue              float64
}

// CollectiveGeom links a wait to its start.
type CollectiveGeom struct {
	Start int // the index of its start instruction
}

// Window is the geometry of a convolution or pooling window over an NHWC
// input, with Keras/TensorFlow padding: "valid" has none; "same" pads
// P = max((O-1)·S + K - I, 0) in all along a dimension, P/2 before and the
// odd one after, K being the window's extent (KH-1)·DH + 1 when dilated.
// Its fields are those of kernels.ConvGeom, in order, so a host backend
// converts it as it is.
type Window struct {
	N, H, W, C      int // input: batch, height, width, channels
	KH, KW          int // window
	SH, SW          int // strides
	PadTop, PadLeft int // zero padding before (after-padding is implied by OH/OW)
	OH, OW          int // output height, width
	DH, DW, Groups  int // dilation and filter groups; 0 (or 1) for none
}

// NewWindow returns the window geometry of attributes at over an input of
// shape in [N, H, W, C].
func NewWindow(in tensor.Shape, at *graph.Attr) Window {
	w := Window{N: in[0], H: in[1], W: in[2], C: in[3], KH: at.Window[0], KW: at.Window[1], SH: at.Strides[0], SW: at.Strides[1],
		DH: at.Dilation[0], DW: at.Dilation[1], Groups: at.Groups}
	w.OH, w.PadTop = windowOut(w.H, graph.EffectiveWindow(w.KH, w.DH), w.SH, at.Same)
	w.OW, w.PadLeft = windowOut(w.W, graph.EffectiveWindow(w.KW, w.DW), w.SW, at.Same)
	return w
}

// windowOut returns the output length and the padding before for one
// spatial dimension of length in, window k and stride s.
func windowOut(in, k, s int, same bool) (out, before int) {
	out = graph.ConvOutSize(in, k, s, same)
	if same && out > 0 {
		before = max((out-1)*s+k-in, 0) / 2
	}
	return out, before
}

// LeafKind says how a fused chain's input maps onto the output's elements.
type LeafKind uint8

// The leaf kinds.
const (
	LeafFull     LeafKind = iota // element i of the output reads element i
	LeafScalar                   // one value for every element
	LeafPeriodic                 // element i reads element i mod Period (a bias over the last axes)
	LeafCond                     // a Bool scalar, the condition of a Where step (read as one byte)
)

// FusedLeaf is one input of a fused chain.
type FusedLeaf struct {
	Kind   LeafKind
	Period int
}

// FusedStep is one op of a fused chain: Dst = Op(A, B), or for OpWhere
// Dst = A ? B : C with A a LeafCond leaf (a step guard: mixed float16
// training keeps a variable's old value when the step overflowed).
// Operands >= 0 are registers, < 0 are leaves (-1 is leaf 0); Dst < 0 is
// the output.
type FusedStep struct {
	Op      graph.Op
	Dst     int
	A, B, C int
	OwnerID int // the graph node the step computes
}

// Fused is the program of a fused instruction: a chain of elementwise ops
// over one shape whose intermediates live in Regs registers. Chunk and
// Threads are the Target's choices (Target.Lower): how many elements a
// pass computes and how many threads share the chain.
type Fused struct {
	Steps   []FusedStep
	Leaves  []FusedLeaf
	Regs    int
	Chunk   int
	Threads int
}
