// Package cpu is the host backend: it runs compile's instructions with the
// kernels of package kernels over host memory (mem.CPU). It implements
// runtime.Backend, and so compile.Target.
//
// In the life of a step it comes last: compile asks its Target which ops
// and dtypes it runs (Supports), how each instruction runs here (Lower:
// how a fused chain splits over the kernels' threads, how much workspace a
// convolution needs; Fuses: which fusions it runs; Scratch: the persistent
// packing buffers of its matrix products; Evaluate: constant folding with
// the very instructions the runtime will run), then runtime reserves the
// plan on its device and Bind binds every instruction: it takes the
// instruction's kernel from the table, by op and dtype, once, with typed
// views of the reserved bytes, so that a run calls each bound kernel
// directly, through no switch. A bound step runs without allocating.
//
// The backend is a value that owns its threads: a Target holds a
// kernels.Pool sized by its one thread setting (New(threads)), started
// when a program is first bound and stopped by Close. Every bound
// instruction runs its kernel on that pool, and a bound program hands the
// pool its engine's packing scratch (on the engine's ledger) when it runs.
// So two engines in one process, a trainer's and a predictor's, each on a
// Target of its own, run on their own threads and pack into their own
// memory; nothing of the kernels' is process-wide (kernels' default pool
// serves direct kernel calls only, never an engine). Constant folding
// and the elementwise steps inside a part run on a pool of one thread.
//
// Kernels come from package kernels; this package only selects one by op
// and dtype and hands it typed views of the bound bytes. The kernel table
// (registry.go) holds one entry per op, registered from the file of the
// op's family (elementwise.go, cast.go, reduce.go, linalg.go, softmax.go,
// movement.go, conv.go, vision.go, sequence.go, collective.go, fused.go):
// its binders by dtype (a binder returns the function that runs a bound
// instruction), the workspace and scratch it needs, and, for an op compile
// fuses, the chunk kernel of a fused chain's step. It is the single truth
// of what the host runs: Supports, Lower, Scratch and Bind all read it. Errors at run time
// are data errors only (a label or index out of range) or a collective that
// failed; they come back as *runtime.RunError naming the op, its owner and
// the user's call site (a collective's own error wrapped inside it).
// Everything else was checked when the graph was built.
//
// Package backend/sim reuses this package's instructions on a simulated
// device: the same kernels against device-addressed memory, with explicit
// copies in and out.
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
package cpu
