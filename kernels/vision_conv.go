package kernels

// Dilated and grouped convolutions (ConvGeom.DH, DW, Groups), NHWC as
// conv.go, the filter [KH, KW, C/G, F] with G = Groups:
//
//	y[n, oh, ow, f] = Σ_{kh, kw, c'} x[n, oh·SH - PadTop + kh·DH, ow·SW - PadLeft + kw·DW, g·C/G + c'] · filter[kh, kw, c', f]
//
// where g = f / (F/G) is output channel f's group (Yu and Koltun,
// "Multi-Scale Context Aggregation by Dilated Convolutions", 2016;
// Krizhevsky et al. 2012 for groups). With one input channel per group
// (G = C) it is a depthwise convolution with M = F/C outputs per channel
// (Chollet, "Xception", 2017): its filter [KH, KW, 1, C·M] holds the bytes
// of Keras' depthwise kernel [KH, KW, C, M]. Depthwise convolutions run as
// direct loops over each output cell's window (no product of width one);
// the others as im2col of each group and one product per group and chunk
// of images, into the workspace:
//
//	images·OH·OW·(K' + F/G) + K'·F/G floats (K' = KH·KW·C/G, ConvGeneralWork)
//
// for the im2col rows, the group's slice of dy or of the result, and the
// group's filter columns. The depthwise filter gradient sums two fixed
// halves of the batch apart (the second into the workspace) and adds them,
// so its rounding does not depend on the threads. Products accumulate in
// T, as MatMul; float32 products run in float32 whatever the bfloat16
// setting.

// General reports whether g is dilated or grouped: such convolutions run
// the kernels of this file.
func (g ConvGeom) General() bool { return g.DH > 1 || g.DW > 1 || g.Groups > 1 }

func (g ConvGeom) dilation() (int, int) { return max(g.DH, 1), max(g.DW, 1) }
func (g ConvGeom) groups() int          { return max(g.Groups, 1) }

// depthwise reports whether every group has one input channel.
func (g ConvGeom) depthwise() bool { return g.groups() > 1 && g.groups() == g.C }

// ConvGeneralWork returns the workspace floats a general convolution of
// geometry g with f filters needs to process images images per chunk, for
// any of Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter (see above);
// a depthwise convolution needs only the filter gradient's second half.
func ConvGeneralWork(g ConvGeom, f, images int) int {
	gr := g.groups()
	kg, fg := g.KH*g.KW*(g.C/gr), f/gr
	if g.depthwise() {
		return g.KH * g.KW * f
	}
	return images*g.OH*g.OW*(kg+fg) + kg*fg
}

// checkGeneral validates a general convolution's operands and returns the
// images per chunk that work holds.
func (g ConvGeom) checkGeneral(fn string, f int, xName string, lenX int, filterName string, lenFilter int, yName string, lenY, lenWork int) int {
	if g.N < 0 || g.H < 0 || g.W < 0 || g.C < 0 || g.OH < 0 || g.OW < 0 || f < 0 ||
		g.KH < 1 || g.KW < 1 || g.SH < 1 || g.SW < 1 || g.PadTop < 0 || g.PadLeft < 0 ||
		g.DH < 0 || g.DW < 0 || g.Groups < 0 {
		panicf("%s: invalid geometry %+v (f=%d)", fn, g, f)
	}
	gr := g.groups()
	if g.C%gr != 0 || f%gr != 0 {
		panicf("%s: %d groups do not divide %d input and %d output channels", fn, gr, g.C, f)
	}
	checkLen(fn, xName, lenX, g.N*g.H*g.W*g.C)
	checkLen(fn, filterName, lenFilter, g.KH*g.KW*(g.C/gr)*f)
	checkLen(fn, yName, lenY, g.N*g.OH*g.OW*f)
	need := ConvGeneralWork(g, f, 1)
	if lenWork < need {
		panicf("%s: len(work) = %d, want at least %d (ConvGeneralWork of one image)", fn, lenWork, need)
	}
	if g.depthwise() || g.N == 0 {
		return max(g.N, 1)
	}
	kg, fg := g.KH*g.KW*(g.C/gr), f/gr
	per := g.OH * g.OW * (kg + fg)
	if per == 0 {
		return max(g.N, 1)
	}
	return max(1, min((lenWork-kg*fg)/per, g.N))
}

