//go:build !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/headroom-ml/headroom/tensor"
)

//go:generate go run ./internal/genconvert -out convert_amd64.s -stubs convert_stub_amd64.go -pkg kernels

// The widest tier of convert_amd64.s this CPU runs, in float32 lanes a
// vector: 16 (zmm: AVX-512F, and AVX-512BW for the bfloat16 pack), 8 (ymm:
// F16C for float16, AVX2 for bfloat16) or 0 (the Go loops only).
// convF16Lanes and convBF16Lanes are what the casts use; tests lower them
// to check every tier against the Go loops.
var (
	convF16Max  = cvtLanes(cpu.X86.HasAVX && cpu.X86.HasF16C, cpu.X86.HasAVX512F)
	convBF16Max = cvtLanes(cpu.X86.HasAVX2, cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW)

	convF16Lanes  = convF16Max
	convBF16Lanes = convBF16Max
)

// cvtLanes returns the widest tier given whether the ymm and the zmm
// instructions are there (x/sys/cpu also checks that the OS saves the
// registers).
func cvtLanes(ymm, zmm bool) int {
	switch {
	case ymm && zmm:
		return 16
	case ymm:
		return 8
	}
	return 0
}

// Each xxxSIMD converts the longest prefix of src that is a whole number of
// the tier's blocks (4 vectors: 32 or 64 elements) into dst and returns its
// length; the caller finishes the rest with the Go loop. len(dst) >=
// len(src).

func f32ToF16SIMD(dst []tensor.F16, src []float32) int {
	d, s := (*uint16)(unsafe.Pointer(unsafe.SliceData(dst))), unsafe.SliceData(src)
	switch convF16Lanes {
	case 16:
		n := len(src) &^ 63
		f32ToF16x16(d, s, n)
		return n
	case 8:
		n := len(src) &^ 31
		f32ToF16x8(d, s, n)
		return n
	}
	return 0
}

func f16ToF32SIMD(dst []float32, src []tensor.F16) int {
	d, s := unsafe.SliceData(dst), (*uint16)(unsafe.Pointer(unsafe.SliceData(src)))
	switch convF16Lanes {
	case 16:
		n := len(src) &^ 63
		f16ToF32x16(d, s, n)
		return n
	case 8:
		n := len(src) &^ 31
		f16ToF32x8(d, s, n)
		return n
	}
	return 0
}

func f32ToBF16SIMD(dst []tensor.BF16, src []float32) int {
	d, s := (*uint16)(unsafe.Pointer(unsafe.SliceData(dst))), unsafe.SliceData(src)
	switch convBF16Lanes {
	case 16:
		n := len(src) &^ 63
		f32ToBF16x16(d, s, n)
		return n
	case 8:
		n := len(src) &^ 31
		f32ToBF16x8(d, s, n)
		return n
	}
	return 0
}

func bf16ToF32SIMD(dst []float32, src []tensor.BF16) int {
	d, s := unsafe.SliceData(dst), (*uint16)(unsafe.Pointer(unsafe.SliceData(src)))
	switch convBF16Lanes {
	case 16:
		n := len(src) &^ 63
		bf16ToF32x16(d, s, n)
		return n
	case 8:
		n := len(src) &^ 31
		bf16ToF32x8(d, s, n)
		return n
	}
	return 0
}
