// Package kerneltest is the shared test suite that every implementation of
// headroom's float32 kernels must pass: the reference loops in package
// kernels and, later, the assembly and device versions.
//
// An implementation is described by an Impl, a struct of function-typed
// fields with the signatures of the float32 instantiations of the kernels
// (MatMul, Binary, BinaryBroadcast, ReduceSum, the softmax family, the
// unary functions, Transpose, the 16-bit conversions, ...). Run checks every
// non-nil field against the reference kernels (Reference) on deterministic
// random inputs with awkward sizes (0, 1, 7, 33, 1023 and mixes of them),
// all four MatMul transpose variants with accumulate on and off, in-place
// calls where the kernel allows aliasing, and special values (±0, ±Inf,
// NaN, overflow). It also checks that each kernel returns dst, writes
// nothing outside dst, leaves its inputs unchanged, and does not allocate.
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
//   - Exact: ReduceMax and Transpose must equal the reference (NaN matching
//     NaN); the 16-bit conversions must produce the same bits, except that
//     any NaN matches any NaN.
//
// The softmax-family inputs shift one row by +1000, so an implementation must
// subtract the row maximum and form the cross-entropy as
// log Σ e^(x-max) - (x[label] - max) rather than from a rounded logsumexp.
// Bad labels in SoftmaxCrossEntropy(+Grad) must give the same bad index and
// NaN in the same places.
package kerneltest
