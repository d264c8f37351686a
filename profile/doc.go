// Package profile exports what headroom knows about memory to the tools
// people already use: `go tool pprof`, Perfetto and chrome://tracing,
// TensorBoard, and a web browser.
//
// In the life of a step, profile runs after compile has planned the step
// (it reads a compile.Plan: every buffer's kind, category, size, arena
// offset, lifetime, owner and Go call site) and while or after train runs
// it (it reads a train.History, and its TensorBoard callback is told of
// every step and epoch). It never changes a plan and takes no part in a
// step. `headroom plan --profile DIR` and `headroom train --profile DIR`
// call WriteAll.
//
// Terms:
//   - Owner: the node that defines a buffer, as scope path and op
//     ("conv2d_1/conv2d", "grad/dense/matmul/matmul", "dense/kernel/m").
//   - Layer: the first element of the owner's scope path, looking through
//     autodiff's "grad/" scope, so a layer's forward values, gradients,
//     weights and optimizer state are counted together (see Layer).
//   - Site: "file:line" of the user's code that built the owner.
//   - Persistent buffers (variables, inputs, constants, outputs) live for
//     the whole step; arena buffers live from their first instruction to
//     their last, at fixed offsets in one arena that they share over time.
//   - Peak share: what a buffer contributes to Plan.Peak. Persistent buffers
//     count at their size. The arena is counted as it stands at
//     Plan.PeakInstr, the busiest instruction: each arena buffer live there
//     at its size, every other arena buffer 0, and the arena bytes no buffer
//     occupies there (ArenaBytes - LowerBound, the placement's
//     fragmentation) as one more sample owned by ArenaFragmentation, in the
//     workspace category. These shares sum exactly to Plan.Peak and, by
//     category, to Plan.Totals (WritePprof checks it and fails otherwise).
//
// Exports:
//   - WritePprof: a pprof profile, one sample per buffer. Sample types
//     PeakBytes (the default; the peak share), BufferBytes (each buffer at
//     its size, as alloc_space in Go heap profiles) and Buffers (a count).
//     Labels: owner, layer, category, kind, site. Stacks: the owner's
//     function (file and line: the site) called from the layer's, so
//     `-top` lists owners and `-top -cum` layers, `-tags` splits bytes by
//     category, kind, layer and owner, `-tagfocus=category=param` keeps one
//     category.
//   - WriteTrace: Trace Event Format JSON: counters of live bytes by
//     category and of the arena over the step, and one complete event per
//     arena buffer lifetime; with TraceOptions, the step's phases and
//     instructions, and measured durations for the x axis.
//   - EventWriter, ReadEvents, TensorBoard: TensorBoard event files
//     (TFRecords of Event protos, written with protowire) and a
//     train.Callback that logs loss, accuracy, learning rate and memory by
//     category.
//   - WriteHTML: one self-contained page: summary, memory over the step by
//     category, the arena's layout, the loss curve, bytes by layer, and the
//     plan's buffers.
package profile
