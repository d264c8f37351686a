//go:build purego || !amd64

package kernels

// Without the assembly loops every elementwise kernel runs its Go loop.

func binaryVVSIMD[T Float](op BinaryOp, dst, a, b []T) int                    { return 0 }
func binaryVSSIMD[T Float](op BinaryOp, dst, a []T, s T, scalarLeft bool) int { return 0 }
func reluSIMD[T Float](dst, x []T) int                                        { return 0 }
func reluGradSIMD[T Float](dst, x, g []T) int                                 { return 0 }
func sqrtSIMD[T Float](dst, x []T) int                                        { return 0 }
func simdPrefix[T Float](n int) int                                           { return 0 }
func lstmGradSIMD[T Float](dz, dcPrev, acts, dh, dc, cPrev []T, n int) int    { return 0 }

const (
	simdF32   = false
	simdBlock = 32
)
