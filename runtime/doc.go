// Package runtime reserves the memory of compiled programs and runs them.
//
// Terms:
//   - Engine: one device's allocator and ledger, and the Variables (weights,
//     gradients, optimizer state) that programs on it share. A training
//     program and an evaluation program loaded on the same Engine read the
//     same weights.
//   - Executable: a Program loaded on an Engine. Load reserves, once, the
//     program's arena and its persistent buffers (inputs, constants,
//     outputs), and creates the variables that do not exist yet. Load is the
//     only point where a step can meet out-of-memory: it fails with
//     *mem.OOMError, taking nothing, when the ledger's budget or the device
//     cannot hold the plan.
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
