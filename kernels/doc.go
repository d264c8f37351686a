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
// ledgers or devices.
//
// Fast versions: the plain loops are the reference. float32 MatMul runs
// Sgemm (BLIS-style packing, a register-blocked AVX-512 or AVX2 micro-kernel
// in Go assembly generated with avo from internal/gen, a persistent worker
// pool; MatMulRef keeps the loop), and the hot float32 elementwise loops
// run AVX2 assembly from internal/genelem for whole blocks of 32 elements.
// Max pooling, col2im and the column sums of SumRows run AVX-512 assembly
// from internal/genwindow (window_amd64.s) where the CPU has it, and the
// convolution, pooling and large elementwise kernels split their work over
// Sgemm's worker pool as jobs (jobs.go; Parallel for callers' loops).
// Assembly is chosen at start-up from the CPU's features (x/sys/cpu) and is
// left out with -tags purego. A fast version must pass the shared suite in
// package kernels/kerneltest, which compares it with the reference on
// random inputs of awkward sizes under the closeness rules documented there;
// the openblas tag routes Sgemm to OpenBLAS for comparisons only.
package kernels
