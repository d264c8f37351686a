// Package autodiff adds the backward pass to a graph: Grad(loss, wrt...)
// appends the nodes that compute d loss / d w for each w, by reverse-mode
// accumulation over one table of vector-Jacobian product (VJP) rules
// (registry.go), one entry per op registered from the file of the op's
// family (elementwise.go, reduce.go, linalg.go, softmax.go, movement.go,
// conv.go, vision.go, sequence.go, leaves.go): register(op, rule), or
// registerZero(ops...) for ops through which no gradient flows
// (comparisons, one_hot, dropout masks), or registerNoRule(why, ops...).
//
// In the life of a step it runs after the model and loss are built and
// before the optimizer's update: the nodes it builds carry the Backward
// phase, so the planner can tell saved activations (forward values read by
// backward nodes) from temporaries.
//
// Conventions, as in JAX and TensorFlow:
//   - loss must be a floating-point scalar; its seed gradient is 1.
//   - a w that the loss does not depend on gets a zero gradient (JAX's
//     convention; TensorFlow returns None).
//   - integer and bool inputs (labels, indices, masks) get no gradient.
//   - ties in Maximum/Minimum send the gradient to the first operand; ties in
//     ReduceMax share it equally (as TensorFlow's reduce_max).
//   - the internal gradient ops (relu_grad, ...) have no rules: headroom does
//     not take second derivatives, and Grad panics with a *graph.Error naming
//     the op, and why it has no rule, if asked to.
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
//     flows) or registerNoRule(why). A multi-output op whose parts carry
//     gradients (an LSTM step's cell state, read by the next step)
//     registers with registerParts: its rule reads them with
//     c.partGrad(n, i), and its gy may be nil when only a part has one; a
//     gradient through a part of any other op is refused, naming it.
//     Tests: TestEveryOpHasAVJPEntry, TestGradientsCoverEveryRule.
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
package autodiff
