//go:build !amd64 || purego

package kernels

// bgemmAsm is nil: this build has no AVX512_BF16 tier, so MatMulBF16 runs
// its fallback (bgemm.go).
var bgemmAsm *gemmTier
