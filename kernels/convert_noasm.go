//go:build purego || !amd64

package kernels

import "github.com/headroom-ml/headroom/tensor"

// Without convert_amd64.s the 16-bit float casts run their Go loops.

var (
	convF16Max, convBF16Max     = 0, 0
	convF16Lanes, convBF16Lanes = 0, 0
)

func f32ToF16SIMD(dst []tensor.F16, src []float32) int   { return 0 }
func f16ToF32SIMD(dst []float32, src []tensor.F16) int   { return 0 }
func f32ToBF16SIMD(dst []tensor.BF16, src []float32) int { return 0 }
func bf16ToF32SIMD(dst []float32, src []tensor.BF16) int { return 0 }
