//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

//go:generate go run ./internal/gen -out gemm_amd64.s -stubs gemm_stub_amd64.go -pkg kernels

// gemmTiers are the Sgemm micro-kernels this CPU can run, fastest first,
// chosen once at start-up from the CPU's features (as the OS enables them,
// which golang.org/x/sys/cpu checks):
//   - AVX-512 (12×32: 24 zmm accumulators, 2 for B, 6 for broadcasts of A;
//     and 12×16 for products at most 16 columns wide), with assembly packing;
//     it needs AVX512F, DQ and VL and BMI2 (the "Requires" lines of
//     gemm_amd64.s), which every AVX-512 CPU has;
//   - AVX2+FMA (6×16: 12 ymm accumulators), with Go packing;
//   - the Go loop, always.
var gemmTiers = func() []gemmTier {
	var t []gemmTier
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL && cpu.X86.HasBMI2 {
		t = append(t, gemmTier{name: "avx512", mr: 12, nr: 32, kernel: sgemmTileAVX512,
			gatherA: gather12AVX512, scatterA: scatter12AVX512, gatherB: gather32AVX512, scatterB: scatter32AVX512,
			blk: gemmBlocking{kc: gemmKC, mc: gemmMC, nc: gemmNC},
			narrow: &gemmTier{name: "avx512-n16", mr: 12, nr: 16, kernel: sgemmTileAVX512N16,
				gatherA: gather12AVX512, scatterA: scatter12AVX512, gatherB: gather16AVX512, scatterB: scatter16AVX512,
				blk: gemmBlocking{kc: 256, mc: gemmMC, nc: gemmNC}}})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		t = append(t, gemmTier{name: "avx2", mr: 6, nr: 16, kernel: sgemmTileAVX2,
			blk: gemmBlocking{kc: 256, mc: 480, nc: 768}, bInL1: true})
	}
	return append(t, gemmGo)
}()

// sgemmTileAVX512 checks the slices cover the 12×32 tile, then runs the
// assembly.
func sgemmTileAVX512(k int, a, b, c []float32, ldc int, load bool) {
	_, _, _ = a[12*k-1], b[32*k-1], c[11*ldc+31]
	sgemmKernelAVX512(k, &a[0], &b[0], &c[0], ldc, load)
}

// sgemmTileAVX512N16 checks the slices cover the 12×16 tile, then runs the
// assembly.
func sgemmTileAVX512N16(k int, a, b, c []float32, ldc int, load bool) {
	_, _, _ = a[12*k-1], b[16*k-1], c[11*ldc+15]
	sgemmKernelAVX512N16(k, &a[0], &b[0], &c[0], ldc, load)
}

// sgemmTileAVX2 checks the slices cover the 6×16 tile, then runs the
// assembly.
func sgemmTileAVX2(k int, a, b, c []float32, ldc int, load bool) {
	_, _, _ = a[6*k-1], b[16*k-1], c[5*ldc+15]
	sgemmKernelAVX2(k, &a[0], &b[0], &c[0], ldc, load)
}

// The AVX-512 packing routines, after checking that the slices cover the
// micro-panel d [kc][w] and the valid rows or columns of src they read
// (1 <= valid <= w).

func gather12AVX512(d, src []float32, ld, kc, valid int) {
	_, _ = d[12*kc-1], src[(kc-1)*ld+valid-1]
	sgemmPackCopy12AVX512(&d[0], &src[0], ld, kc, valid)
}

func gather16AVX512(d, src []float32, ld, kc, valid int) {
	_, _ = d[16*kc-1], src[(kc-1)*ld+valid-1]
	sgemmPackCopy16AVX512(&d[0], &src[0], ld, kc, valid)
}

func gather32AVX512(d, src []float32, ld, kc, valid int) {
	_, _ = d[32*kc-1], src[(kc-1)*ld+valid-1]
	sgemmPackCopy32AVX512(&d[0], &src[0], ld, kc, valid)
}

func scatter12AVX512(d, src []float32, ld, kc, valid int) {
	_, _ = d[12*kc-1], src[(valid-1)*ld+kc-1]
	sgemmPackTransAVX512(&d[0], &src[0], ld, kc, 12, valid, 12)
}

func scatter16AVX512(d, src []float32, ld, kc, valid int) {
	_, _ = d[16*kc-1], src[(valid-1)*ld+kc-1]
	sgemmPackTransAVX512(&d[0], &src[0], ld, kc, 16, valid, 16)
}

// scatter32AVX512 transposes the panel as two 16-wide halves; a half with no
// valid rows is written as zeros.
func scatter32AVX512(d, src []float32, ld, kc, valid int) {
	_, _ = d[32*kc-1], src[(valid-1)*ld+kc-1]
	lo := min(valid, 16)
	sgemmPackTransAVX512(&d[0], &src[0], ld, kc, 32, lo, 16)
	if valid > 16 {
		sgemmPackTransAVX512(&d[16], &src[16*ld], ld, kc, 32, valid-16, 16)
	} else {
		sgemmPackTransAVX512(&d[16], &src[0], ld, kc, 32, 0, 16)
	}
}
