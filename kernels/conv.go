package kernels

// Two-dimensional convolution over channels-last (NHWC) tensors, as Keras
// lays them out, with the filter in Keras' HWIO order:
//
//	x:      [N, H, W, C]     input images
//	filter: [KH, KW, C, F]   one KH×KW×C window per output channel
//	y:      [N, OH, OW, F]   y[n, oh, ow, f] = Σ_{kh, kw, c} x[n, oh·SH - PadTop + kh, ow·SW - PadLeft + kw, c] · filter[kh, kw, c, f]
//
// where a read outside the input is zero (padding). The kernels lower the
// convolution to one matrix product per chunk of images (im2col; Chellapilla,
// Puri and Simard, "High Performance Convolutional Neural Networks for
// Document Processing", 2006): each output position's window is copied into a
// row of a [rows, KH·KW·C] column matrix held in caller-provided workspace,
// and the filter, stored [KH·KW·C, F] row-major, is the other operand. The
// workspace bounds the memory: a chunk is as many images as the workspace
// holds, so the planner trades workspace bytes against matrix size with
// ConvGeom.Im2ColSize. In float32 the three kernels run as jobs on the
// Pool they are given (jobs.go): independent regions of a few output rows (or
// images) that lower and multiply their own rows while they are in cache,
// Conv2D packing the product's operand straight from x (convpack.go).
// Results never depend on the number of threads. Conv2D and
// Conv2DBackpropInput compute every output element with the same operations
// in the same order whatever the chunking; Conv2DBackpropFilter sums its
// chunks in two fixed groups in float32, so its rounding follows the
// workspace size, as a planned buffer fixes it.

// ConvGeom describes a 2-D convolution or pooling window over NHWC input.
//
// Output row oh reads input rows oh·SH - PadTop ... oh·SH - PadTop + KH - 1
// (likewise for columns); rows outside [0, H) are padding. The padding after
// the input is implied by OH (see PadBottom). A geometry is valid when every
// size is non-negative, windows and strides are at least 1, and every window
// overlaps the input (PadTop < KH and the last window starts before row H);
// NewConvGeom always returns a valid one.
type ConvGeom struct {
	N, H, W, C      int // input: batch, height, width, channels
	KH, KW          int // window
	SH, SW          int // strides
	PadTop, PadLeft int // zero padding before (after-padding is implied by OH/OW)
	OH, OW          int // output height, width
	// DH, DW (dilation: window taps DH rows, DW columns apart) and Groups
	// (the channels split in Groups independent convolutions) are 0 or 1
	// for a plain convolution; the kernels of vision_conv.go run the
	// others (see ConvGeom.General).
	DH, DW, Groups int
}

// NewConvGeom returns the geometry of a kh×kw window with strides sh, sw over
// an [n, h, w, c] input with Keras/TensorFlow padding semantics:
//
//	valid: OH = ceil((H - KH + 1) / SH), no padding (OH = 0 when KH > H)
//	same:  OH = ceil(H / SH), total padding P = max((OH-1)·SH + KH - H, 0),
//	       PadTop = P/2 and the remaining P - P/2 rows (the odd one) at the bottom
//
// and likewise for the width. It panics if a size is negative or a window or
// stride is below 1.
func NewConvGeom(n, h, w, c, kh, kw, sh, sw int, same bool) ConvGeom {
	if n < 0 || h < 0 || w < 0 || c < 0 {
		panicf("NewConvGeom: negative input size [%d %d %d %d]", n, h, w, c)
	}
	if kh < 1 || kw < 1 || sh < 1 || sw < 1 {
		panicf("NewConvGeom: window %dx%d, strides %dx%d; want each >= 1", kh, kw, sh, sw)
	}
	g := ConvGeom{N: n, H: h, W: w, C: c, KH: kh, KW: kw, SH: sh, SW: sw}
	g.OH, g.PadTop = outSize(h, kh, sh, same)
	g.OW, g.PadLeft = outSize(w, kw, sw, same)
	return g
}

