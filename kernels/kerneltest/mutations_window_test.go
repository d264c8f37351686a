package kerneltest_test

import (
	"math"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
)

// windowMutations are deliberately wrong MatMulBF16 and window kernels;
// TestSuiteRejectsBrokenKernels runs them with the others.
var windowMutations = map[string]func(impl *kerneltest.Impl){
	"MatMulBF16 does not round": func(impl *kerneltest.Impl) {
		impl.MatMulBF16 = kernels.MatMulRef[float32]
	},
	"MatMulBF16 truncates the operands": func(impl *kerneltest.Impl) {
		impl.MatMulBF16 = func(dst, a, b []float32, m, n, k int, ta, tb, acc bool) []float32 {
			trunc := func(v float32) float64 { return float64(math.Float32frombits(math.Float32bits(v) &^ 0xffff)) }
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					var s float64
					if acc {
						s = float64(dst[i*n+j])
					}
					for p := 0; p < k; p++ {
						av, bv := a[i*k+p], b[p*n+j]
						if ta {
							av = a[p*m+i]
						}
						if tb {
							bv = b[j*k+p]
						}
						s += trunc(av) * trunc(bv)
					}
					dst[i*n+j] = float32(s)
				}
			}
			return dst
		}
	},
	"MatMulBF16 ignores accumulate": func(impl *kerneltest.Impl) {
		impl.MatMulBF16 = func(dst, a, b []float32, m, n, k int, ta, tb, acc bool) []float32 {
			return kernels.MatMulBF16(dst, a, b, m, n, k, ta, tb, false)
		}
	},
	"MaxPool2D drops NaN": func(impl *kerneltest.Impl) {
		impl.MaxPool2D = func(dst, x []float32, g kernels.ConvGeom) []float32 {
			kernels.MaxPool2D(dst, x, g)
			for i, v := range dst {
				if v != v {
					dst[i] = 0
				}
			}
			return dst
		}
	},
	"MaxPool2D selects the last maximum": func(impl *kerneltest.Impl) {
		impl.MaxPool2D = func(dst, x []float32, g kernels.ConvGeom) []float32 {
			eachLastMax(x, g, func(o, i int) { dst[o] = x[i] })
			return dst
		}
	},
	"MaxPool2DGrad routes ties to the last maximum": func(impl *kerneltest.Impl) {
		impl.MaxPool2DGrad = func(dx, x, dy []float32, g kernels.ConvGeom) []float32 {
			clear(dx)
			eachLastMax(x, g, func(o, i int) { dx[i] += dy[o] })
			return dx
		}
	},
	"MaxPool2DReluGrad ignores the relu": func(impl *kerneltest.Impl) {
		impl.MaxPool2DReluGrad = kernels.MaxPool2DGrad[float32]
	},
	"AvgPool2D counts the padding": func(impl *kerneltest.Impl) {
		impl.AvgPool2D = func(dst, x []float32, g kernels.ConvGeom) []float32 {
			kernels.AvgPool2D(dst, x, g)
			eachWindow(g, func(o, cells int) { dst[o] *= float32(cells) / float32(g.KH*g.KW) })
			return dst
		}
	},
	"AvgPool2DGrad drops the last image": func(impl *kerneltest.Impl) {
		impl.AvgPool2DGrad = func(dx, dy []float32, g kernels.ConvGeom) []float32 {
			if g.N == 0 {
				return kernels.AvgPool2DGrad(dx, dy, g)
			}
			h, img, out := g, g.H*g.W*g.C, g.OH*g.OW*g.C
			h.N--
			kernels.AvgPool2DGrad(dx[:h.N*img], dy[:h.N*out], h)
			return dx
		}
	},
	"Conv2D depends on stale work": func(impl *kerneltest.Impl) {
		impl.Conv2D = func(dst, x, filter, work []float32, g kernels.ConvGeom, f int) []float32 {
			kernels.Conv2D(dst, x, filter, work, g, f)
			if len(dst) > 0 && len(work) > 0 {
				dst[0] += 0 * work[len(work)-1] // work's tail is not written on every call
			}
			return dst
		}
	},
	"Conv2D drops the last image": func(impl *kerneltest.Impl) {
		impl.Conv2D = func(dst, x, filter, work []float32, g kernels.ConvGeom, f int) []float32 {
			if g.N == 0 {
				return kernels.Conv2D(dst, x, filter, work, g, f)
			}
			h := g
			h.N--
			kernels.Conv2D(dst[:h.N*g.OH*g.OW*f], x[:h.N*g.H*g.W*g.C], filter, work, h, f)
			clear(dst[h.N*g.OH*g.OW*f:])
			return dst
		}
	},
	"Conv2DBackpropInput accumulates into dx": func(impl *kerneltest.Impl) {
		impl.Conv2DBackpropInput = func(dx, dy, filter, work []float32, g kernels.ConvGeom, f int) []float32 {
			if len(spare) < len(dx) {
				spare = make([]float32, len(dx))
			}
			copy(spare, dx)
			kernels.Conv2DBackpropInput(dx, dy, filter, work, g, f)
			for i := range dx {
				dx[i] += spare[i]
			}
			return dx
		}
	},
	"Conv2DBackpropFilter drops the last image": func(impl *kerneltest.Impl) {
		impl.Conv2DBackpropFilter = func(dfilter, x, dy, work []float32, g kernels.ConvGeom, f int) []float32 {
			if g.N == 0 {
				return kernels.Conv2DBackpropFilter(dfilter, x, dy, work, g, f)
			}
			h := g
			h.N--
			return kernels.Conv2DBackpropFilter(dfilter, x[:h.N*g.H*g.W*g.C], dy[:h.N*g.OH*g.OW*f], work, h, f)
		}
	},
	"Conv2DBackpropFilter writes its input": func(impl *kerneltest.Impl) {
		impl.Conv2DBackpropFilter = func(dfilter, x, dy, work []float32, g kernels.ConvGeom, f int) []float32 {
			kernels.Conv2DBackpropFilter(dfilter, x, dy, work, g, f)
			if len(dy) > 0 {
				dy[len(dy)-1]++
			}
			return dfilter
		}
	},
	"Conv2DBF16 does not round": func(impl *kerneltest.Impl) {
		impl.Conv2DBF16 = kernels.Conv2D[float32]
	},
	"Conv2DBackpropInputBF16 does not round": func(impl *kerneltest.Impl) {
		impl.Conv2DBackpropInputBF16 = kernels.Conv2DBackpropInput[float32]
	},
	"Conv2DBackpropFilterBF16 does not round": func(impl *kerneltest.Impl) {
		impl.Conv2DBackpropFilterBF16 = kernels.Conv2DBackpropFilter[float32]
	},
}

