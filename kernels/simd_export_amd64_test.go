//go:build !purego

package kernels

// Test hooks for the assembly switches other than the GEMM and attention
// tiers: the AVX2 elementwise loops, the AVX-512 window loops and the
// 16-bit casts' vector tiers.

// SIMD is a setting of those switches.
type SIMD struct {
	Elementwise  bool // elementwise_amd64.s: Binary's +-*/, Relu, ReluGrad, Sqrt
	Window       bool // window_amd64.s: max pooling, col2im, SumRows, the filter gradient's packing
	ConvertLanes int  // convert_amd64.s: the widest cast tier, 0 (the Go loops), 8 or 16
	// Transcendental: trans.go's vector paths (Sigmoid, Tanh, the softmax
	// cross-entropy)
	Transcendental bool
	Norm           bool // layernorm_amd64.s: the float32 layer norm's loops
}

// simdMax is what this CPU and build run.
var simdMax = SIMD{Elementwise: simdF32, Window: simdPool, ConvertLanes: max(convF16Max, convBF16Max), Transcendental: transVector || attnRows.name != "go", Norm: lnVector}

// MaxSIMD returns the widest setting this CPU and build run.
func MaxSIMD() SIMD { return simdMax }

// SetSIMD sets the switches to s, capped at MaxSIMD, and returns the
// previous setting. It does not allocate, so a per-call wrapper can switch a
// tier on around one kernel call: defer SetSIMD(SetSIMD(s)).
func SetSIMD(s SIMD) (old SIMD) {
	old = SIMD{Elementwise: simdF32, Window: simdPool, ConvertLanes: max(convF16Lanes, convBF16Lanes), Transcendental: simdTrans, Norm: simdNorm}
	simdF32 = s.Elementwise && simdMax.Elementwise
	simdPool = s.Window && simdMax.Window
	convF16Lanes, convBF16Lanes = min(s.ConvertLanes, convF16Max), min(s.ConvertLanes, convBF16Max)
	simdTrans = s.Transcendental && simdMax.Transcendental
	simdNorm = s.Norm && simdMax.Norm
	return old
}