// outSize returns the output length and the padding before for one spatial
// dimension of length in, window k and stride s.
func outSize(in, k, s int, same bool) (out, before int) {
	if same {
		out = (in + s - 1) / s
		if out == 0 {
			return 0, 0
		}
		return out, max((out-1)*s+k-in, 0) / 2
	}
	if in < k {
		return 0, 0
	}
	return (in-k)/s + 1, 0
}

// PadBottom returns the zero rows the last output row reads below the input:
// max((OH-1)·SH + KH - H - PadTop, 0), or 0 when OH is 0.
func (g ConvGeom) PadBottom() int { return padAfter(g.H, g.KH, g.SH, g.PadTop, g.OH) }

// PadRight returns the zero columns the last output column reads right of the
// input, as PadBottom.
func (g ConvGeom) PadRight() int { return padAfter(g.W, g.KW, g.SW, g.PadLeft, g.OW) }

func padAfter(in, k, s, before, out int) int {
	if out == 0 {
		return 0
	}
	return max((out-1)*s+k-in-before, 0)
}

// Im2ColSize returns the workspace elements Conv2D and its gradients need to
// process images images per chunk: images·OH·OW·KH·KW·C.
func (g ConvGeom) Im2ColSize(images int) int {
	return images * g.OH * g.OW * g.KH * g.KW * g.C
}

// check panics unless g is a valid geometry (see ConvGeom).
func (g ConvGeom) check(fn string) {
	if g.N < 0 || g.H < 0 || g.W < 0 || g.C < 0 || g.OH < 0 || g.OW < 0 ||
		g.KH < 1 || g.KW < 1 || g.SH < 1 || g.SW < 1 || g.PadTop < 0 || g.PadLeft < 0 {
		panicf("%s: invalid geometry %+v", fn, g)
	}
	if !windowsOverlap(g.H, g.KH, g.SH, g.PadTop, g.OH) || !windowsOverlap(g.W, g.KW, g.SW, g.PadLeft, g.OW) {
		panicf("%s: geometry %+v has a window that lies wholly in the padding", fn, g)
	}
}

// windowsOverlap reports whether each of out windows (length k, stride s,
// starting at -before) overlaps [0, in). Window starts increase, so it is
// enough that the first ends at or after 0 and the last starts before in.
func windowsOverlap(in, k, s, before, out int) bool {
	return out == 0 || (before < k && (out-1)*s-before < in)
}

// window returns the part [lo, hi) of the window that starts at start (length
// k) lying inside [0, size), as offsets into the window; lo == hi when none.
func window(start, k, size int) (lo, hi int) {
	lo, hi = max(-start, 0), min(k, size-start)
	return lo, max(hi, lo)
}

// checkConv validates a convolution's operands, named xName and so on (x or
// dx, ...), and returns the number of images per chunk that work holds (at
// least 1).
func (g ConvGeom) checkConv(fn string, f int, xName string, lenX int, filterName string, lenFilter int, yName string, lenY, lenWork int) int {
	g.check(fn)
	if f < 0 {
		panicf("%s: negative output channels f=%d", fn, f)
	}
	checkLen(fn, xName, lenX, g.N*g.H*g.W*g.C)
	checkLen(fn, filterName, lenFilter, g.KH*g.KW*g.C*f)
	checkLen(fn, yName, lenY, g.N*g.OH*g.OW*f)
	per := g.Im2ColSize(1)
	if per == 0 || g.N == 0 {
		return max(g.N, 1)
	}
	if lenWork < per {
		panicf("%s: len(work) = %d, want at least %d (one image: OH*OW*KH*KW*C)", fn, lenWork, per)
	}
	return min(lenWork/per, g.N)
}

