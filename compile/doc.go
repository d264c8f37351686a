// Package compile turns a graph into a Program: a flat list of instructions
// (Instr, the device-neutral instruction set) and a Plan that gives every
// buffer an offset, a size, a lifetime, an owner and a ledger category
// before anything runs.
//
// compile knows no device: it imports no kernels and no backend. It asks
// the Target of Options (a backend: backend/cpu.New for the host) what it
// fuses, how much workspace each instruction needs (Target.Lower, which also
// completes the instruction for the device), what persistent scratch its
// kernels hold (Target.Scratch: a KindScratch buffer of the plan), and folds
// constants by asking it to evaluate instructions on the host.
//
// In the life of a step, compile runs once, after the model, autodiff and the
// optimizer have built the graph and before the runtime reserves memory. Its
// passes are pure functions of their inputs:
//
//  1. prune: dead-code elimination; only nodes that reach an output or an
//     Assign survive (every Input is kept so that feeding is uniform).
//  2. fold: constant folding; a node whose inputs are all constants is
//     evaluated now, when its result is no larger than 4096 elements or than
//     its inputs (folding never inflates persistent memory).
//  3. assign buffers: leaves get persistent buffers (inputs, variables,
//     constants); requested outputs get persistent buffers; Reshape is a view
//     of its input's buffer; every other node gets an arena buffer, unless
//     in-place reuse applies: an elementwise op whose same-size input dies at
//     that op writes over it. Assign(v, x) writes x straight into v's buffer
//     when no read of v comes after x is produced (otherwise it copies).
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
// Errors: Compile returns an error, never panics, for graph mistakes
// (Build recovers *graph.Error), for a read of a variable after its Assign,
// and, when Options.Budget is set and Peak exceeds it, an *mem.OOMError that
// lists the largest buffers and the category totals.
package compile
