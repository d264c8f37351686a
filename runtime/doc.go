// Package runtime reserves the memory of compiled programs on a backend and
// runs them.
//
// Terms:
//   - Backend: the seam below which everything device-specific lives
//     (runtime.Backend: a compile.Target that can also bind a program to
//     reserved memory, run it, and copy bytes in and out). backend/cpu is
//     the host; backend/sim a simulated device with staged copies; a CUDA
//     backend would sit beside them. The runtime reserves every byte on the
//     backend's device; a backend never allocates memory of its own.
//   - Engine: made by NewEngine, the one constructor: one backend's
//     allocator and ledger, the Variables (weights,
//     gradients, optimizer state) that programs on it share, and the
//     backend's persistent scratch (the host's packing buffers; a plan's
//     Scratch). A training program and an evaluation program loaded on the
//     same Engine read the same weights.
//   - Staging: on a backend the host cannot address, each input, output and
//     variable read or write goes through a host buffer (charged to the
//     host ledger) and an explicit CopyIn or CopyOut; on the host the
//     buffers are the reservation itself.
//   - Executable: a Program loaded on an Engine. Load reserves, once, the
//     program's arena and its persistent buffers (inputs, constants,
//     outputs), and creates the variables that do not exist yet. Load is the
//     only point where a step can meet out-of-memory: it fails with
//     *mem.OOMError, taking nothing, when the ledger's budget or the device
//     cannot hold the plan.
//   - Session: programs that run one at a time in one shared arena on an
//     engine (Engine.Open): a training step, its evaluation step and the
//     steps of a smaller last batch; an inference step; a decoder's
//     one-token step. Open reserves the arena (as large as the largest
//     program's), the backend's scratch (the largest) and every program
//     at once; Reserve says what that takes without taking it. Every user
//     of compiled programs goes through one (train's Trainer, Predictor and
//     Generator, the ONNX exporter's reference runs, the bench tools), so
//     reserving and binding programs is written once.
//   - Run: one step. It executes the program's instructions over the
//     reserved bytes and allocates nothing (testing.AllocsPerRun is 0 after
//     the first step).
//
// In the life of a step, runtime comes last: the model is built (nn), the
// gradient added (autodiff), the update written (optim), the whole planned
// (compile); then Load reserves exactly Plan.Peak bytes of ledger and Run
// executes each step. The ledger's measured peak equals Plan.Peak byte for
// byte, because both count every buffer as mem.Align(bytes).
package runtime