// Conv2DOn sets dst to the convolution of x with filter, on pool p, and
// returns dst.
//
//	x: [N, H, W, C], filter: [KH, KW, C, f], dst: [N, OH, OW, f]
//
// work holds the im2col matrix of a chunk of images, [chunk·OH·OW, KH·KW·C];
// it needs at least g.Im2ColSize(1) elements and the chunk is as many images
// as it holds. dst must not overlap x, filter or work. float32 splits its
// work over p's threads and packs into p's Scratch; float64 runs its
// products on the calling goroutine. It panics if g is invalid or a length
// does not match.
func Conv2DOn[T Float](p *Pool, dst, x, filter, work []T, g ConvGeom, f int) []T {
	return conv2D(p, "Conv2D", dst, x, filter, work, g, f, MatMulOn[T], false, ConvAuto)
}

// conv2D is Conv2DOn named fn with its products by mm: MatMulOn, or with
// bf16 MatMulBF16On (whose jobs pack with its tier).
func conv2D[T Float](p *Pool, fn string, dst, x, filter, work []T, g ConvGeom, f int, mm matMulFunc[T], bf16 bool, algo ConvAlgo) []T {
	if g.General() {
		return conv2DGeneral(p, fn, dst, x, filter, work, g, f)
	}
	chunk := g.checkConv(fn, f, "x", len(x), "filter", len(filter), "dst", len(dst), len(work))
	per, k := g.OH*g.OW, g.KH*g.KW*g.C
	if k == 0 {
		clear(dst)
		return dst
	}
	if algo != ConvIm2col && convDirect(p, dst, x, filter, work, g, f, bf16) { // float32, few channels (vision_direct.go)
		return dst
	}
	if d32, ok := any(dst).([]float32); ok && per > 0 && conv2DJob(p, d32, any(x).([]float32), any(filter).([]float32), any(work).([]float32), g, f, bf16) {
		return dst
	}
	return conv2DChunks(p, dst, x, filter, work, g, f, chunk, mm)
}

// conv2DChunks is Conv2D as im2col of chunks of images and products by mm.
func conv2DChunks[T Float](p *Pool, dst, x, filter, work []T, g ConvGeom, f, chunk int, mm matMulFunc[T]) []T {
	per, k := g.OH*g.OW, g.KH*g.KW*g.C
	for n0 := 0; n0 < g.N; n0 += chunk {
		nb := min(chunk, g.N-n0)
		rows := nb * per
		cols := work[:rows*k]
		inHalves(p, taskIm2col, [3][]T{cols, x}, g, n0, nb)
		// [rows, K]·[K, f] -> [rows, f]
		mm(p, dst[n0*per*f:(n0*per+rows)*f], cols, filter, rows, f, k, false, false, false)
	}
	return dst
}

// matMulFunc is MatMulOn's signature: MatMulOn, or MatMulBF16On for
// float32.
type matMulFunc[T Float] func(p *Pool, dst, a, b []T, m, n, k int, transA, transB, accumulate bool) []T

// Conv2DBackpropInputOn sets dx to the gradient of Σ dy·Conv2D(x, filter)
// with respect to x, on pool p, and returns dx.
//
//	dy: [N, OH, OW, f], filter: [KH, KW, C, f], dx: [N, H, W, C] (overwritten)
//
// Per chunk, dy·filterᵀ ([rows, f]·[f, K]) is written into work as columns,
// which col2im adds into the windows they came from, so where windows overlap
// their contributions sum. work is as for Conv2D. dx must not overlap the
// other operands. It panics if g is invalid or a length does not match.
func Conv2DBackpropInputOn[T Float](p *Pool, dx, dy, filter, work []T, g ConvGeom, f int) []T {
	return conv2DInput(p, "Conv2DBackpropInput", dx, dy, filter, work, g, f, MatMulOn[T], false, ConvAuto)
}

