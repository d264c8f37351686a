package kernels

// The default pool and the package-level kernels over it: the convenience
// for tests, tools and one-off calls. Engines do not use it: each owns a
// Pool (NewPool), so that two engines in one process neither share threads
// nor pack into each other's Scratch. Every function of this file is its
// On version (or Pool method) on the default pool, and nothing else in the
// package touches the default pool but AttentionForwardWorkspace and
// AttentionBackwardWorkspace, which read its Threads when given threads <= 0.

// defaultPool is the pool of the package-level kernels. It is made with the
// package, without threads: its workers (runtime.GOMAXPROCS(0) threads, or
// SetThreads) start at its first use.
var defaultPool = &Pool{caller: newParker()}

// Sgemm is SgemmOn on the default pool.
func Sgemm(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
	return SgemmOn(defaultPool, dst, a, b, m, n, k, transA, transB, accumulate)
}

// MatMul is MatMulOn on the default pool.
func MatMul[T Float](dst, a, b []T, m, n, k int, transA, transB, accumulate bool) []T {
	return MatMulOn(defaultPool, dst, a, b, m, n, k, transA, transB, accumulate)
}

// MatMulBF16 is MatMulBF16On on the default pool.
func MatMulBF16(dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
	return MatMulBF16On(defaultPool, dst, a, b, m, n, k, transA, transB, accumulate)
}

// Conv2D is Conv2DOn on the default pool.
func Conv2D[T Float](dst, x, filter, work []T, g ConvGeom, f int) []T {
	return Conv2DOn(defaultPool, dst, x, filter, work, g, f)
}

// Conv2DBackpropInput is Conv2DBackpropInputOn on the default pool.
func Conv2DBackpropInput[T Float](dx, dy, filter, work []T, g ConvGeom, f int) []T {
	return Conv2DBackpropInputOn(defaultPool, dx, dy, filter, work, g, f)
}

// Conv2DBackpropFilter is Conv2DBackpropFilterOn on the default pool.
func Conv2DBackpropFilter[T Float](dfilter, x, dy, work []T, g ConvGeom, f int) []T {
	return Conv2DBackpropFilterOn(defaultPool, dfilter, x, dy, work, g, f)
}

// Conv2DBF16 is Conv2DBF16On on the default pool.
func Conv2DBF16(dst, x, filter, work []float32, g ConvGeom, f int) []float32 {
	return Conv2DBF16On(defaultPool, dst, x, filter, work, g, f)
}

// Conv2DBackpropInputBF16 is Conv2DBackpropInputBF16On on the default pool.
func Conv2DBackpropInputBF16(dx, dy, filter, work []float32, g ConvGeom, f int) []float32 {
	return Conv2DBackpropInputBF16On(defaultPool, dx, dy, filter, work, g, f)
}

// Conv2DBackpropFilterBF16 is Conv2DBackpropFilterBF16On on the default
// pool.
func Conv2DBackpropFilterBF16(dfilter, x, dy, work []float32, g ConvGeom, f int) []float32 {
	return Conv2DBackpropFilterBF16On(defaultPool, dfilter, x, dy, work, g, f)
}

// MaxPool2D is MaxPool2DOn on the default pool.
func MaxPool2D[T Float](dst, x []T, g ConvGeom) []T {
	return MaxPool2DOn(defaultPool, dst, x, g)
}

// MaxPool2DGrad is MaxPool2DGradOn on the default pool.
func MaxPool2DGrad[T Float](dx, x, dy []T, g ConvGeom) []T {
	return MaxPool2DGradOn(defaultPool, dx, x, dy, g)
}

// MaxPool2DReluGrad is MaxPool2DReluGradOn on the default pool.
func MaxPool2DReluGrad[T Float](dx, x, dy []T, g ConvGeom) []T {
	return MaxPool2DReluGradOn(defaultPool, dx, x, dy, g)
}

// ReluGrad is ReluGradOn on the default pool.
func ReluGrad[T Float](dst, x, g []T) []T {
	return ReluGradOn(defaultPool, dst, x, g)
}

// ReduceSum is ReduceSumOn on the default pool.
func ReduceSum[T Float](dst, x []T, xShape, dstStrides []int) []T {
	return ReduceSumOn(defaultPool, dst, x, xShape, dstStrides)
}

// SumRows is SumRowsOn on the default pool.
func SumRows[T Float](dst, x []T, rows, cols int) []T {
	return SumRowsOn(defaultPool, dst, x, rows, cols)
}

// Moments is MomentsOn on the default pool.
func Moments[T Float](dst, x []T, rows, cols, block int, work []float64) []T {
	return MomentsOn(defaultPool, dst, x, rows, cols, block, work)
}

// AttentionForward is AttentionForwardOn on the default pool.
func AttentionForward[T Float](o, lse, q, k, v []T, p AttentionParams, work []T) []T {
	return AttentionForwardOn(defaultPool, o, lse, q, k, v, p, work)
}

// AttentionBackward is AttentionBackwardOn on the default pool.
func AttentionBackward[T Float](dq, dk, dv, do, o, lse, q, k, v []T, p AttentionParams, work []T) []T {
	return AttentionBackwardOn(defaultPool, dq, dk, dv, do, o, lse, q, k, v, p, work)
}

// Parallel is ParallelOn on the default pool.
func Parallel(parts int, fn func(arg any, part int), arg any) {
	ParallelOn(defaultPool, parts, fn, arg)
}

// SetThreads sets the number of threads of the default pool (the one the
// package-level functions run on: for tests and one-off calls; an engine's
// backend owns a Pool of its own), starting or stopping its workers as
// needed; n <= 0 means runtime.GOMAXPROCS(0), the default (taken at first
// use), and n is capped at MaxThreads. It waits for a product in progress
// to finish.
func SetThreads(n int) {
	defaultPool.mu.Lock()
	defer defaultPool.mu.Unlock()
	defaultPool.resize(n)
}

// Threads returns the number of threads of the default pool.
func Threads() int { return defaultPool.Threads() }