// conv2DGeneral is Conv2D for a general geometry.
func conv2DGeneral[T Float](p *Pool, fn string, dst, x, filter, work []T, g ConvGeom, f int) []T {
	chunk := g.checkGeneral(fn, f, "x", len(x), "filter", len(filter), "dst", len(dst), len(work))
	if g.depthwise() {
		runDepthwise(p, dwForward, dst, x, filter, work, g, f)
		return dst
	}
	gr := g.groups()
	kg, fg := g.KH*g.KW*(g.C/gr), f/gr
	per := g.OH * g.OW
	if kg == 0 || per == 0 {
		clear(dst)
		return dst
	}
	cols, tmp, fp := generalSlots(work, chunk*per, kg, fg)
	for gi := 0; gi < gr; gi++ {
		w := filter
		if gr > 1 {
			packGroupColumns(fp, filter, kg, f, gi*fg, fg)
			w = fp
		}
		for n0 := 0; n0 < g.N; n0 += chunk {
			nb := min(chunk, g.N-n0)
			rows := nb * per
			im2colGroup(cols[:rows*kg], x, g, n0, nb, gi)
			if gr == 1 { // [rows, K]·[K, f] -> dst's rows
				MatMulOn(p, dst[n0*per*f:(n0*per+rows)*f], cols[:rows*kg], w, rows, f, kg, false, false, false)
				continue
			}
			MatMulOn(p, tmp[:rows*fg], cols[:rows*kg], w, rows, fg, kg, false, false, false)
			scatterColumns(dst[n0*per*f:], tmp[:rows*fg], rows, f, gi*fg, fg)
		}
	}
	return dst
}

// conv2DInputGeneral is Conv2DBackpropInput for a general geometry.
func conv2DInputGeneral[T Float](p *Pool, fn string, dx, dy, filter, work []T, g ConvGeom, f int) []T {
	chunk := g.checkGeneral(fn, f, "dx", len(dx), "filter", len(filter), "dy", len(dy), len(work))
	if g.depthwise() {
		runDepthwise(p, dwInput, dx, dy, filter, work, g, f)
		return dx
	}
	clear(dx)
	gr := g.groups()
	kg, fg := g.KH*g.KW*(g.C/gr), f/gr
	per := g.OH * g.OW
	if kg == 0 || per == 0 {
		return dx
	}
	cols, tmp, fp := generalSlots(work, chunk*per, kg, fg)
	for gi := 0; gi < gr; gi++ {
		w := filter
		if gr > 1 {
			packGroupColumns(fp, filter, kg, f, gi*fg, fg)
			w = fp
		}
		for n0 := 0; n0 < g.N; n0 += chunk {
			nb := min(chunk, g.N-n0)
			rows := nb * per
			dyg := dy[n0*per*f : (n0*per+rows)*f]
			if gr > 1 {
				packGroupColumns(tmp[:rows*fg], dy[n0*per*f:], rows, f, gi*fg, fg)
				dyg = tmp[:rows*fg]
			}
			// [rows, F/G]·[K', F/G]ᵀ -> [rows, K']
			MatMulOn(p, cols[:rows*kg], dyg, w, rows, kg, fg, false, true, false)
			col2imGroup(dx, cols[:rows*kg], g, n0, nb, gi)
		}
	}
	return dx
}

// conv2DFilterGeneral is Conv2DBackpropFilter for a general geometry.
func conv2DFilterGeneral[T Float](p *Pool, fn string, dfilter, x, dy, work []T, g ConvGeom, f int) []T {
	chunk := g.checkGeneral(fn, f, "x", len(x), "dfilter", len(dfilter), "dy", len(dy), len(work))
	if g.depthwise() {
		runDepthwise(p, dwFilter, dfilter, x, dy, work, g, f)
		return dfilter
	}
	gr := g.groups()
	kg, fg := g.KH*g.KW*(g.C/gr), f/gr
	per := g.OH * g.OW
	if kg == 0 || per == 0 || g.N == 0 {
		clear(dfilter)
		return dfilter
	}
	cols, tmp, acc := generalSlots(work, chunk*per, kg, fg)
	for gi := 0; gi < gr; gi++ {
		dst := dfilter
		if gr > 1 {
			dst = acc
		}
		for n0 := 0; n0 < g.N; n0 += chunk {
			nb := min(chunk, g.N-n0)
			rows := nb * per
			im2colGroup(cols[:rows*kg], x, g, n0, nb, gi)
			dyg := dy[n0*per*f : (n0*per+rows)*f]
			if gr > 1 {
				packGroupColumns(tmp[:rows*fg], dy[n0*per*f:], rows, f, gi*fg, fg)
				dyg = tmp[:rows*fg]
			}
			// [rows, K']ᵀ·[rows, F/G] -> [K', F/G], accumulated over chunks
			MatMulOn(p, dst, cols[:rows*kg], dyg, kg, fg, rows, true, false, n0 > 0)
		}
		if gr > 1 {
			scatterColumns(dfilter, acc, kg, f, gi*fg, fg)
		}
	}
	return dfilter
}

