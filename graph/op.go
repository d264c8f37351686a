package graph

// Op identifies what a node computes. The order is fixed: append new ops at
// the end of their family and keep opInfo in step.
type Op uint16

// The ops. Ops marked internal are built by autodiff for gradients; they have
// reference kernels but no VJP rule (headroom does not take second
// derivatives).
const (
	OpInvalid Op = iota

	// leaves
	OpInput
	OpVariable
	OpConstant

	// elementwise unary
	OpNeg
	OpExp
	OpLog
	OpSqrt
	OpRelu
	OpSigmoid
	OpTanh
	OpCast

	// elementwise binary, broadcasting
	OpAdd
	OpSub
	OpMul
	OpDiv
	OpMaximum
	OpMinimum

	// comparisons (Bool result, broadcasting) and selection
	OpEqual
	OpNotEqual
	OpLess
	OpLessEqual
	OpGreater
	OpGreaterEqual
	OpWhere

	// reductions over axes
	OpReduceSum
	OpReduceMean
	OpReduceMax

	// linear algebra
	OpMatMul

	// softmax family over the last axis
	OpSoftmax
	OpLogSoftmax
	OpSoftmaxCrossEntropy // per-example loss from logits and int32 labels

	// shape and data movement
	OpReshape
	OpTranspose
	OpBroadcastTo
	OpConcat
	OpSlice
	OpGather
	OpOneHot

	// internal: gradient helpers built by autodiff
	OpReluGrad
	OpSigmoidGrad
	OpTanhGrad
	OpSoftmaxGrad
	OpLogSoftmaxGrad
	OpSoftmaxCrossEntropyGrad
	OpUnslice
	OpScatterAdd

	// side effect
	OpAssign

	// appended after the core set: convolution and pooling (NHWC), more
	// elementwise ops, and random masks
	OpConv2D
	OpMaxPool2D
	OpAvgPool2D
	OpErf
	OpAbs
	OpDropoutMask
	OpConv2DBackpropInput  // internal
	OpConv2DBackpropFilter // internal
	OpMaxPool2DGrad        // internal
	OpAvgPool2DGrad        // internal
	// OpFused is made by compile's fusion pass, never by a builder: a chain
	// of elementwise ops run as one pass over memory.
	OpFused
	// OpAllReduce sums its input over every process of a data-parallel run
	// (internal; built by train for gradients).
	OpAllReduce
	OpReduceScatter // sum over processes, keep this process's block
	OpAllGather     // concatenate every process's block
	// OpAllReduceStart starts summing its input over every process, in
	// place in its output buffer, and returns at once; OpAllReduceWait (a
	// view of the start's buffer) completes it. Between the two the step
	// goes on computing: the all-reduce of a gradient bucket overlaps the
	// rest of backward (internal; built by train).
	OpAllReduceStart
	OpAllReduceWait

	// vision: the layers of convolutional networks (see vision.go)
	OpConv2DTranspose
	OpResizeBilinear
	OpResizeBilinearGrad // internal
	OpMoments
	OpReluClip
	OpReluClipGrad // internal
	OpElu
	OpEluGrad // internal
	OpSilu
	OpSiluGrad // internal
	OpHardSwish
	OpHardSwishGrad // internal
	OpSoftplus
	OpSoftplusGrad // internal
	OpSoftsign
	OpSoftsignGrad // internal

	// sequence: attention and recurrence (see sequence.go)
	OpAttention     // scaled dot-product attention; part 1: each row's log-sum-exp
	OpAttentionGrad // internal: dq; parts 1 and 2: dk and dv
	OpPart          // a further output of a multi-output op, written by that op's instruction
	OpUnsliceAdd    // internal: a gradient with another slice's gradient added in place
	OpCacheWrite    // a value written into a cache at a position read at run time
	OpGelu          // x·Φ(x), the exact GELU, as one op (its composition keeps three times the memory)
	OpGeluGrad      // internal
	OpLayerNorm     // normalization over the last axis, scaled and shifted; parts 1 and 2: each row's mean and 1/σ
	OpLayerNormGrad // internal: dx; parts 1 and 2: dgamma and dbeta

	// augmentation: the random preprocessing layers (see augment.go)
	OpRandomUniform
	OpImageTransform
	OpImageTransformGrad // internal

	// collectives, continued: the non-blocking reduce-scatter and
	// all-gather of ZeRO stages 2 and 3 (see gradops.go). A start returns
	// at once, its output the buffer the result lands in; its wait (a view
	// of that buffer that also reads the start's input, which must stay as
	// it is until then) completes it.
	OpReduceScatterStart
	OpReduceScatterWait
	OpAllGatherStart
	OpAllGatherWait

	// sequence, continued: a recurrent step in one op (see sequence.go)
	OpLSTMCell     // an LSTM step's gates and states from its pre-activations; parts 1 and 2: c and the activations
	OpLSTMCellGrad // internal: dz; part 1: dc of the previous step
	OpGRUCell      // a GRU step (reset after the recurrent product) from its input and recurrent projections; part 1: the activations
	OpGRUCellGrad  // internal: dx; parts 1 and 2: the recurrent projection's gradient and dh of the previous step

	NumOps
)

