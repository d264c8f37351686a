// Package kerneltest is the shared test suite that every implementation of
// headroom's float32 kernels must pass: the reference loops in package
// kernels and, later, the assembly and device versions.
//
// An implementation is described by an Impl, a struct of function-typed
// fields with the signatures of the float32 instantiations of the kernels
// (MatMul, MatMulBF16, Binary, BinaryBroadcast, ReduceSum, the softmax
// family, the unary functions, Transpose, attention, pooling, the
// convolutions, the 16-bit conversions, ...). Run checks every non-nil
// field on deterministic random inputs with awkward sizes (0, 1, 7, 33,
// 1023 and mixes of them), all four MatMul transpose variants with
// accumulate on and off, in-place calls where the kernel allows aliasing,
// and special values (±0, ±Inf, NaN, overflow): against the reference
// kernels (Reference), or, for MatMulBF16 and the window kernels (pooling
// and convolution: geometries with padding, strides 1 and 2, windows larger
// than the input, odd sizes, empty tensors), against direct float64
// definitions in this package that share nothing with the kernels' im2col
// lowering. It also checks that each kernel returns dst, writes nothing
// outside dst (nor outside a convolution's work, which it fills with NaN
// first, so reading stale work fails), leaves its inputs unchanged, and does
// not allocate. CheckMatMul and CheckMatMulBF16 run the product checks on
// one problem of a test's choosing (random or fuzzed shapes).
//
// The suite checks one setting of the kernels at a time; the kernels
// package's tests run it on every tier (assembly on and off, each GEMM
// micro-kernel), each on a kernels.Pool of its own of 1 and of 3 threads
// (the kernels' On versions, wrapped into Impl's signatures; Impl.Threads
// sizes the workspaces that depend on threads), the elementwise tiers
// through per-call wrappers so that Reference stays on the Go loops.
// Reference itself runs on the default pool.
//
// Closeness rules (Tol = 1e-5, float32):
//   - Elementwise results (unary functions and their gradients, Binary and
//     its scalar and broadcast forms, the softmax family, the cross-entropy
//     loss and gradient): |got - want| <= Tol·max(1, |want|). got == want
//     always passes (so infinities must match exactly) and NaN matches only
//     NaN.
//   - Sums whose order an implementation may change (MatMul, ReduceSum,
//     SumRows): |got - want| <= Tol·max(1, S), where S is the sum of the
//     absolute values of the terms: S[i,j] = Σ_p |op(a)[i,p]·op(b)[p,j]|
//     (+ |dst[i,j]| when accumulating) for MatMul and the sum of |x| over the
//     reduced group for the reductions. This is the usual forward error
//     bound of a float32 sum, so blocked or vectorized summation passes and
//     a wrong term does not.
//   - Attention (AttentionForward, AttentionBackward): the sum rule, S being
//     the sum of the absolute values of an output's terms in float64: for
//     o_i, Σ_j P_ij·Z_ij·|v_j| (P from the reference's lse, Z the dropout
//     mask); for dv_j, Σ_i P_ij·Z_ij·|do_i|; for dq and dk, Scale·Σ |k_j|
//     (or |q_i|) times P_ij·(Z_ij·Σ_d |do_i·v_j| + Σ_j' P_ij'·Z_ij'·Σ_d
//     |do_i·v_j'|), which bounds the error of dS term by term; lse by the
//     elementwise rule, so a row that sees no key must give lse = -Inf.
//   - The window kernels: AvgPool2D, the pooling gradients and the
//     convolutions by the sum rule, S summed in float64 by the definition
//     (for a mean, the mean of |x|; for a gradient cell, Σ |dy| routed to
//     it, divided by the window's count for AvgPool2DGrad; for a
//     convolution pass, Σ |x·filter|, |dy·filter| or |dy·x| of its terms).
//     The max-pooling gradients route each dy to the first maximum of its
//     window in row-major order (the first NaN if there is one), so a tie
//     sent elsewhere fails; MaxPool2DReluGrad only where that cell is above
//     0.
//   - BF16 (MatMulBF16 and the BF16 convolutions): want is the product (or
//     convolution pass) in float64 of the operands rounded to bfloat16 as
//     tensor.ToBFloat16 (ties to even), S the sum of the absolute values of
//     those rounded terms (+ |dst| when accumulating), and
//     |got - want| <= Tol·S, with no floor of 1: a product of two bfloat16
//     values is exact in float32, so the only error is the float32 sum's.
//     An unrounded or truncated operand is off by up to 2^-9 relative and
//     fails. x·1 and 1·x must give ToBFloat16(x) exactly (ties, overflow to
//     Inf, NaN).
//   - Exact: ReduceMax and Transpose must equal the reference (NaN matching
//     NaN); MaxPool2D must give the bits of the selected cell (so -0 and +0
//     are told apart; any NaN matches any NaN); the 16-bit conversions must
//     produce the same bits, except that any NaN matches any NaN.
//
// The softmax-family inputs shift one row by +1000, so an implementation must
// subtract the row maximum and form the cross-entropy as
// log Σ e^(x-max) - (x[label] - max) rather than from a rounded logsumexp.
// Bad labels in SoftmaxCrossEntropy(+Grad) must give the same bad index and
// NaN in the same places.
package kerneltest