// conv2DInput is Conv2DBackpropInputOn named fn with its products by mm
// (bf16: MatMulBF16On).
func conv2DInput[T Float](p *Pool, fn string, dx, dy, filter, work []T, g ConvGeom, f int, mm matMulFunc[T], bf16 bool, algo ConvAlgo) []T {
	if g.General() {
		return conv2DInputGeneral(p, fn, dx, dy, filter, work, g, f)
	}
	chunk := g.checkConv(fn, f, "dx", len(dx), "filter", len(filter), "dy", len(dy), len(work))
	per, k := g.OH*g.OW, g.KH*g.KW*g.C
	if k == 0 || per == 0 || f == 0 { // f == 0: products of inner size 0, which the float32 jobs do not take
		clear(dx)
		return dx
	}
	if algo != ConvIm2col && convInputDirect(p, dx, dy, filter, work, g, f, bf16) { // float32, stride 1 (vision_direct.go)
		return dx
	}
	if d32, ok := any(dx).([]float32); ok && conv2DInputJob(p, d32, any(dy).([]float32), any(filter).([]float32), any(work).([]float32), g, f, bf16) {
		return dx
	}
	return conv2DInputChunks(p, dx, dy, filter, work, g, f, chunk, mm)
}

// conv2DInputChunks is Conv2DBackpropInput as products by mm and col2im of
// chunks of images.
func conv2DInputChunks[T Float](p *Pool, dx, dy, filter, work []T, g ConvGeom, f, chunk int, mm matMulFunc[T]) []T {
	per, k := g.OH*g.OW, g.KH*g.KW*g.C
	clear(dx)
	for n0 := 0; n0 < g.N; n0 += chunk {
		nb := min(chunk, g.N-n0)
		rows := nb * per
		cols := work[:rows*k]
		// [rows, f]·[K, f]ᵀ -> [rows, K]
		mm(p, cols, dy[n0*per*f:(n0*per+rows)*f], filter, rows, k, f, false, true, false)
		inHalves(p, taskCol2im, [3][]T{dx, cols}, g, n0, nb)
	}
	return dx
}

// Conv2DBackpropFilterOn sets dfilter to the gradient of
// Σ dy·Conv2D(x, filter) with respect to filter, on pool p, and returns
// dfilter.
//
//	x: [N, H, W, C], dy: [N, OH, OW, f], dfilter: [KH, KW, C, f] (overwritten)
//
// Per chunk, dfilter += im2col(x)ᵀ·dy ([K, rows]·[rows, f]). work is as for
// Conv2D. dfilter must not overlap the other operands. It panics if g is
// invalid or a length does not match.
func Conv2DBackpropFilterOn[T Float](p *Pool, dfilter, x, dy, work []T, g ConvGeom, f int) []T {
	return conv2DFilter(p, "Conv2DBackpropFilter", dfilter, x, dy, work, g, f, MatMulOn[T], false, ConvAuto)
}

// conv2DFilter is Conv2DBackpropFilterOn named fn with its products by mm
// (bf16: MatMulBF16On).
func conv2DFilter[T Float](p *Pool, fn string, dfilter, x, dy, work []T, g ConvGeom, f int, mm matMulFunc[T], bf16 bool, algo ConvAlgo) []T {
	if g.General() {
		return conv2DFilterGeneral(p, fn, dfilter, x, dy, work, g, f)
	}
	chunk := g.checkConv(fn, f, "x", len(x), "dfilter", len(dfilter), "dy", len(dy), len(work))
	per, k := g.OH*g.OW, g.KH*g.KW*g.C
	if k == 0 || per == 0 || g.N == 0 {
		clear(dfilter)
		return dfilter
	}
	if (algo == ConvDirect || algo == ConvAuto) && convFilterStem(p, dfilter, x, dy, work, g, f, bf16) { // float32, channels not a multiple of 4: a stem (vision_stem.go)
		return dfilter
	}
	if algo != ConvIm2col && convFilterDirect(p, dfilter, x, dy, g, f, bf16, algo == ConvDirect) { // float32, few channels (vision_direct.go)
		return dfilter
	}
	if d32, ok := any(dfilter).([]float32); ok && conv2DFilterJob(p, d32, any(x).([]float32), any(dy).([]float32), any(work).([]float32), g, f, bf16) {
		return dfilter
	}
	return conv2DFilterChunks(p, dfilter, x, dy, work, g, f, chunk, mm)
}

