// Package interp runs PTX on the CPU: an interpreter in Go of exactly the
// subset of PTX that package ptx writes, so that the text the CUDA driver
// would load (cuModuleLoadData) is what runs in tests, on machines with
// no GPU, and what the CUDA backend's fake driver launches.
//
// Terms:
//   - Module, Func: a parsed module (Parse) and its entries: .u64
//     parameters, register vectors, one .shared array, labels and
//     instructions with optional predicate guards.
//   - Program: an entry decoded for running (Decode): every register,
//     immediate and parameter is a slot of a thread's register file, every
//     instruction a Go function over it. Anything outside the subset
//     (an unknown opcode, a rounding other than .rn, .approx, .ftz, a
//     state space other than .global, .shared and .param) is refused with
//     an error naming the line.
//   - Launch: a grid of blocks of threads over device memory given as
//     Buffers (device address and bytes). Blocks run on a few goroutines;
//     the threads of a block run one after another, each until it waits at
//     bar.sync or exits, then again from the barrier, so a block's
//     barriers hold exactly.
//
// Faults, reported as *Error naming the kernel, block, thread, line and
// instruction: an access of global memory outside every buffer of the
// launch (out of bounds); a shared-memory access outside the array; a
// shared-memory race: a byte one thread writes and another reads or
// writes between the same two barriers, found whatever order the threads
// run in (each byte records its writer and readers since the last
// barrier); a barrier some threads of the block never reach because they
// returned; integer division by zero; a thread running 2^28 instructions
// without reaching a barrier or its end.
//
// Arithmetic is IEEE as PTX specifies it for the forms the renderer
// writes: float32 and float64 operations rounded to nearest even with
// subnormals kept (Go's float32 and float64 operations round the same),
// fma.rn.f64 exactly (math.FMA), conversions with their rounding modes and
// saturation, float16 by IEEE rounding to nearest even. fma.rn.f32 is
// computed through float64 (exact product, then two roundings), which can
// differ from the hardware in the last bit of rare ties; the renderer
// writes none.
//
// In the life of a step, the interpreter stands where the GPU would: the
// numerics tests of package ptx run every kind of rendered kernel on it
// against the host's kernels, and backend/cuda's fake driver runs whole
// training steps on it.
package interp
