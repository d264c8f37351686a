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
	chunk := g.checkConv("Conv2DBF16", f, "x", len(x), "filter", len(filter), "dst", len(dst), len(work))
	if g.KH*g.KW*g.C == 0 {
		clear(dst)
		return dst
	}
	if g.OH*g.OW > 0 && conv2DJob(dst, x, filter, work, g, f, true) {
		return dst
	}
	return conv2DChunks(dst, x, filter, work, g, f, chunk, MatMulBF16)
}

// Conv2DBackpropInputBF16 is Conv2DBackpropInput with its product on
// MatMulBF16.
func Conv2DBackpropInputBF16(dx, dy, filter, work []float32, g ConvGeom, f int) []float32 {
	chunk := g.checkConv("Conv2DBackpropInputBF16", f, "dx", len(dx), "filter", len(filter), "dy", len(dy), len(work))
	if g.KH*g.KW*g.C == 0 || g.OH*g.OW == 0 {
		clear(dx)
		return dx
	}
	if conv2DInputJob(dx, dy, filter, work, g, f, true) {
		return dx
	}
	return conv2DInputChunks(dx, dy, filter, work, g, f, chunk, MatMulBF16)
}

// Conv2DBackpropFilterBF16 is Conv2DBackpropFilter with its products on
// MatMulBF16.
func Conv2DBackpropFilterBF16(dfilter, x, dy, work []float32, g ConvGeom, f int) []float32 {
	chunk := g.checkConv("Conv2DBackpropFilterBF16", f, "x", len(x), "dfilter", len(dfilter), "dy", len(dy), len(work))
	if g.KH*g.KW*g.C == 0 || g.OH*g.OW == 0 || g.N == 0 {
		clear(dfilter)
		return dfilter
	}
	if conv2DFilterJob(dfilter, x, dy, work, g, f, true) {
		return dfilter
	}
	return conv2DFilterChunks(dfilter, x, dy, work, g, f, chunk, MatMulBF16)
}
