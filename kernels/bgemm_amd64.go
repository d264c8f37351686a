//go:build !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run ./internal/genbf16 -out bgemm_amd64.s -stubs bgemm_stub_amd64.go -pkg kernels

// bgemmAsm is the AVX512_BF16 tier of MatMulBF16 (bgemm.go): a 12×32 tile,
// and 12×16 for products at most 16 columns wide, with assembly packing
// that rounds and pairs. It needs AVX512_BF16 (VDPBF16PS), AVX512F, BW
// (VPERMT2W) and DQ (VFPCLASSPS), and BMI2 (BZHI), as the OS enables them
// (golang.org/x/sys/cpu checks); nil without them.
var bgemmAsm = func() *gemmTier {
	if !(cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ && cpu.X86.HasBMI2) {
		return nil
	}
	return &gemmTier{name: "avx512bf16", mr: 12, nr: 32, kernel: bgemmTile12x32,
		gatherA: bgemmGather12, scatterA: bgemmScatter12, gatherB: bgemmGather32, scatterB: bgemmScatter32,
		blk: gemmBlocking{kc: bgemmKC, mc: bgemmMC, nc: bgemmNC},
		narrow: &gemmTier{name: "avx512bf16-n16", mr: 12, nr: 16, kernel: bgemmTile12x16,
			gatherA: bgemmGather12, scatterA: bgemmScatter12, gatherB: bgemmGather16, scatterB: bgemmScatter16,
			blk: gemmBlocking{kc: bgemmKC, mc: bgemmMC, nc: bgemmNC}}}
}()

// pairsOf views the packing buffer x as bfloat16 pairs.
func pairsOf(x []float32) *uint32 { return (*uint32)(unsafe.Pointer(&x[0])) }

// bgemmTile12x32 checks the slices cover the 12×32 tile and its ceil(k/2)
// pairs, then runs the assembly.
func bgemmTile12x32(k int, a, b, c []float32, ldc int, load bool) {
	kp := (k + 1) / 2
	_, _, _ = a[12*kp-1], b[32*kp-1], c[11*ldc+31]
	bgemmKernel12x32(kp, pairsOf(a), pairsOf(b), &c[0], ldc, load)
}

// bgemmTile12x16 checks the slices cover the 12×16 tile and its ceil(k/2)
// pairs, then runs the assembly.
func bgemmTile12x16(k int, a, b, c []float32, ldc int, load bool) {
	kp := (k + 1) / 2
	_, _, _ = a[12*kp-1], b[16*kp-1], c[11*ldc+15]
	bgemmKernel12x16(kp, pairsOf(a), pairsOf(b), &c[0], ldc, load)
}

// The packing routines of the tier, after checking that the slices cover the
// micro-panel d ([ceil(kc/2)][w] pairs) and the valid rows or columns of src
// they read (1 <= valid <= w). gather* pack steps that are contiguous in the
// source, scatter* rows that are (gemm_pack.go).

func bgemmGather12(d, src []float32, ld, kc, valid int) {
	_, _ = d[12*((kc+1)/2)-1], src[(kc-1)*ld+valid-1]
	bgemmPackPairs12(pairsOf(d), &src[0], ld, kc, valid)
}

func bgemmGather16(d, src []float32, ld, kc, valid int) {
	_, _ = d[16*((kc+1)/2)-1], src[(kc-1)*ld+valid-1]
	bgemmPackPairs16(pairsOf(d), &src[0], ld, kc, valid)
}

func bgemmGather32(d, src []float32, ld, kc, valid int) {
	_, _ = d[32*((kc+1)/2)-1], src[(kc-1)*ld+valid-1]
	bgemmPackPairs32(pairsOf(d), &src[0], ld, kc, valid)
}

func bgemmScatter12(d, src []float32, ld, kc, valid int) {
	_, _ = d[12*((kc+1)/2)-1], src[(valid-1)*ld+kc-1]
	bgemmPackPairsTrans(pairsOf(d), &src[0], ld, kc, 12, valid, 12)
}

func bgemmScatter16(d, src []float32, ld, kc, valid int) {
	_, _ = d[16*((kc+1)/2)-1], src[(valid-1)*ld+kc-1]
	bgemmPackPairsTrans(pairsOf(d), &src[0], ld, kc, 16, valid, 16)
}

// bgemmScatter32 packs the panel as two 16-lane halves; a half with no valid
// rows is written as zeros.
func bgemmScatter32(d, src []float32, ld, kc, valid int) {
	_, _ = d[32*((kc+1)/2)-1], src[(valid-1)*ld+kc-1]
	bgemmPackPairsTrans(pairsOf(d), &src[0], ld, kc, 32, min(valid, 16), 16)
	if valid > 16 {
		bgemmPackPairsTrans(pairsOf(d[16:]), &src[16*ld], ld, kc, 32, valid-16, 16)
	} else {
		bgemmPackPairsTrans(pairsOf(d[16:]), &src[0], ld, kc, 32, 0, 16)
	}
}
