//go:build !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run ./internal/genwindow -out window_amd64.s -stubs window_stub_amd64.go -pkg kernels

// simdPool reports whether the AVX-512 loops of window_amd64.s run on this
// CPU.
var simdPool = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasBMI2

// poolSIMDChannels returns how many leading channels of a c-channel window
// the assembly loops handle (a multiple of 16), or 0.
func poolSIMDChannels[T Float](c int) int {
	var z T
	if !simdPool || unsafe.Sizeof(z) != 4 {
		return 0
	}
	return c &^ 15
}

// poolMaxSIMD sets d[:lanes] to the selected values of the window whose
// cells start at xi[offs[i]] (lanes from poolSIMDChannels, offs non-empty).
func poolMaxSIMD[T Float](d, xi []T, offs []int, lanes int) {
	poolMax512(asF32(d), asF32(xi), &offs[0], len(offs), lanes/16)
}

// poolMaxGradSIMD routes gr[:lanes] to the selected cells of the window
// whose cells start at xi[offs[i]] (and di[offs[i]]), adding with acc and
// writing every cell of the window without it; with relu, only where the
// selected value is above 0.
func poolMaxGradSIMD[T Float](di, xi, gr []T, offs []int, lanes int, acc, relu bool) {
	poolMaxGrad512(asF32(di), asF32(xi), asF32(gr), &offs[0], len(offs), lanes/16, acc, relu)
}

// col2imRowSIMD adds, for w < windows, k < segs and i < n in that order,
// s[w·sstep + k·sstride + i] into d[w·dstep + k·dstride + i], and returns
// true; or returns false, doing nothing, where the assembly does not run.
// It panics if d or s is too short.
func col2imRowSIMD[T Float](d, s []T, windows, dstep, sstep, segs, dstride, sstride, n int) bool {
	if poolSIMDChannels[T](16) == 0 || windows < 1 || segs < 1 || n < 1 {
		return false
	}
	if (windows-1)*dstep+(segs-1)*dstride+n > len(d) || (windows-1)*sstep+(segs-1)*sstride+n > len(s) {
		panicf("col2im: %d windows of %d segments of %d past the end of d (%d) or s (%d)", windows, segs, n, len(d), len(s))
	}
	col2imRow512(asF32(d), asF32(s), windows, dstep, sstep, segs, dstride, sstride, n)
	return true
}

// sumColsSIMD sets dst[i] = Σ_r x[r·stride + i] for i < 16·blocks, adding
// the rows in order to +0, and returns true; or returns false, doing
// nothing, where the assembly does not run. It panics if x is too short.
func sumColsSIMD(dst, x []float32, rows, stride, blocks int) bool {
	if !simdPool || rows < 1 || blocks < 1 {
		return false
	}
	if len(dst) < 16*blocks || (rows-1)*stride+16*blocks > len(x) {
		panicf("SumRows: %d rows of %d columns (stride %d) past the end of dst (%d) or x (%d)", rows, 16*blocks, stride, len(dst), len(x))
	}
	for blocks > 0 {
		d, s := unsafe.SliceData(dst), unsafe.SliceData(x)
		step := 1
		switch {
		case blocks >= 4:
			step = 4
			sumCols512x4(d, s, rows, stride)
		case blocks >= 2:
			step = 2
			sumCols512x2(d, s, rows, stride)
		default:
			sumCols512x1(d, s, rows, stride)
		}
		blocks -= step
		dst, x = dst[16*step:], x[16*step:]
	}
	return true
}

// packT12SIMD copies, for p < positions and q < groups, the 12 floats
// src[p·sstep + 12q ...] to d[q·panel + 12p ...] and returns true; or
// returns false, doing nothing, where the assembly does not run. It panics
// if d or src is too short.
func packT12SIMD(d []float32, panel int, src []float32, sstep, positions, groups int) bool {
	if !simdPool || positions < 1 || groups < 1 {
		return false
	}
	if (groups-1)*panel+12*positions > len(d) || (positions-1)*sstep+12*groups > len(src) {
		panicf("Conv2DBackpropFilter: packing %d positions of %d groups past the end of d (%d) or src (%d)", positions, groups, len(d), len(src))
	}
	packT12512(unsafe.SliceData(d), panel, unsafe.SliceData(src), sstep, positions, groups)
	return true
}
