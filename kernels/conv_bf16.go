package kernels

// The convolutions of the mixed_bfloat16 policy: Conv2D and its gradients
// with their products on MatMulBF16 (operands rounded to bfloat16, sums in
// float32). They run the float32 versions' jobs on the Pool they are given
// (jobs.go) with MatMulBF16's tier, which packs both operands itself: the
// float32 versions' packing of A straight from the image is left out. With
// products run elsewhere (the openblas tag), the chunked im2col loops of
// the float64 path.

// Conv2DBF16On is Conv2DOn with its product on MatMulBF16On.
func Conv2DBF16On(p *Pool, dst, x, filter, work []float32, g ConvGeom, f int) []float32 {
	return conv2D(p, "Conv2DBF16", dst, x, filter, work, g, f, MatMulBF16On, true, ConvAuto)
}

// Conv2DBackpropInputBF16On is Conv2DBackpropInputOn with its product on
// MatMulBF16On.
func Conv2DBackpropInputBF16On(p *Pool, dx, dy, filter, work []float32, g ConvGeom, f int) []float32 {
	return conv2DInput(p, "Conv2DBackpropInputBF16", dx, dy, filter, work, g, f, MatMulBF16On, true, ConvAuto)
}

// Conv2DBackpropFilterBF16On is Conv2DBackpropFilterOn with its products on
// MatMulBF16On.
func Conv2DBackpropFilterBF16On(p *Pool, dfilter, x, dy, work []float32, g ConvGeom, f int) []float32 {
	return conv2DFilter(p, "Conv2DBackpropFilterBF16", dfilter, x, dy, work, g, f, MatMulBF16On, true, ConvAuto)
}
