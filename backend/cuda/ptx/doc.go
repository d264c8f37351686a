// Package ptx renders the instructions of a compiled program
// (compile.Instr) as PTX, NVIDIA's virtual instruction set, in Go: no
// nvcc at build or run time. The CUDA backend loads the text with
// cuModuleLoadData and the driver compiles it for the GPU it finds, as
// tinygrad's PTX renderer does.
//
// Terms:
//   - Arch: what a module is written for, .target and .version, chosen
//     from the device's compute capability and the driver's CUDA version
//     (ArchFor).
//   - Kernel: one module holding one .entry, its parameters all .u64
//     device addresses; its name is its family and a hash of its text, so
//     that instructions with the same shapes share one kernel (a
//     recurrence's time steps pass their offsets as arguments, not
//     constants).
//   - Step: a kernel launch (a grid of Block-thread blocks over
//     arguments, each an operand of the instruction and a byte offset) or
//     a product on cuBLAS (Gemm, row-major as kernels.MatMul).
//   - Lowered: an instruction's steps, the workspace they need (what
//     compile plans for it: im2col matrices, bfloat16 copies of operands,
//     a layer norm's unread statistics) and whether its kernels check data
//     (an error record).
//
// What is rendered: the elementwise ops and their gradients, fused
// chains (one thread per element, every leaf read once, the chain in
// registers), comparisons, where, casts (float32 with bfloat16, float16,
// int32, uint8, bool), reductions, the softmax family and cross-entropy,
// data movement (transpose, broadcast, concat, slice, unslice, gather,
// scatter-add, one-hot, assign), convolutions and their gradients as
// im2col (or a col2im gather) and cuBLAS, max pooling and its gradient,
// BatchNormalization's moments, layer norm and its gradient, gelu,
// attention forward (one block per query row, the log-sum-exp kept) and
// backward (three kernels, no atomics), and LSTM and GRU steps and their
// gradients (one thread per unit of a row). Matrix products go to cuBLAS.
// Each kernel computes what the host's kernel computes (backend/cpu and
// package kernels), operation for operation where the host rounds in
// float32 and in float64 where the host does: exp, log, tanh and the
// sigmoid are float64 polynomials (PTX's ex2.approx and lg2.approx are a
// few ulp off), every float operation carries .rn so that ptxas never
// contracts a product and a sum into an fma. Where the host sums in a
// fixed order and the GPU cannot cheaply (block reductions in float64,
// the atomic adds of scatter-add and the max pool's gradient) results
// agree to float32 rounding, not bit for bit.
//
// Checks, in the test command (backend/cuda's and this package's tests):
// every kernel of the six reference models assembles with NVIDIA's ptxas
// for sm_80 and sm_90 with no spill; every kind of kernel runs, as its
// exact text, in the PTX interpreter (package interp) on random inputs of
// odd sizes and matches the host's kernel.
//
// In the life of a step: compile asks the CUDA backend (backend/cuda) for
// each instruction's workspace, which is this package's rendering; the
// backend renders each instruction again when it binds the program, loads
// the kernels once and launches the steps in order on a stream.
package ptx
