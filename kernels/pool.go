package kernels

// Two-dimensional pooling over channels-last (NHWC) tensors, each channel
// separately, with the window, strides and padding of a ConvGeom:
//
//	x: [N, H, W, C] -> y: [N, OH, OW, C]
//
// Padding cells take no part: a max never selects one and a mean does not
// count one, as TensorFlow and Keras do. A valid ConvGeom guarantees that
// every window holds at least one input cell.

// checkPool validates a pooling kernel's operands.
func (g ConvGeom) checkPool(fn, xName string, lenX int, yName string, lenY int) {
	g.check(fn)
	checkLen(fn, xName, lenX, g.N*g.H*g.W*g.C)
	checkLen(fn, yName, lenY, g.N*g.OH*g.OW*g.C)
}

// poolWindow returns the rows [h0, h1) and columns [w0, w1) of the input
// that output cell (oh, ow) covers, padding excluded.
func (g ConvGeom) poolWindow(oh, ow int) (h0, h1, w0, w1 int) {
	h0, w0 = oh*g.SH-g.PadTop, ow*g.SW-g.PadLeft
	h1, w1 = min(h0+g.KH, g.H), min(w0+g.KW, g.W)
	return max(h0, 0), h1, max(w0, 0), w1
}

// argmaxWindow returns the offset in img ([H, W, C] of one image) of the
// maximum of channel c over rows [h0, h1) and columns [w0, w1): the first
// maximum in row-major window order on ties, as TensorFlow's CPU kernel, and
// the first NaN if there is one, so that a NaN propagates.
func argmaxWindow[T Float](img []T, g ConvGeom, h0, h1, w0, w1, c int) int {
	best := (h0*g.W+w0)*g.C + c
	bv := img[best]
	for ih := h0; ih < h1; ih++ {
		for o := (ih*g.W+w0)*g.C + c; o < (ih*g.W+w1)*g.C; o += g.C {
			if v := img[o]; v > bv || (v != v && bv == bv) {
				best, bv = o, v
			}
		}
	}
	return best
}

// MaxPool2DOn sets dst to the maximum of x over each window, on pool p (two
// halves of a large batch at once), and returns dst.
//
//	x: [N, H, W, C], dst: [N, OH, OW, C]
//
// Padding cells are never selected; a NaN in a window gives NaN. It panics if
// g is invalid or a length does not match.
func MaxPool2DOn[T Float](p *Pool, dst, x []T, g ConvGeom) []T {
	g.checkPool("MaxPool2D", "x", len(x), "dst", len(dst))
	inHalves(p, taskMaxPool, [3][]T{dst, x}, g, 0, g.N)
	return dst
}

// maxPoolCells is the most cells of a window the assembly loops take; a
// larger window runs the Go loops.
const maxPoolCells = 64

// windowCells sets offs to the offsets in an [H, W, C] image of the cells
// (row-major) of the window rows [h0, h1), columns [w0, w1), and returns
// them, or nil if there are more than len(offs).
func (g ConvGeom) windowCells(offs *[maxPoolCells]int, h0, h1, w0, w1 int) []int {
	if (h1-h0)*(w1-w0) > len(offs) {
		return nil
	}
	k := 0
	for ih := h0; ih < h1; ih++ {
		for iw := w0; iw < w1; iw++ {
			offs[k] = (ih*g.W + iw) * g.C
			k++
		}
	}
	return offs[:k]
}

// maxPoolImages is MaxPool2D over images [n0, n0+nb).
func maxPoolImages[T Float](dst, x []T, g ConvGeom, n0, nb int) {
	img, out := g.H*g.W*g.C, g.OH*g.OW*g.C
	lanes := poolSIMDChannels[T](g.C)
	var offs [maxPoolCells]int
	for n := n0; n < n0+nb; n++ {
		xi, di := x[n*img:n*img+img], dst[n*out:n*out+out]
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				h0, h1, w0, w1 := g.poolWindow(oh, ow)
				d := di[(oh*g.OW+ow)*g.C : (oh*g.OW+ow+1)*g.C]
				c0 := 0
				if cells := g.windowCells(&offs, h0, h1, w0, w1); lanes > 0 && cells != nil {
					poolMaxSIMD(d, xi, cells, lanes)
					c0 = lanes
				}
				if c0 == g.C {
					continue
				}
				// All channels at once, visiting the cells in the order and
				// with the rule of argmaxWindow, so the value selected is
				// the one MaxPool2DGrad routes to.
				d = d[c0:]
				copy(d, xi[(h0*g.W+w0)*g.C+c0:])
				for ih := h0; ih < h1; ih++ {
					for iw := w0; iw < w1; iw++ {
						cell := xi[(ih*g.W+iw)*g.C+c0 : (ih*g.W+iw+1)*g.C]
						for c, v := range cell {
							if bv := d[c]; v > bv || (v != v && bv == bv) {
								d[c] = v
							}
						}
					}
				}
			}
		}
	}
}

// MaxPool2DGradOn sets dx to the gradient of Σ dy·MaxPool2D(x) with
// respect to x, on pool p, and returns dx: each dy element goes to the cell
// MaxPool2D selected in its window (the first maximum in row-major window
// order on ties), and cells selected by several overlapping windows
// receive the sum.
//
//	x: [N, H, W, C], dy: [N, OH, OW, C], dx: [N, H, W, C] (overwritten)
//
// dx must not overlap x or dy. It panics if g is invalid or a length does not
// match.
func MaxPool2DGradOn[T Float](p *Pool, dx, x, dy []T, g ConvGeom) []T {
	const fn = "MaxPool2DGrad"
	g.checkPool(fn, "x", len(x), "dy", len(dy))
	checkLen(fn, "dx", len(dx), len(x))
	inHalves(p, taskMaxPoolGrad, [3][]T{dx, x, dy}, g, 0, g.N)
	return dx
}

