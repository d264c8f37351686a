// Package compile turns a graph into a Program: a flat list of instructions
// (Instr, the device-neutral instruction set) and a Plan that gives every
// buffer an offset, a size, a lifetime, an owner and a ledger category
// before anything runs.
//
// compile knows no device: it imports no kernels and no backend. It asks
// the Target of Options (a backend: backend/cpu.New for the host) which ops
// and dtypes it runs (Target.Supports: a graph with an instruction the
// target does not run is refused with an *UnsupportedError naming the op,
// its owner, its dtypes and the target, before anything is folded, planned
// or reserved), what it fuses, how much workspace each instruction needs
// (Target.Lower, which also completes the instruction for the device), what
// persistent scratch its kernels hold (Target.Scratch: a KindScratch buffer
// of the plan), and folds constants by asking it to evaluate instructions
// on the host.
//
// In the life of a step, compile runs once, after the model, autodiff and the
// optimizer have built the graph and before the runtime reserves memory. Its
// passes are pure functions of their inputs:
//
//  1. prune: dead-code elimination; only nodes that reach an output or an
//     Assign survive (every Input is kept so that feeding is uniform). The
//     survivors' instructions are checked against Target.Supports.
//  2. fold: constant folding; a node whose inputs are all constants is
//     evaluated now, when its result is no larger than 4096 elements or than
//     its inputs (folding never inflates persistent memory).
//  3. assign buffers: leaves get persistent buffers (inputs, variables,
//     constants); requested outputs get persistent buffers; Reshape is a view
//     of its input's buffer; every other node gets an arena buffer, unless
//     in-place reuse applies: an elementwise op whose same-size input dies at
//     that op writes over it. Assign(v, x) writes x straight into v's buffer
//     when no read of v comes after x is produced (otherwise it copies). A
//     Part (a further output of a multi-output op) gets a buffer of its own
//     that its op's instruction writes (Instr.Parts); a part nobody reads
//     gets none, and the op keeps it in its workspace.
//  4. liveness: an arena buffer lives from the instruction that defines it to
//     the last one that reads it.
//  5. arena planning: greedy by size (the "greedy by size" strategy of
//     TensorFlow Lite's arena planner and XLA's heap simulator): buffers in
//     decreasing size take the best-fitting gap among the buffers already
//     placed whose lifetimes overlap theirs.
//
// Terms of the Plan:
//   - Arena: one block of ArenaBytes holding every temporary of the step at
//     its planned offset.
//   - LowerBound: the most bytes of arena buffers live at one instruction; no
//     planner can use a smaller arena. The tests hold ArenaBytes within 10%.
//   - Peak: persistent bytes (variables, inputs, constants, outputs) plus
//     the arena. It is what the runtime reserves, and what the ledger
//     measures, byte for byte: every buffer is counted as mem.Align(bytes).
//   - Category totals: persistent buffers by their category; the arena split
//     into activation (forward values read by the backward pass, live at the
//     arena's busiest instruction) and workspace (the rest).
//
// Instructions: an Instr is a header every instruction has (op, node,
// owner, site, dtypes, output and input buffers, shape, workspace, parts)
// and one payload per op family, each a typed pointer field that only its
// family sets: Broadcast (the broadcasting elementwise ops), Reduce, MatMul,
// Matrix (ops over rows: the softmax family, moments, layer norm), Window
// (convolutions, pools, resizes), Move (data movement), Attention, Act,
// Random, Fused and Collective. Typed pointers rather than one payload
// interface: a reader names the family it expects (it.MatMul.K) and the
// compiler checks it, with no type assertion that could fail at run time;
// a backend reads a payload once, when it binds the instruction, and keeps
// what it needs by value, so a run neither allocates nor asserts; and the
// header stays small, where the flat Instr repeated graph.Attr field by
// field. A new family adds one field here.
//
// The lowering table (registry.go) holds one entry per op, registered from
// the op's family file (lower_<family>.go): how to fill its payload,
// whether it may join a fused elementwise chain, whether it is a
// collective (never folded), and its flops (Program.Cost); or, for the
// leaves, views and parts, why it runs no instruction of its own. Lowered
// and Fusable expose it to backends' coverage tests.
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
//
// Errors: Compile returns an error, never panics, for graph mistakes
// (Build recovers *graph.Error), for a read of a variable after its Assign,
// for an op its Target does not run (*UnsupportedError), and, when
// Options.Budget is set and Peak exceeds it, an *mem.OOMError that lists
// the largest buffers and the category totals.
package compile
