//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

//go:generate go run ./internal/gengelu -out gelu_amd64.s -stubs gelu_stub_amd64.go -pkg kernels

// geluVector reports whether this CPU runs the AVX-512 GELU loops (F for
// VSCALEFPS and VRNDSCALEPS).
var geluVector = cpu.X86.HasAVX512F

// geluBlocks sets dst[:m] to Gelu(x[:m]) (or, with g, to its gradient
// times g) in AVX-512 for the largest multiple m of 16 elements and returns
// m (0 on other CPUs).
func geluBlocks(dst, x, g []float32) int {
	m := len(dst) &^ 15
	if !geluVector || m == 0 {
		return 0
	}
	if g == nil {
		geluFwd512(&dst[0], &x[0], m)
	} else {
		geluBwd512(&dst[0], &x[0], &g[0], m)
	}
	return m
}
