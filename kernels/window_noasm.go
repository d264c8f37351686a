//go:build purego || !amd64

package kernels

// Without the assembly loops max pooling runs its Go loops.

func poolSIMDChannels[T Float](c int) int                                            { return 0 }
func poolMaxSIMD[T Float](d, xi []T, offs []int, lanes int)                          {}
func poolMaxGradSIMD[T Float](di, xi, gr []T, offs []int, lanes int, acc, relu bool) {}

func col2imRowSIMD[T Float](d, s []T, windows, dstep, sstep, segs, dstride, sstride, n int) bool {
	return false
}

func sumColsSIMD(dst, x []float32, rows, stride, blocks int) bool { return false }

const simdPool = false

func packT12SIMD(d []float32, panel int, src []float32, sstep, positions, groups int) bool {
	return false
}
