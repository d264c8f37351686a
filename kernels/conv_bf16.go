package kernels

// The convolutions of the mixed_bfloat16 policy: Conv2D and its gradients
// with their products on MatMulBF16 (operands rounded to bfloat16, sums in
// float32). They run the float32 versions' jobs on the worker pool
// (jobs.go) with MatMulBF16's tier, which packs both operands itself: the
// float32 versions' packing of A straight from the image is left out. With
// products run elsewhere (the openblas tag), the chunked im2col loops of
// the float64 path.

// Conv2DBF16 is Conv2D with its product on MatMulBF16.
func Conv2DBF16(dst, x, filter, work []float32, g ConvGeom, f int) []float32 {
	return conv2D("Conv2DBF16", dst, x, filter, work, g, f, MatMulBF16, true)
}

// Conv2DBackpropInputBF16 is Conv2DBackpropInput with its product on
// MatMulBF16.
func Conv2DBackpropInputBF16(dx, dy, filter, work []float32, g ConvGeom, f int) []float32 {
	return conv2DInput("Conv2DBackpropInputBF16", dx, dy, filter, work, g, f, MatMulBF16, true)
}

// Conv2DBackpropFilterBF16 is Conv2DBackpropFilter with its products on
// MatMulBF16.
func Conv2DBackpropFilterBF16(dfilter, x, dy, work []float32, g ConvGeom, f int) []float32 {
	return conv2DFilter("Conv2DBackpropFilterBF16", dfilter, x, dy, work, g, f, MatMulBF16, true)
}