// generalSlots splits work into the im2col rows (rows·kg), the group's
// columns of dy or of the result (rows·fg) and the group's filter (kg·fg).
func generalSlots[T Float](work []T, rows, kg, fg int) (cols, tmp, fp []T) {
	cols = work[:rows*kg]
	tmp = work[rows*kg : rows*(kg+fg)]
	fp = work[rows*(kg+fg) : rows*(kg+fg)+kg*fg]
	return cols, tmp, fp
}

// packGroupColumns copies columns [c0, c0+w) of m [rows, ld] into d
// [rows, w]: a group's filter columns, or its slice of dy.
func packGroupColumns[T Float](d, m []T, rows, ld, c0, w int) {
	for r := 0; r < rows; r++ {
		copy(d[r*w:r*w+w], m[r*ld+c0:r*ld+c0+w])
	}
}

// scatterColumns copies s [rows, w] into columns [c0, c0+w) of m [rows, ld].
func scatterColumns[T Float](m, s []T, rows, ld, c0, w int) {
	for r := 0; r < rows; r++ {
		copy(m[r*ld+c0:r*ld+c0+w], s[r*w:r*w+w])
	}
}

// im2colGroup writes the windows of images n0 ... n0+nb-1 of x over the
// channels of group gi into cols: one row of K' = KH·KW·C/G per output
// position, in the filter's (kh, kw, c') order, taps DH rows and DW
// columns apart; padding is zero.
func im2colGroup[T Float](cols, x []T, g ConvGeom, n0, nb, gi int) {
	dh, dw := g.dilation()
	cg := g.C / g.groups()
	k := g.KH * g.KW * cg
	r := 0
	for n := n0; n < n0+nb; n++ {
		xi := x[n*g.H*g.W*g.C : (n+1)*g.H*g.W*g.C]
		for oh := 0; oh < g.OH; oh++ {
			ih0 := oh*g.SH - g.PadTop
			for ow := 0; ow < g.OW; ow++ {
				iw0 := ow*g.SW - g.PadLeft
				row := cols[r*k : r*k+k]
				r++
				for kh := 0; kh < g.KH; kh++ {
					ih := ih0 + kh*dh
					seg := row[kh*g.KW*cg : (kh+1)*g.KW*cg]
					if ih < 0 || ih >= g.H {
						clear(seg)
						continue
					}
					for kw := 0; kw < g.KW; kw++ {
						iw := iw0 + kw*dw
						cell := seg[kw*cg : kw*cg+cg]
						if iw < 0 || iw >= g.W {
							clear(cell)
							continue
						}
						src := (ih*g.W+iw)*g.C + gi*cg
						copy(cell, xi[src:src+cg])
					}
				}
			}
		}
	}
}

// col2imGroup is the adjoint of im2colGroup: it adds each row of cols into
// the cells of dx it was read from, dropping padding.
func col2imGroup[T Float](dx, cols []T, g ConvGeom, n0, nb, gi int) {
	dh, dw := g.dilation()
	cg := g.C / g.groups()
	k := g.KH * g.KW * cg
	r := 0
	for n := n0; n < n0+nb; n++ {
		di := dx[n*g.H*g.W*g.C : (n+1)*g.H*g.W*g.C]
		for oh := 0; oh < g.OH; oh++ {
			ih0 := oh*g.SH - g.PadTop
			for ow := 0; ow < g.OW; ow++ {
				iw0 := ow*g.SW - g.PadLeft
				row := cols[r*k : r*k+k]
				r++
				for kh := 0; kh < g.KH; kh++ {
					ih := ih0 + kh*dh
					if ih < 0 || ih >= g.H {
						continue
					}
					for kw := 0; kw < g.KW; kw++ {
						iw := iw0 + kw*dw
						if iw < 0 || iw >= g.W {
							continue
						}
						dst := di[(ih*g.W+iw)*g.C+gi*cg:][:cg]
						for c, v := range row[(kh*g.KW+kw)*cg : (kh*g.KW+kw+1)*cg] {
							dst[c] += v
						}
					}
				}
			}
		}
	}
}

