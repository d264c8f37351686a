// Package graph is headroom's intermediate representation: an immutable,
// append-only graph of typed, shaped nodes that a training step is written in
// before it is differentiated (package autodiff), planned and lowered
// (package compile) and run (package runtime).
//
// Terms:
//   - Graph: the container. Nodes are appended and never changed, so a node's
//     id is its position in a topological order: every input has a smaller id.
//   - Node: one value, produced by one Op from input nodes, with a DType and a
//     Shape checked when the node is built. A node also records its owner (the
//     scope path, e.g. "dense1/matmul"), the phase that built it (forward,
//     backward, update) and the Go call site of the user code that built it;
//     the planner uses these to name and categorize buffers.
//   - Op: an ordered enum. Each op has one builder function here (ops are free
//     functions: graph.MatMul(x, w)), one reference kernel (package kernels),
//     one entry in the table of each package that handles it (its VJP rule,
//     its lowering, its host kernel, its ONNX translation: see below). No
//     closures live on nodes, so every pass can inspect every node.
//   - Leaves: Input (fed each step), Variable (persistent state with a Role:
//     param, grad or optstate) and Constant (a value known when building).
//   - Parts: an op with several outputs (attention: its output and each
//     row's log-sum-exp) is one node, its first output, and a Part node per
//     further output, built with it; one instruction computes them all,
//     and each part is planned as a buffer of its own (sequence.go).
//   - Assign: the only side effect. Assign(v, x) makes x the value of
//     Variable v after the step. Every read of v in the step sees the value
//     from before the step; compile rejects a read of v built after its Assign.
//
// Errors: building a node with mismatched shapes or dtypes panics with a
// *graph.Error naming the op and the shapes, at the call site, as a typo in a
// model should. Catch (and compile.Build) recover such panics into an error
// for callers that want one; no other panic is recovered.
//
// Adding an op touches one entry per package, each in the file of the
// op's family, and each package has a test that fails while the entry is
// missing:
//  1. graph: the Op constant at the end of its family's block in op.go,
//     its opInfo entry (name, class) and its builder, which checks
//     shapes, in the family's file (elementwise.go, reduce.go,
//     linalg.go, softmax.go, shape.go, conv.go, vision.go, sequence.go,
//     augment.go, gradops.go); a multi-output op also its NumParts and partType.
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
//
// Broadcasting follows NumPy: binary arithmetic and comparisons broadcast
// their operands; there is no implicit dtype promotion (as in TensorFlow), so
// mixing float32 and float64 is an error: use Cast.
package graph
