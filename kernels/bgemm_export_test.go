package kernels

// Test hooks for MatMulBF16; each returns a function that restores the
// previous setting.

// BgemmHasAsm reports whether this CPU and build have the AVX512_BF16 tier.
func BgemmHasAsm() bool { return bgemmAsm != nil }

// UseBgemmAsm makes MatMulBF16 run the AVX512_BF16 tier (on, where there is
// one) or the fallback on the active float32 tier (off).
func UseBgemmAsm(on bool) (restore func()) {
	old := bgemmUseAsm
	bgemmUseAsm = on && bgemmAsm != nil
	return func() { bgemmUseAsm = old }
}