// The depthwise kernels run as parts of a ParallelOn call over ranges of
// images; the call's operands live in the pool's calls (one job per element
// type, guarded by dwMu), so that a call allocates nothing.

type dwKind uint8

const (
	dwForward dwKind = iota // a: dst [N, OH, OW, F], b: x, c: filter
	dwInput                 // a: dx [N, H, W, C], b: dy, c: filter
	dwFilter                // a: dfilter, b: x, c: dy; work: the second half's sum
)

type dwJob[T Float] struct {
	kind    dwKind
	a, b, c []T
	work    []T
	g       ConvGeom
	f       int
	parts   int
}

// dwParts is how many parts the image-parallel depthwise kernels split a
// batch into, per thread.
const dwParts = 2

// runDepthwise runs the depthwise kernel kind on pool p.
func runDepthwise[T Float](p *Pool, kind dwKind, a, b, c, work []T, g ConvGeom, f int) {
	p.calls.dwMu.Lock()
	defer p.calls.dwMu.Unlock()
	// the parts are plain functions: a generic one's value would allocate
	var j *dwJob[T]
	fn := dwPart64
	if j32, ok := any(&p.calls.dw32).(*dwJob[T]); ok {
		j, fn = j32, dwPart32
	} else {
		j = any(&p.calls.dw64).(*dwJob[T])
	}
	parts := min(max(g.N, 1), dwParts*p.Threads())
	if kind == dwFilter {
		parts = 2 // fixed halves: the rounding does not follow the threads
	}
	*j = dwJob[T]{kind: kind, a: a, b: b, c: c, work: work, g: g, f: f, parts: parts}
	ParallelOn(p, parts, fn, j)
	if kind == dwFilter {
		for i, v := range work[:len(a)] {
			a[i] += v
		}
	}
	*j = dwJob[T]{} // drop the caller's slices
}

func dwPart32(arg any, p int) { dwPart[float32](arg, p) }
func dwPart64(arg any, p int) { dwPart[float64](arg, p) }

// dwPart runs part p of the depthwise job arg.
func dwPart[T Float](arg any, p int) {
	j := arg.(*dwJob[T])
	g := j.g
	n0, n1 := g.N*p/j.parts, g.N*(p+1)/j.parts
	switch j.kind {
	case dwForward:
		depthwiseForward(j.a, j.b, j.c, g, j.f, n0, n1)
	case dwInput:
		depthwiseInput(j.a, j.b, j.c, g, j.f, n0, n1)
	case dwFilter:
		dst := j.a
		if p > 0 {
			dst = j.work[:len(j.a)]
		}
		depthwiseFilter(dst, j.b, j.c, g, j.f, n0, n1)
	}
}

// depthwiseForward computes images [n0, n1) of the depthwise convolution:
// each output cell's F = C·M values sum, over its window's taps, the
// tap's C input channels each times its M filter values.
func depthwiseForward[T Float](dst, x, filter []T, g ConvGeom, f, n0, n1 int) {
	dh, dw := g.dilation()
	m := f / g.C
	for n := n0; n < n1; n++ {
		xi := x[n*g.H*g.W*g.C : (n+1)*g.H*g.W*g.C]
		for oh := 0; oh < g.OH; oh++ {
			ih0 := oh*g.SH - g.PadTop
			for ow := 0; ow < g.OW; ow++ {
				iw0 := ow*g.SW - g.PadLeft
				out := dst[((n*g.OH+oh)*g.OW+ow)*f:][:f]
				clear(out)
				for kh := 0; kh < g.KH; kh++ {
					ih := ih0 + kh*dh
					if ih < 0 || ih >= g.H {
						continue
					}
					for kw := 0; kw < g.KW; kw++ {
						iw := iw0 + kw*dw
						if iw < 0 || iw >= g.W {
							continue
						}
						in := xi[(ih*g.W+iw)*g.C:][:g.C]
						w := filter[(kh*g.KW+kw)*f:][:f]
						if m == 1 {
							axpyMul(out, in, w)
							continue
						}
						for c, v := range in {
							o, wc := out[c*m:c*m+m], w[c*m:c*m+m]
							for i := range o {
								o[i] += v * wc[i]
							}
						}
					}
				}
			}
		}
	}
}