// OpClass groups ops by how the planner and the executor treat them.
type OpClass uint8

// The classes.
const (
	ClassLeaf        OpClass = iota
	ClassElementwise         // output element i depends only on input elements i (after broadcasting): may run in place
	ClassOther
	ClassAlias // output is a view of the input's bytes (no kernel)
	ClassEffect
)

var opInfo = [NumOps]struct {
	name  string
	class OpClass
}{
	OpInvalid:                 {"invalid", ClassOther},
	OpInput:                   {"input", ClassLeaf},
	OpVariable:                {"variable", ClassLeaf},
	OpConstant:                {"constant", ClassLeaf},
	OpNeg:                     {"neg", ClassElementwise},
	OpExp:                     {"exp", ClassElementwise},
	OpLog:                     {"log", ClassElementwise},
	OpSqrt:                    {"sqrt", ClassElementwise},
	OpRelu:                    {"relu", ClassElementwise},
	OpSigmoid:                 {"sigmoid", ClassElementwise},
	OpTanh:                    {"tanh", ClassElementwise},
	OpCast:                    {"cast", ClassOther},
	OpAdd:                     {"add", ClassElementwise},
	OpSub:                     {"sub", ClassElementwise},
	OpMul:                     {"mul", ClassElementwise},
	OpDiv:                     {"div", ClassElementwise},
	OpMaximum:                 {"maximum", ClassElementwise},
	OpMinimum:                 {"minimum", ClassElementwise},
	OpEqual:                   {"equal", ClassOther},
	OpNotEqual:                {"not_equal", ClassOther},
	OpLess:                    {"less", ClassOther},
	OpLessEqual:               {"less_equal", ClassOther},
	OpGreater:                 {"greater", ClassOther},
	OpGreaterEqual:            {"greater_equal", ClassOther},
	OpWhere:                   {"where", ClassElementwise},
	OpReduceSum:               {"reduce_sum", ClassOther},
	OpReduceMean:              {"reduce_mean", ClassOther},
	OpReduceMax:               {"reduce_max", ClassOther},
	OpMatMul:                  {"matmul", ClassOther},
	OpSoftmax:                 {"softmax", ClassOther},
	OpLogSoftmax:              {"log_softmax", ClassOther},
	OpSoftmaxCrossEntropy:     {"softmax_cross_entropy", ClassOther},
	OpReshape:                 {"reshape", ClassAlias},
	OpTranspose:               {"transpose", ClassOther},
	OpBroadcastTo:             {"broadcast_to", ClassOther},
	OpConcat:                  {"concat", ClassOther},
	OpSlice:                   {"slice", ClassOther},
	OpGather:                  {"gather", ClassOther},
	OpOneHot:                  {"one_hot", ClassOther},
	OpReluGrad:                {"relu_grad", ClassElementwise},
	OpSigmoidGrad:             {"sigmoid_grad", ClassElementwise},
	OpTanhGrad:                {"tanh_grad", ClassElementwise},
	OpSoftmaxGrad:             {"softmax_grad", ClassOther},
	OpLogSoftmaxGrad:          {"log_softmax_grad", ClassOther},
	OpSoftmaxCrossEntropyGrad: {"softmax_cross_entropy_grad", ClassOther},
	OpUnslice:                 {"unslice", ClassOther},
	OpScatterAdd:              {"scatter_add", ClassOther},
	OpAssign:                  {"assign", ClassEffect},
	OpConv2D:                  {"conv2d", ClassOther},
	OpMaxPool2D:               {"max_pool2d", ClassOther},
	OpAvgPool2D:               {"avg_pool2d", ClassOther},
	OpErf:                     {"erf", ClassElementwise},
	OpAbs:                     {"abs", ClassElementwise},
	OpDropoutMask:             {"dropout_mask", ClassOther},
	OpConv2DBackpropInput:     {"conv2d_backprop_input", ClassOther},
	OpConv2DBackpropFilter:    {"conv2d_backprop_filter", ClassOther},
	OpMaxPool2DGrad:           {"max_pool2d_grad", ClassOther},
	OpAvgPool2DGrad:           {"avg_pool2d_grad", ClassOther},
	OpFused:                   {"fused", ClassElementwise},
	OpAllReduce:               {"all_reduce", ClassElementwise},
	OpReduceScatter:           {"reduce_scatter", ClassOther},
	OpAllGather:               {"all_gather", ClassOther},
	OpAllReduceStart:          {"all_reduce_start", ClassElementwise},
	OpAllReduceWait:           {"all_reduce_wait", ClassAlias},

	// vision
	OpConv2DTranspose:    {"conv2d_transpose", ClassOther},
	OpResizeBilinear:     {"resize_bilinear", ClassOther},
	OpResizeBilinearGrad: {"resize_bilinear_grad", ClassOther},
	OpMoments:            {"moments", ClassOther},
	OpReluClip:           {"relu_clip", ClassElementwise},
	OpReluClipGrad:       {"relu_clip_grad", ClassElementwise},
	OpElu:                {"elu", ClassElementwise},
	OpEluGrad:            {"elu_grad", ClassElementwise},
	OpSilu:               {"silu", ClassElementwise},
	OpSiluGrad:           {"silu_grad", ClassElementwise},
	OpHardSwish:          {"hard_swish", ClassElementwise},
	OpHardSwishGrad:      {"hard_swish_grad", ClassElementwise},
	OpSoftplus:           {"softplus", ClassElementwise},
	OpSoftplusGrad:       {"softplus_grad", ClassElementwise},
	OpSoftsign:           {"softsign", ClassElementwise},
	OpSoftsignGrad:       {"softsign_grad", ClassElementwise},

	// sequence
	OpAttention:     {"attention", ClassOther},
	OpAttentionGrad: {"attention_grad", ClassOther},
	OpPart:          {"part", ClassOther},
	// unslice_add and cache_write read their first input's element i before
	// writing output element i: they may run in place over it
	OpUnsliceAdd:    {"unslice_add", ClassElementwise},
	OpCacheWrite:    {"cache_write", ClassElementwise},
	OpGelu:          {"gelu", ClassElementwise},
	OpGeluGrad:      {"gelu_grad", ClassElementwise},
	OpLayerNorm:     {"layer_norm", ClassOther},
	OpLayerNormGrad: {"layer_norm_grad", ClassOther},

	// augmentation
	OpRandomUniform:      {"random_uniform", ClassOther},
	OpImageTransform:     {"image_transform", ClassOther},
	OpImageTransformGrad: {"image_transform_grad", ClassOther},

	// collectives, continued
	OpReduceScatterStart: {"reduce_scatter_start", ClassOther},
	OpReduceScatterWait:  {"reduce_scatter_wait", ClassAlias},
	OpAllGatherStart:     {"all_gather_start", ClassOther},
	OpAllGatherWait:      {"all_gather_wait", ClassAlias},

	// sequence, continued
	OpLSTMCell:     {"lstm_cell", ClassOther},
	OpLSTMCellGrad: {"lstm_cell_grad", ClassOther},
	OpGRUCell:      {"gru_cell", ClassOther},
	OpGRUCellGrad:  {"gru_cell_grad", ClassOther},
}

// WaitsFor returns the start op that o waits for (OpAllReduceStart for
// OpAllReduceWait, ...), or OpInvalid when o is no wait.
func (o Op) WaitsFor() Op {
	switch o {
	case OpAllReduceWait:
		return OpAllReduceStart
	case OpReduceScatterWait:
		return OpReduceScatterStart
	case OpAllGatherWait:
		return OpAllGatherStart
	}
	return OpInvalid
}

// Started reports whether o starts a non-blocking collective that a wait
// completes.
func (o Op) Started() bool {
	return o == OpAllReduceStart || o == OpReduceScatterStart || o == OpAllGatherStart
}

// String returns the op's snake_case name, as plans and errors print it.
func (o Op) String() string {
	if o < NumOps && opInfo[o].name != "" {
		return opInfo[o].name
	}
	return "op?"
}

// Class returns how the planner treats the op.
func (o Op) Class() OpClass {
	if o < NumOps {
		return opInfo[o].class
	}
	return ClassOther
}
