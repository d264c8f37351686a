// Package exec is the instruction set that compile lowers a graph to and
// runtime runs: one Instr per op application, with every shape, stride and
// size precomputed, bound to byte views of planned buffers and executed
// without allocating.
//
// It sits between compile (which emits Instrs, and uses Run to fold
// constants) and runtime (which binds Instrs to its reservation and runs
// them every step). Kernels come from package kernels; exec only selects one
// by op and dtype and hands it typed views of the bound bytes.
//
// Errors at run time are data errors only (a label or index out of range);
// they come back as *RunError naming the op, its owner and the user's call
// site. Everything else was checked when the graph was built.
package exec
