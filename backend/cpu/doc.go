// Package cpu is the host backend: it runs compile's instructions with the
// kernels of package kernels over host memory (mem.CPU). It implements
// runtime.Backend, and so compile.Target.
//
// In the life of a step it comes last: compile asks its Target how each
// instruction runs here (Lower: how a fused chain splits over the kernels'
// threads, how much workspace a convolution needs; Fuses: which fusions it
// runs; Scratch: the persistent packing buffers of its matrix products;
// Evaluate: constant folding with the very instructions the runtime will
// run), then runtime reserves the plan on its device and Bind binds every
// instruction to typed views of the reserved bytes. A bound step runs
// without allocating.
//
// Kernels come from package kernels; this package only selects one by op
// and dtype and hands it typed views of the bound bytes. Errors at run time
// are data errors only (a label or index out of range) or a collective that
// failed; they come back as *runtime.RunError naming the op, its owner and
// the user's call site (a collective's own error wrapped inside it).
// Everything else was checked when the graph was built.
//
// Package backend/sim reuses this package's instructions on a simulated
// device: the same kernels against device-addressed memory, with explicit
// copies in and out.
package cpu