// conv2DFilterChunks is Conv2DBackpropFilter as im2col of chunks of images
// and products by mm, accumulated.
func conv2DFilterChunks[T Float](p *Pool, dfilter, x, dy, work []T, g ConvGeom, f, chunk int, mm matMulFunc[T]) []T {
	per, k := g.OH*g.OW, g.KH*g.KW*g.C
	clear(dfilter)
	for n0 := 0; n0 < g.N; n0 += chunk {
		nb := min(chunk, g.N-n0)
		rows := nb * per
		cols := work[:rows*k]
		inHalves(p, taskIm2col, [3][]T{cols, x}, g, n0, nb)
		// [rows, K]ᵀ·[rows, f] -> [K, f], accumulated over chunks
		mm(p, dfilter, cols, dy[n0*per*f:(n0*per+rows)*f], k, f, rows, true, false, true)
	}
	return dfilter
}

// im2col writes the windows of images n0 ... n0+nb-1 of x into cols, one row
// of K = KH·KW·C elements per output position (row-major over n, oh, ow), in
// the filter's (kh, kw, c) order; padding is written as zero. Within a window
// row the in-range columns are contiguous in x (KW·C elements at most), so
// each is one copy.
func im2col[T Float](cols, x []T, g ConvGeom, n0, nb int) {
	im2colRows(cols, x, g, n0*g.OH, (n0+nb)*g.OH)
}

// im2colRows is im2col over the output rows q0 ... q1-1, where output row
// q is row q%OH of image q/OH.
func im2colRows[T Float](cols, x []T, g ConvGeom, q0, q1 int) {
	rowLen := g.KW * g.C
	k := g.KH * rowLen
	img := g.H * g.W * g.C
	r := 0
	for q := q0; q < q1; q++ {
		n, oh := q/g.OH, q%g.OH
		xi := x[n*img : n*img+img]
		ih0 := oh*g.SH - g.PadTop
		for ow := 0; ow < g.OW; ow++ {
			iw0 := ow*g.SW - g.PadLeft
			lo, hi := window(iw0, g.KW, g.W)
			row := cols[r*k : r*k+k]
			for kh := 0; kh < g.KH; kh++ {
				seg := row[kh*rowLen : kh*rowLen+rowLen]
				ih := ih0 + kh
				if ih < 0 || ih >= g.H || lo == hi {
					clear(seg)
					continue
				}
				src := (ih*g.W + iw0 + lo) * g.C
				if rowLen <= 16 && lo == 0 && hi == g.KW {
					// a short row (few channels): a loop beats a call
					for j, v := range xi[src : src+rowLen] {
						seg[j] = v
					}
					continue
				}
				clear(seg[:lo*g.C])
				copy(seg[lo*g.C:hi*g.C], xi[src:src+(hi-lo)*g.C])
				clear(seg[hi*g.C:])
			}
			r++
		}
	}
}