// axpyMul adds a[i]·b[i] to d[i].
func axpyMul[T Float](d, a, b []T) {
	b = b[:len(a)]
	d = d[:len(a)]
	for i, v := range a {
		d[i] += v * b[i]
	}
}

// depthwiseInput computes images [n0, n1) of the depthwise input gradient
// (dx is overwritten there).
func depthwiseInput[T Float](dx, dy, filter []T, g ConvGeom, f, n0, n1 int) {
	dh, dw := g.dilation()
	m := f / g.C
	clear(dx[n0*g.H*g.W*g.C : n1*g.H*g.W*g.C])
	for n := n0; n < n1; n++ {
		di := dx[n*g.H*g.W*g.C : (n+1)*g.H*g.W*g.C]
		for oh := 0; oh < g.OH; oh++ {
			ih0 := oh*g.SH - g.PadTop
			for ow := 0; ow < g.OW; ow++ {
				iw0 := ow*g.SW - g.PadLeft
				d := dy[((n*g.OH+oh)*g.OW+ow)*f:][:f]
				for kh := 0; kh < g.KH; kh++ {
					ih := ih0 + kh*dh
					if ih < 0 || ih >= g.H {
						continue
					}
					for kw := 0; kw < g.KW; kw++ {
						iw := iw0 + kw*dw
						if iw < 0 || iw >= g.W {
							continue
						}
						cell := di[(ih*g.W+iw)*g.C:][:g.C]
						w := filter[(kh*g.KW+kw)*f:][:f]
						if m == 1 {
							axpyMul(cell, d, w)
							continue
						}
						for c := range cell {
							var s T
							for i, v := range d[c*m : c*m+m] {
								s += v * w[c*m+i]
							}
							cell[c] += s
						}
					}
				}
			}
		}
	}
}

// depthwiseFilter sets dfilter to the filter gradient over images
// [n0, n1).
func depthwiseFilter[T Float](dfilter, x, dy []T, g ConvGeom, f, n0, n1 int) {
	dh, dw := g.dilation()
	m := f / g.C
	clear(dfilter)
	for n := n0; n < n1; n++ {
		xi := x[n*g.H*g.W*g.C : (n+1)*g.H*g.W*g.C]
		for oh := 0; oh < g.OH; oh++ {
			ih0 := oh*g.SH - g.PadTop
			for ow := 0; ow < g.OW; ow++ {
				iw0 := ow*g.SW - g.PadLeft
				d := dy[((n*g.OH+oh)*g.OW+ow)*f:][:f]
				for kh := 0; kh < g.KH; kh++ {
					ih := ih0 + kh*dh
					if ih < 0 || ih >= g.H {
						continue
					}
					for kw := 0; kw < g.KW; kw++ {
						iw := iw0 + kw*dw
						if iw < 0 || iw >= g.W {
							continue
						}
						in := xi[(ih*g.W+iw)*g.C:][:g.C]
						w := dfilter[(kh*g.KW+kw)*f:][:f]
						if m == 1 {
							axpyMul(w, in, d)
							continue
						}
						for c, v := range in {
							wc, dc := w[c*m:c*m+m], d[c*m:c*m+m]
							for i := range wc {
								wc[i] += v * dc[i]
							}
						}
					}
				}
			}
		}
	}
}

// NewConvGeneralGeom returns the geometry of a convolution as
// NewConvGeom, with taps dh rows and dw columns apart and groups filter
// groups: the window's extent is (kh-1)·dh + 1 for the output size and
// the padding. It panics as NewConvGeom, or if dh, dw or groups is below 1.
func NewConvGeneralGeom(n, h, w, c, kh, kw, sh, sw, dh, dw, groups int, same bool) ConvGeom {
	if dh < 1 || dw < 1 || groups < 1 {
		panicf("NewConvGeneralGeom: dilation %dx%d, groups %d; want each >= 1", dh, dw, groups)
	}
	g := NewConvGeom(n, h, w, c, (kh-1)*dh+1, (kw-1)*dw+1, sh, sw, same)
	g.KH, g.KW = kh, kw
	if dh > 1 || dw > 1 || groups > 1 {
		g.DH, g.DW, g.Groups = dh, dw, groups
	}
	return g
}
