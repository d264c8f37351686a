package kernels

// Test hooks for Sgemm; each returns a function that restores the previous
// setting.

// GemmTierNames lists the micro-kernel tiers this CPU can run, fastest first.
func GemmTierNames() []string {
	var s []string
	for _, t := range gemmTiers {
		s = append(s, t.name)
	}
	return s
}

// UseGemmTier makes Sgemm use the named tier.
func UseGemmTier(name string) (restore func()) {
	old := gemmActive
	for _, t := range gemmTiers {
		if t.name == name {
			gemmActive = t
			return func() { gemmActive = old }
		}
	}
	panic("no gemm tier " + name)
}

// UseGemmBlocking makes Sgemm use smaller cache blocks, so that small
// matrices run through every loop. mc must be a multiple of 12 and nc of 32.
func UseGemmBlocking(kc, mc, nc int) (restore func()) {
	if kc < 1 || kc > gemmKC || mc < 12 || mc > gemmMC || mc%12 != 0 || nc < 32 || nc > gemmNC || nc%32 != 0 {
		panic("bad gemm blocking")
	}
	old := gemmBlockOverride
	gemmBlockOverride = &gemmBlocking{kc: kc, mc: mc, nc: nc}
	return func() { gemmBlockOverride = old }
}

// UseMatMulRef routes float32 MatMul to the reference loops, so the shared
// suite's Reference is the reference while Sgemm is tested.
func UseMatMulRef() (restore func()) {
	matmulFast = false
	return func() { matmulFast = true }
}

// UseThreads sets the default pool's thread count.
func UseThreads(n int) (restore func()) {
	old := Threads()
	SetThreads(n)
	return func() { SetThreads(old) }
}

// WithoutExternalSgemm runs Sgemm on the kernels here even in an openblas
// build.
func WithoutExternalSgemm() (restore func()) {
	old := sgemmExternal
	sgemmExternal = nil
	return func() { sgemmExternal = old }
}

// SplitAlways makes Sgemm split every product over all threads (as far as
// it has tiles), however small, so that tests of small products exercise
// the pool.
func SplitAlways() (restore func()) {
	old := gemmMinFlops
	gemmMinFlops = 0
	return func() { gemmMinFlops = old }
}

// UsePackFromImage turns the products that pack their A panels straight
// from the image (Conv2D, Conv2DBackpropFilter in float32) on or off.
func UsePackFromImage(on bool) (restore func()) {
	old := packFromImage
	packFromImage = on
	return func() { packFromImage = old }
}
