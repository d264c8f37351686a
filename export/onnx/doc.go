// Package onnx exports headroom's inference graphs as ONNX models that
// onnxruntime (or any ONNX runtime) runs with the same outputs, and
// quantizes them to int8 after training.
//
// It sits after training in the life of a model: train (or a checkpoint)
// gives the weights, nn builds the forward graph at some batch size, and
// Write translates that graph node by node into a ModelProto (opset 17 by
// default, MinOpset..MaxOpset on request), written with protowire by one
// small encoder (proto.go).
//
// Terms:
//   - Model: the graph, its Input nodes (batch first) and named Outputs,
//     and a function giving each Variable's value (Weights).
//   - Rule: how one graph op is exported: its batch rule and the ONNX nodes
//     it becomes. The op table (registry.go) holds one entry per op,
//     registered from the file of the op's family (elementwise.go,
//     reduce.go, softmax.go, linalg.go, movement.go, conv.go, vision.go,
//     sequence.go): a rule, or registerNotExportable(why, ops...); an op
//     that is not exportable is an *UnsupportedError naming the op, its
//     owner and why.
//   - Batch axis: the axis of a value that scales with the batch (batch.go).
//     Inputs and outputs carry the symbolic dimension "N" there, and shapes
//     written into the model (Reshape, Expand) keep it symbolic, so the
//     model runs at any batch although headroom built the graph at one.
//     Build the graph at a batch larger than 1: at 1, a batch axis cannot
//     be told from any other axis of size 1.
//   - Layout: headroom's convolutions and pools are NHWC with HWIO filters;
//     ONNX's are NCHW with OIHW filters. Activations go through Transpose
//     nodes around each Conv/MaxPool/AveragePool (onnxruntime cancels the
//     pairs between layers) and filters are stored as OIHW. "Same" padding
//     becomes explicit pads with TensorFlow's odd cell at the end. A bias
//     added to a convolution is folded into the Conv.
//   - Initializers: Variables and Constants, stored once per form they are
//     read in (as is, reshaped, transposed, OIHW, int8). A reshaped weight
//     (the attention projections' kernels) is stored in the shape read,
//     and counts as a weight under int8.
//   - Int8 (quant.go): post-training quantization in the QDQ format:
//     weights of MatMul and Conv int8 per output channel, their computed
//     operands QuantizeLinear/DequantizeLinear per tensor with ranges that
//     Calibrate measures by running the float graph on headroom's own
//     runtime over calibration batches (Ranges are keyed by node: calibrate
//     and write the same graph). A convolution's folded bias is int32, so
//     onnxruntime runs the layer as one integer kernel (QLinearConv); other
//     biases, the logits and softmax stay float.
//
// Supported ops: Input, Variable, Constant, Neg, Exp, Log, Sqrt, Relu,
// Sigmoid, Tanh, Erf, Abs, Cast, Add, Sub, Mul, Div, Maximum, Minimum, the
// comparisons, Where, ReduceSum/Mean/Max, MatMul (transposed operands,
// batch dimensions, bfloat16 products), Softmax, LogSoftmax, Reshape,
// Transpose, BroadcastTo, Concat, Slice, Unslice (zero padding: Pad),
// Gather, OneHot, Conv2D (dilated, grouped, depthwise), MaxPool2D,
// AvgPool2D, and the vision layers' ops (vision.go): ReluClip (Relu,
// LeakyRelu, Clip, or its formula), Elu (Elu, Selu), Silu, HardSwish,
// Softplus, Softsign, Conv2DTranspose (ConvTranspose; its filter stays
// float under int8), ResizeBilinear (Resize, linear, half-pixel), and the
// sequence ops (sequence.go), so the gpt, the lstm and a GRU export: LayerNorm
// (opset 17's LayerNormalization; its parts, each row's mean and 1/σ,
// are the node's optional outputs), Gelu (its erf formula), Attention
// (MatMul/Softmax with the causal rule and the mask; its part, the rows'
// log-sum-exp, is not exported), LSTMCell (Split into the gates, Sigmoid,
// Tanh, Mul, Add; its parts, c and the activations, are those values),
// GRUCell (Split into the gates, Sigmoid, Tanh, Add, Mul, Sub; its part,
// the activations, is their Concat).
// Not exported: the decoding steps' cache writes. Training-only ops
// (losses, gradients, dropout masks and attention's dropout, batch
// moments, Assign, collectives) are not exported.
//
// Adding an op touches one entry per package, each in the file of the
// op's family, and each package has a test that fails while the entry is
// missing:
//  1. graph: the Op constant at the end of its family's block in op.go,
//     its opInfo entry (name, class) and its builder, which checks
//     shapes, in the family's file (elementwise.go, reduce.go,
//     linalg.go, softmax.go, shape.go, conv.go, vision.go, sequence.go,
//     gradops.go); a multi-output op also its NumParts and partType.
//  2. autodiff: its VJP rule, register(op, rule) in the family's file,
//     and a case in the gradient checks; or registerZero (no gradient
//     flows) or registerNoRule(why). Tests: TestEveryOpHasAVJPEntry,
//     TestGradientsCoverEveryRule.
//  3. compile: its lowering, register(op, lowering{...}) in
//     lower_<family>.go (its Instr payload, whether it fuses, its flops);
//     or registerNoInstr(why). Test: TestEveryOpIsLowered.
//  4. kernels: its reference kernel (destination-first) and its case in
//     the shared suite; backend/cpu: its kernel entry, register(op,
//     kernel{...}) in the family's file (binders by dtype, workspace,
//     scratch, fused step), which Target.Supports answers from. Test:
//     TestEveryLoweredOpHasAKernel.
//  5. export/onnx: its translation, register(op, rule{...}) in the
//     family's file, and a case in the models onnxruntime runs
//     (testModels); or registerNotExportable(why). Tests:
//     TestEveryOpHasAnExportEntry, TestEveryTranslationIsRun.
package onnx
