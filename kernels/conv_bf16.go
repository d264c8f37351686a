package kernels

// The convolutions of the mixed_bfloat16 policy: Conv2D and its gradients
// with their products on MatMulBF16 (operands rounded to bfloat16, sums in
// float32). They run the im2col-and-product loops of the float64 path on a
// chunk of images at a time, with the same workspace as the float32
// versions, rather than those versions' jobs that pack the float32 GEMM's
// panels straight from the image.

// Conv2DBF16 is Conv2D with its product on MatMulBF16.
func Conv2DBF16(dst, x, filter, work []float32, g ConvGeom, f int) []float32 {
	chunk := g.checkConv("Conv2DBF16", f, "x", len(x), "filter", len(filter), "dst", len(dst), len(work))
	if g.KH*g.KW*g.C == 0 {
		clear(dst)
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
	return conv2DFilterChunks(dfilter, x, dy, work, g, f, chunk, MatMulBF16)
}