// spare is a mutation's copy of its output, kept between calls so that the
// mutation does not allocate (the Allocs check would then catch it first).
var spare []float32

// eachWindow calls visit with the offset of each output of g and the number
// of its window's cells inside the input.
func eachWindow(g kernels.ConvGeom, visit func(o, cells int)) {
	for n := 0; n < g.N; n++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				h0, w0 := max(oh*g.SH-g.PadTop, 0), max(ow*g.SW-g.PadLeft, 0)
				h1, w1 := min(oh*g.SH-g.PadTop+g.KH, g.H), min(ow*g.SW-g.PadLeft+g.KW, g.W)
				for c := 0; c < g.C; c++ {
					visit(((n*g.OH+oh)*g.OW+ow)*g.C+c, (h1-h0)*(w1-w0))
				}
			}
		}
	}
}

// eachLastMax calls visit with the offset of each output of g and that of
// the last maximum of its window (the first NaN, as the kernels): wrong on
// ties, which the suite's inputs are full of.
func eachLastMax(x []float32, g kernels.ConvGeom, visit func(o, i int)) {
	for n := 0; n < g.N; n++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				h0, w0 := max(oh*g.SH-g.PadTop, 0), max(ow*g.SW-g.PadLeft, 0)
				h1, w1 := min(oh*g.SH-g.PadTop+g.KH, g.H), min(ow*g.SW-g.PadLeft+g.KW, g.W)
				for c := 0; c < g.C; c++ {
					best := -1
					for ih := h0; ih < h1; ih++ {
						for iw := w0; iw < w1; iw++ {
							i := ((n*g.H+ih)*g.W+iw)*g.C + c
							if best < 0 || (x[best] == x[best] && (x[i] >= x[best] || x[i] != x[i])) {
								best = i
							}
						}
					}
					visit(((n*g.OH+oh)*g.OW+ow)*g.C+c, best)
				}
			}
		}
	}
}