// col2im is the adjoint of im2col: it adds each row of cols into the window
// of images n0 ... n0+nb-1 of dx it was read from, dropping padding. Each
// dx cell receives its additions in window order (ow, then kh), whichever
// loop makes them.
func col2im[T Float](dx, cols []T, g ConvGeom, n0, nb int) {
	rowLen := g.KW * g.C
	k := g.KH * rowLen
	img := g.H * g.W * g.C
	// windows [owA, owB) of a row lie wholly inside the input's width
	owA, owB := g.OW, g.OW
	for ow := 0; ow < g.OW; ow++ {
		if iw0 := ow*g.SW - g.PadLeft; iw0 >= 0 && iw0+g.KW <= g.W {
			owA = min(owA, ow)
			owB = ow + 1
		}
	}
	r := 0
	for n := n0; n < n0+nb; n++ {
		di := dx[n*img : n*img+img]
		for oh := 0; oh < g.OH; oh++ {
			ih0 := oh*g.SH - g.PadTop
			kh0, kh1 := window(ih0, g.KH, g.H)
			if kh0 == kh1 {
				r += g.OW
				continue
			}
			for ow := 0; ow < owA; ow++ {
				col2imWindow(di, cols[(r+ow)*k:(r+ow+1)*k], g, ih0, kh0, kh1, ow*g.SW-g.PadLeft)
			}
			if owA < owB {
				d := di[((ih0+kh0)*g.W+owA*g.SW-g.PadLeft)*g.C:]
				s := cols[(r+owA)*k+kh0*rowLen : (r+owB)*k]
				if !col2imRowSIMD(d, s, owB-owA, g.SW*g.C, k, kh1-kh0, g.W*g.C, rowLen, rowLen) {
					for ow := owA; ow < owB; ow++ {
						col2imWindow(di, cols[(r+ow)*k:(r+ow+1)*k], g, ih0, kh0, kh1, ow*g.SW-g.PadLeft)
					}
				}
			}
			for ow := owB; ow < g.OW; ow++ {
				col2imWindow(di, cols[(r+ow)*k:(r+ow+1)*k], g, ih0, kh0, kh1, ow*g.SW-g.PadLeft)
			}
			r += g.OW
		}
	}
}

// col2imWindow adds the in-range part of one window's row of cols, rows
// [kh0, kh1) of the window, into di ([H, W, C] of one image); the window's
// top-left cell is (ih0, iw0).
func col2imWindow[T Float](di, row []T, g ConvGeom, ih0, kh0, kh1, iw0 int) {
	rowLen := g.KW * g.C
	lo, hi := window(iw0, g.KW, g.W)
	if lo == hi {
		return
	}
	for kh := kh0; kh < kh1; kh++ {
		dst := ((ih0+kh)*g.W + iw0 + lo) * g.C
		d := di[dst : dst+(hi-lo)*g.C]
		s := row[kh*rowLen+lo*g.C : kh*rowLen+hi*g.C]
		for j, v := range s {
			d[j] += v
		}
	}
}

// im2colCols writes columns [a, b) of the im2col rows of output rows q0 ...
// q1-1 (see im2colRows) into cols, [rows, b-a] row-major.
func im2colCols[T Float](cols, x []T, g ConvGeom, q0, q1, a, b int) {
	rowLen := g.KW * g.C
	if a == 0 && b == g.KH*rowLen {
		im2colRows(cols, x, g, q0, q1)
		return
	}
	w := b - a
	img := g.H * g.W * g.C
	r := 0
	for q := q0; q < q1; q++ {
		n, oh := q/g.OH, q%g.OH
		xi := x[n*img : n*img+img]
		ih0 := oh*g.SH - g.PadTop
		for ow := 0; ow < g.OW; ow++ {
			iw0 := ow*g.SW - g.PadLeft
			lo, hi := window(iw0, g.KW, g.W)
			row := cols[r*w : r*w+w]
			r++
			for kh := a / rowLen; kh*rowLen < b; kh++ {
				// elements [e0, e1) of window row kh, of which [v0, v1) are inside the input
				e0, e1 := max(a-kh*rowLen, 0), min(b-kh*rowLen, rowLen)
				seg := row[kh*rowLen+e0-a : kh*rowLen+e1-a]
				ih := ih0 + kh
				v0, v1 := max(e0, lo*g.C), min(e1, hi*g.C)
				if ih < 0 || ih >= g.H || v0 >= v1 {
					clear(seg)
					continue
				}
				clear(seg[:v0-e0])
				src := (ih*g.W+iw0)*g.C + v0
				copy(seg[v0-e0:v1-e0], xi[src:src+v1-v0])
				clear(seg[v1-e0:])
			}
		}
	}
}