// MaxPool2DReluGradOn sets dx to ReluGrad(x, MaxPool2DGrad(x, dy)), on
// pool p, and returns dx: the gradient through a max pool whose input x is
// the output of a relu, on to the relu's input, in one pass. Each dy
// element goes to the cell MaxPool2DGrad routes it to when that cell's
// value is above 0; every other cell is 0. The bits are those of the two
// kernels in turn.
//
//	x: [N, H, W, C] (relu output), dy: [N, OH, OW, C], dx: [N, H, W, C] (overwritten)
//
// dx must not overlap x or dy. It panics if g is invalid or a length does not
// match.
func MaxPool2DReluGradOn[T Float](p *Pool, dx, x, dy []T, g ConvGeom) []T {
	const fn = "MaxPool2DReluGrad"
	g.checkPool(fn, "x", len(x), "dy", len(dy))
	checkLen(fn, "dx", len(dx), len(x))
	inHalves(p, taskMaxPoolReluGrad, [3][]T{dx, x, dy}, g, 0, g.N)
	return dx
}

// tiles reports whether the windows of g cover the input exactly once: no
// padding, strides equal to the window, and no cell left over.
func (g ConvGeom) tiles() bool {
	return g.SH == g.KH && g.SW == g.KW && g.PadTop == 0 && g.PadLeft == 0 &&
		g.OH*g.KH == g.H && g.OW*g.KW == g.W
}

// maxPoolGradImages is MaxPool2DGrad (with relu, MaxPool2DReluGrad) over
// images [n0, n0+nb). Where the windows tile the input and the assembly
// loops take every channel, each cell of dx is written once (0 + dy or 0,
// the same bits as adding into a cleared dx); otherwise dx is cleared and
// the windows add into it.
func maxPoolGradImages[T Float](dx, x, dy []T, g ConvGeom, n0, nb int, relu bool) {
	img, out := g.H*g.W*g.C, g.OH*g.OW*g.C
	lanes := poolSIMDChannels[T](g.C)
	acc := !(lanes == g.C && g.tiles() && g.KH*g.KW <= maxPoolCells)
	if acc {
		clear(dx[n0*img : (n0+nb)*img])
	}
	var offs [maxPoolCells]int
	for n := n0; n < n0+nb; n++ {
		xi, gi, di := x[n*img:n*img+img], dy[n*out:n*out+out], dx[n*img:n*img+img]
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				h0, h1, w0, w1 := g.poolWindow(oh, ow)
				gr := gi[(oh*g.OW+ow)*g.C : (oh*g.OW+ow+1)*g.C]
				c0 := 0
				if cells := g.windowCells(&offs, h0, h1, w0, w1); lanes > 0 && cells != nil {
					poolMaxGradSIMD(di, xi, gr, cells, lanes, acc, relu)
					c0 = lanes
				}
				for c := c0; c < g.C; c++ {
					if i := argmaxWindow(xi, g, h0, h1, w0, w1, c); !relu || xi[i] > 0 {
						di[i] += gr[c]
					}
				}
			}
		}
	}
}

// AvgPool2D sets dst to the mean of x over the cells of each window that lie
// inside the input (padding is excluded from the count, as Keras) and returns
// dst. Sums are accumulated in float64 and rounded once.
//
//	x: [N, H, W, C], dst: [N, OH, OW, C]
//
// It panics if g is invalid or a length does not match.
func AvgPool2D[T Float](dst, x []T, g ConvGeom) []T {
	g.checkPool("AvgPool2D", "x", len(x), "dst", len(dst))
	img, out := g.H*g.W*g.C, g.OH*g.OW*g.C
	for n := 0; n < g.N; n++ {
		xi, di := x[n*img:n*img+img], dst[n*out:n*out+out]
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				h0, h1, w0, w1 := g.poolWindow(oh, ow)
				count := float64((h1 - h0) * (w1 - w0))
				d := di[(oh*g.OW+ow)*g.C : (oh*g.OW+ow+1)*g.C]
				for c := range d {
					var s float64
					for ih := h0; ih < h1; ih++ {
						for o := (ih*g.W+w0)*g.C + c; o < (ih*g.W+w1)*g.C; o += g.C {
							s += float64(xi[o])
						}
					}
					d[c] = T(s / count)
				}
			}
		}
	}
	return dst
}

// AvgPool2DGrad sets dx to the gradient of Σ dy·AvgPool2D(x) with respect to
// x and returns dx: each dy element divided by its window's count is added to
// every input cell of the window.
//
//	dy: [N, OH, OW, C], dx: [N, H, W, C] (overwritten)
//
// dx must not overlap dy. It panics if g is invalid or a length does not
// match.
func AvgPool2DGrad[T Float](dx, dy []T, g ConvGeom) []T {
	g.checkPool("AvgPool2DGrad", "dx", len(dx), "dy", len(dy))
	clear(dx)
	img, out := g.H*g.W*g.C, g.OH*g.OW*g.C
	for n := 0; n < g.N; n++ {
		gi, di := dy[n*out:n*out+out], dx[n*img:n*img+img]
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				h0, h1, w0, w1 := g.poolWindow(oh, ow)
				count := T((h1 - h0) * (w1 - w0))
				gr := gi[(oh*g.OW+ow)*g.C : (oh*g.OW+ow+1)*g.C]
				for ih := h0; ih < h1; ih++ {
					for iw := w0; iw < w1; iw++ {
						d := di[(ih*g.W+iw)*g.C : (ih*g.W+iw+1)*g.C]
						for c, v := range gr {
							d[c] += v / count
						}
					}
				}
			}
		}
	}
	return dx
}
