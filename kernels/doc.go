// Package kernels holds headroom's reference compute kernels: plain Go loops
// over flat slices that the runtime calls to execute every op of a compiled
// step.
//
// Terms:
//   - Kernel: a function that computes one op over flat, row-major slices.
//     Shapes are passed as []int (outermost first) or as rows/cols for the
//     two-dimensional views; a scalar has the empty shape and one element.
//   - Destination first: the output slice comes first, is written in full
//     (or accumulated into, where the name or a flag says so) and is returned.
//     Kernels never allocate, so a training step that runs only kernels
//     allocates nothing (design principle 3). Index counters for shapes live
//     in fixed [tensor.MaxRank]int arrays on the stack.
//   - Strides: element strides of an operand for each dimension of the
//     iteration shape, 0 where the operand is broadcast; exactly what
//     tensor.BroadcastStrides returns. An operand viewed through its strides
//     must cover exactly its length.
//   - Aliasing: for elementwise kernels (unary, Binary, the softmax family,
//     and BinaryBroadcast/Where/Compare on an operand that has dst's shape)
//     dst may be the same slice as an input, which computes in place. The
//     data-movement kernels (Transpose, Slice, Concat, Gather, ...) need dst
//     disjoint from their inputs.
//   - Pool: the threads a kernel splits its work over and the packing
//     memory of its products (workers.go): worker goroutines, a thread
//     count, the spin-then-park hand-off and the call in progress of each
//     kind. The kernels that split work (the float32 products Sgemm,
//     MatMul and MatMulBF16, the convolutions and their bfloat16 versions,
//     max pooling and its gradients, ReluGrad, SumRows and ReduceSum on
//     large float32 inputs, Moments, attention, Parallel) take the pool as
//     their first argument in their On versions (MatMulOn(p, dst, a, b,
//     ...)), the destination next. Two pools share no mutable state; calls
//     on one pool from several goroutines run one after another. NewPool
//     starts a pool's workers and Close stops them.
//   - Scratch: packing memory for a pool's products that the caller
//     reserves and charges to its own ledger, one region per thread
//     (scratch.go); Pool.SetScratch gives it to the pool. A product whose
//     blocks it does not hold packs into buffers of the thread's own on the
//     Go heap instead, and Pool.ScratchMisses counts it.
//   - Default pool: one pool made with the package, whose threads
//     (GOMAXPROCS, or SetThreads) start at first use, behind the
//     package-level kernels (MatMul, Conv2D, Parallel, ...; default.go): the
//     convenience for tests, tools and one-off calls. Engines do not use
//     it; SetThreads and Threads size it. It has no scratch: a Scratch is
//     given to a Pool, never installed for the whole process.
//   - Bad data is not a programmer error: labels and indices come from data,
//     so SoftmaxCrossEntropy, Gather, ScatterAdd and OneHot report or absorb
//     an out-of-range value instead of panicking. Mismatched lengths or
//     shapes are programmer errors and panic with a message that starts with
//     "kernels: " and names the kernel.
//
// Element types: Float is float32 or float64 (and types defined on them);
// Number adds int32, int64 and uint8. Bool tensors are uint8 0/1. Where a
// float32 kernel needs a transcendental function or a long sum it computes in
// float64 and rounds once, so float32 results are within a few ulps of the
// correctly rounded value.
//
// In the life of a step, kernels sit at the bottom: the compiler has already
// planned every buffer, and the runtime's executor calls one kernel per
// instruction with slices of its arena. Nothing here knows about graphs,
// ledgers or devices. The pool comes from the backend: the CPU backend
// (backend/cpu.Target) owns one Pool, sized by its one thread setting and
// started when a program is first bound; when a plan is bound, the backend
// carves the plan's scratch span (on the engine's ledger, sized with
// PackFloats and ConvPackFloats for the plan's threads) into a Scratch,
// which the program gives its pool when it runs (Pool.SetScratch) and
// takes back when it is closed (Pool.ReleaseScratch); every instruction of
// a step runs its kernel on that pool; and closing the backend closes the
// pool. So a trainer and a predictor in one process each run on their own
// threads and pack into their own memory.
//
// Fast versions: the plain loops are the reference. float32 MatMul runs
// Sgemm (BLIS-style packing, a register-blocked AVX-512 or AVX2 micro-kernel
// in Go assembly generated with avo from internal/gen, the persistent
// threads of a Pool; MatMulRef keeps the loop), and the hot float32 elementwise loops
// run AVX2 assembly from internal/genelem for whole blocks of 32 elements.
// Max pooling, col2im and the column sums of SumRows run AVX-512 assembly
// from internal/genwindow (window_amd64.s) where the CPU has it, and the
// convolution, pooling and large elementwise kernels split their work over
// the same Pool as jobs (jobs.go; ParallelOn for callers' loops).
// Assembly is chosen at start-up from the CPU's features (x/sys/cpu) and is
// left out with -tags purego. A fast version must pass the shared suite in
// package kernels/kerneltest, which compares it with the reference on
// random inputs of awkward sizes under the closeness rules documented there;
// the openblas tag routes Sgemm to OpenBLAS for comparisons only.
//
// MatMulBF16 is MatMul with the operands rounded to bfloat16 as they are
// packed and the products summed in float32 (the mixed_bfloat16 policy's
// products): the same loops as Sgemm with a tier whose micro-kernel uses
// AVX512_BF16's VDPBF16PS, two products per float32 lane (bgemm.go,
// generated by internal/genbf16), about 1.85x Sgemm's GFLOP/s on Zen 4;
// elsewhere the float32 kernel on rounded panels. The casts between float32
// and float16/bfloat16 (the mixed-precision policies' saved activations) run
// F16C, AVX2 or AVX-512 loops from internal/genconvert, bit-identical to
// tensor.ToFloat16 and tensor.ToBFloat16.
package kernels
