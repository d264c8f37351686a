package kernels

// Direct convolution in float32: Conv2D (and, for stride 1, its input
// gradient, as the convolution of dy with the filter turned half a turn and
// its channels swapped; and its filter gradient, filtTiles) as tiles of up to twelve output positions of one
// output row by 16 or 32 output channels held in registers, each input value
// read where it lies in x (vision_amd64.s). im2col's lowering costs as much
// as the product when the channels are few (a 3x3 convolution of 16
// channels to 16 packs every im2col element for 16 multiply-adds); here
// nothing is copied but, with padding at the sides, the window's input rows
// into a padded row buffer (a slice of the convolution's workspace per
// part), so that every position of an output row reads whole window rows
// and a row runs as tiles of twelve. Every output element sums its taps
// (row-major) and, per tap, its input channels in order, whatever the
// tiling and the threads.

// directTileRows are the heights of directTiles' columns.
var directTileRows = [5]int{12, 8, 4, 2, 1}

// maxDirectTaps bounds the window (KH·KW) the tiles take.
const maxDirectTaps = 49

// directConv turns the direct tiles on; tests turn them off to compare.
var directConv = true

// directConvOK reports whether a float32 Conv2D of g with f filters runs as
// direct tiles.
func directConvOK(g ConvGeom, f int) bool {
	return directConv && directTiles[0][0] != nil && f > 0 && f%16 == 0 && !g.General() && g.C > 0 &&
		g.KH*g.KW <= maxDirectTaps && g.N*g.OH*g.OW > 0
}

// convDirect runs Conv2D as direct tiles and returns true, or returns false
// (doing nothing) where they do not apply: not float32, products on
// bfloat16, a geometry directConvOK refuses, or too little work for the
// padded rows (directPadSlot per part).
func convDirect[T Float](p *Pool, dst, x, filter, work []T, g ConvGeom, f int, bf16 bool) bool {
	d32, ok := any(dst).([]float32)
	if !ok || bf16 || !directConvOK(g, f) {
		return false
	}
	return conv2DDirect(p, d32, any(x).([]float32), any(filter).([]float32), any(work).([]float32), g, f)
}

// convInputDirect runs Conv2DBackpropInput of a stride-1 convolution as the
// direct convolution of dy ([N, OH, OW, f]) with the filter turned half a
// turn, its channels swapped ([KH, KW, f, C], written into work) and the
// padding mirrored (KH-1-PadTop before), and returns true; or returns false
// where that does not apply (also when work cannot hold the filter).
func convInputDirect[T Float](p *Pool, dx, dy, filter, work []T, g ConvGeom, f int, bf16 bool) bool {
	d32, ok := any(dx).([]float32)
	gt, can := directInputGeom(g, f)
	k := g.KH * g.KW * g.C * f
	if !ok || bf16 || !can || len(work) < k {
		return false
	}
	wt, w := any(work).([]float32)[:k], any(filter).([]float32)
	// wt[kh, kw, j, c] = w[KH-1-kh, KW-1-kw, c, j]
	for kh := 0; kh < g.KH; kh++ {
		for kw := 0; kw < g.KW; kw++ {
			src := w[((g.KH-1-kh)*g.KW+g.KW-1-kw)*g.C*f:][:g.C*f]
			d := wt[(kh*g.KW+kw)*f*g.C:][:f*g.C]
			for c := 0; c < g.C; c++ {
				for j := 0; j < f; j++ {
					d[j*g.C+c] = src[c*f+j]
				}
			}
		}
	}
	return conv2DDirect(p, d32, any(dy).([]float32), wt, any(work).([]float32)[k:], gt, g.C)
}

type directJob struct {
	dst, x, w, pad []float32
	g              ConvGeom
	f, parts, slot int
	offs           []directOffs // one per part
}

// directOffs are one part's tap offsets. They live in the pool (grown on
// first use), not on directRows' stack: the tiles are called through a
// table of functions, so arrays on the stack whose address they take
// would escape, a heap allocation per call of every step.
type directOffs struct {
	x, w [maxDirectTaps]int
	// rows: which input row (n·H + ih + 1; 0 for none) each of the KH
	// padded row slots holds
	rows [maxDirectTaps]int
}

// directInputGeom returns the geometry of the direct convolution that is
// Conv2DBackpropInput of g with f filters (convInputDirect), and whether
// the tiles take it: stride 1, input channels a multiple of 16, padding
// smaller than the window, and directConvOK.
func directInputGeom(g ConvGeom, f int) (ConvGeom, bool) {
	if g.SH != 1 || g.SW != 1 || g.C%16 != 0 || g.PadTop >= g.KH || g.PadLeft >= g.KW || f == 0 {
		return ConvGeom{}, false
	}
	gt := ConvGeom{N: g.N, H: g.OH, W: g.OW, C: f, KH: g.KH, KW: g.KW, SH: 1, SW: 1,
		PadTop: g.KH - 1 - g.PadTop, PadLeft: g.KW - 1 - g.PadLeft, OH: g.H, OW: g.W}
	return gt, directConvOK(gt, g.C)
}

// directPadSlot returns the floats of one part's padded input rows: KH rows
// of PadLeft + W + PadRight cells (0 without padding at the sides).
func directPadSlot(g ConvGeom) int {
	if g.PadLeft == 0 && g.PadRight() == 0 {
		return 0
	}
	return g.KH * (g.PadLeft + g.W + g.PadRight()) * g.C
}

// conv2DDirect computes Conv2D of g (directConvOK) on pool p, as parts of
// whole output rows, and returns true; or returns false when work cannot
// hold the parts' padded rows.
func conv2DDirect(p *Pool, dst, x, w, work []float32, g ConvGeom, f int) bool {
	rows := g.N * g.OH
	parts, slot := min(rows, 4*p.Threads()), directPadSlot(g)
	if slot > 0 {
		parts = min(parts, len(work)/slot)
		if parts == 0 {
			return false
		}
	}
	p.calls.directMu.Lock()
	defer p.calls.directMu.Unlock()
	if len(p.calls.directOffs) < parts {
		p.calls.directOffs = make([]directOffs, parts)
	}
	j := &p.calls.direct
	*j = directJob{dst: dst, x: x, w: w, pad: work, g: g, f: f, parts: parts, slot: slot, offs: p.calls.directOffs}
	ParallelOn(p, parts, directPart, j)
	*j = directJob{} // drop the caller's slices
	return true
}

func directPart(arg any, p int) {
	j := arg.(*directJob)
	rows := j.g.N * j.g.OH
	directRows(j.dst, j.x, j.w, j.pad[p*j.slot:(p+1)*j.slot], j.g, j.f, rows*p/j.parts, rows*(p+1)/j.parts, &j.offs[p])
}

// directRows computes the output rows q0 ... q1-1 (row q is row q%OH of
// image q/OH) with the direct tiles. With padding at the sides, the
// window's input rows are first copied between zeros into pad (KH rows of
// PadLeft + W + PadRight cells), so that every output position reads its
// whole window row from one place and a row runs as tiles of twelve. Input
// row ih lives in slot ih mod KH, so the next output row finds the rows it
// shares with this one staged already: each input row is copied once, not
// once for every window row that reads it.
func directRows(dst, x, w, pad []float32, g ConvGeom, f, q0, q1 int, o *directOffs) {
	xoff, woff, tag := &o.x, &o.w, &o.rows
	img := g.H * g.W * g.C
	staged := len(pad) > 0
	wp := g.PadLeft + g.W + g.PadRight()
	clear(pad)
	clear(tag[:g.KH])
	for q := q0; q < q1; q++ {
		n, oh := q/g.OH, q%g.OH
		xi := x[n*img : (n+1)*img]
		out := dst[q*g.OW*f : (q+1)*g.OW*f]
		ih0 := oh*g.SH - g.PadTop
		kh0, kh1 := window(ih0, g.KH, g.H)
		if kh0 == kh1 {
			clear(out)
			continue
		}
		base := xi
		taps := 0
		for kh := kh0; kh < kh1; kh++ {
			ih := ih0 + kh
			row := ih * g.W * g.C
			if staged {
				s := ih % g.KH
				if t := n*g.H + ih + 1; tag[s] != t {
					copy(pad[(s*wp+g.PadLeft)*g.C:][:g.W*g.C], xi[row:row+g.W*g.C])
					tag[s] = t
				}
				row = s * wp * g.C
			}
			for kw := 0; kw < g.KW; kw++ {
				xoff[taps] = (row + kw*g.C) * 4
				woff[taps] = (kh*g.KW + kw) * g.C * f * 4
				taps++
			}
		}
		if staged {
			base = pad
		}
		for ow := 0; ow < g.OW; {
			ri := 0
			for directTileRows[ri] > g.OW-ow {
				ri++
			}
			for f0 := 0; f0 < f; {
				v := 1
				if f-f0 >= 32 {
					v = 2
				}
				directTiles[v-1][ri](&out[ow*f+f0], &base[ow*g.SW*g.C], &w[f0], &xoff[0], &woff[0], taps, g.C, g.SW*g.C, f, f)
				f0 += 16 * v
			}
			ow += directTileRows[ri]
		}
	}
}

// filtChannels are the channel blocks of filtTiles' columns, for V = 1, 2.
var filtChannels = [2][3]int{{16, 8, 4}, {12, 8, 4}}

// directFilterOK reports whether a float32 Conv2DBackpropFilter of g with f
// filters runs as direct tiles: the input channels a multiple of 4 and at
// most 64 (the widths measured faster than im2col's product: 3.3x at 16
// channels, 1.3x at 64, one thread).
//
// Past 16 channels the tiles lose on large images: the reference cnn's
// second convolution (26x26x32 -> 24x24x64, batch 128) took 81 ms on two
// threads as tiles and 31 ms through im2col's product (Zen 4), while the
// ResNet-20's 14x14x32 and 7x7x64 gain; so past 16 channels the tiles take
// outputs of at most directFilterMaxArea positions.
func directFilterOK(g ConvGeom, f int) bool {
	return directFilterCan(g, f) && (g.C <= 16 || g.OH*g.OW <= directFilterMaxArea)
}

// directFilterCan reports whether the direct filter-gradient tiles can run
// g with f filters at all: directFilterOK without its rule of thumb, the
// candidates a measured choice (ConvAlgos) times.
func directFilterCan(g ConvGeom, f int) bool {
	return directConv && filtTiles[0][0] != nil && f > 0 && f%16 == 0 && !g.General() && g.C%4 == 0 &&
		g.C > 0 && g.C <= 64 && g.N*g.OH*g.OW > 0
}

// directFilterMaxArea bounds an output's positions (OH·OW) for the direct
// filter gradient past 16 input channels (directFilterOK).
const directFilterMaxArea = 14 * 14

// filterUnit is one block of the filter gradient: tap (kh, kw), input
// channels [c0, c0+cb), filters [f0, f0+16·v).
type filterUnit struct{ kh, kw, c0, cb, ci, f0, v int }

// filterUnits calls fn for every unit of g's filter gradient with f
// filters, in a fixed order, and returns how many there are.
func filterUnits(g ConvGeom, f int, fn func(i int, u filterUnit)) int {
	i := 0
	for kh := 0; kh < g.KH; kh++ {
		for kw := 0; kw < g.KW; kw++ {
			for f0 := 0; f0 < f; {
				v := 1
				if f-f0 >= 32 {
					v = 2
				}
				for c0 := 0; c0 < g.C; {
					ci := 0
					for filtChannels[v-1][ci] > g.C-c0 {
						ci++
					}
					if fn != nil {
						fn(i, filterUnit{kh, kw, c0, filtChannels[v-1][ci], ci, f0, v})
					}
					i++
					c0 += filtChannels[v-1][ci]
				}
				f0 += 16 * v
			}
		}
	}
	return i
}

// convFilterDirect runs Conv2DBackpropFilter as direct tiles and returns
// true, or returns false (doing nothing) where they do not apply
// (directFilterOK, or directFilterCan when forced; float32, not on
// bfloat16). Each unit sums its positions
// image by image, row by row, on one thread: the result does not depend on
// the threads.
func convFilterDirect[T Float](p *Pool, dfilter, x, dy []T, g ConvGeom, f int, bf16, forced bool) bool {
	d32, ok := any(dfilter).([]float32)
	if !ok || bf16 || (forced && !directFilterCan(g, f)) || (!forced && !directFilterOK(g, f)) {
		return false
	}
	units := filterUnits(g, f, nil)
	p.calls.directMu.Lock()
	defer p.calls.directMu.Unlock()
	j := &p.calls.direct
	*j = directJob{dst: d32, x: any(x).([]float32), w: any(dy).([]float32), g: g, f: f, parts: min(units, 4*p.Threads())}
	ParallelOn(p, j.parts, filterPart, j)
	*j = directJob{}
	return true
}

// filterPart computes part p of the units of the job in arg (w holds dy).
func filterPart(arg any, p int) {
	j := arg.(*directJob)
	g, f := j.g, j.f
	units := filterUnits(g, f, nil)
	u0, u1 := units*p/j.parts, units*(p+1)/j.parts
	// every unit reads all of dy and x: a chunk of images at a time, so
	// that its units read the chunk from the cache instead of memory
	nb := max(1, filterChunkBytes/(4*(g.OH*g.OW*f+g.H*g.W*g.C)))
	for n0 := 0; n0 < g.N; n0 += nb {
		n1 := min(g.N, n0+nb)
		filterUnits(g, f, func(i int, u filterUnit) {
			if i >= u0 && i < u1 {
				filterUnitRun(j.dst, j.x, j.w, g, f, u, n0, n1)
			}
		})
	}
}

// filterChunkBytes bounds the images of dy and x the direct filter
// gradient's units read in turn (one image at least). Of 128 KiB, 512
// KiB, 1 and 4 MiB, 128 KiB was the fastest on the reference cnn's second
// layer (a Zen 5, 1 MiB of L2 a core): 14.2 ms a step against 17.4,
// 15.1 and 17.4; each unit walking all N images in turn took 28.3 ms.
// The order of each unit's sums is the same, so the bits are.
const filterChunkBytes = 128 << 10

// validRange returns the output positions [a, b) of one dimension whose
// tap k (stride s, padding before pad) reads inside [0, in).
func validRange(out, in, s, pad, k int) (a, b int) {
	// o·s - pad + k in [0, in)
	a = max(0, (pad-k+s-1)/s)
	if pad-k < 0 {
		a = 0
	}
	b = min(out, (in-1+pad-k)/s+1)
	if in-1+pad-k < 0 {
		b = 0
	}
	return a, max(a, b)
}

// filterUnitRun adds images [n0, n1) to one unit of the filter gradient
// in dfilter (sets it from image 0).
func filterUnitRun(dfilter, x, dy []float32, g ConvGeom, f int, u filterUnit, n0, n1 int) {
	oh0, oh1 := validRange(g.OH, g.H, g.SH, g.PadTop, u.kh)
	ow0, ow1 := validRange(g.OW, g.W, g.SW, g.PadLeft, u.kw)
	dst := dfilter[((u.kh*g.KW+u.kw)*g.C+u.c0)*f+u.f0:]
	if oh0 == oh1 || ow0 == ow1 {
		for c := 0; c < u.cb && n0 == 0; c++ {
			clear(dst[c*f : c*f+16*u.v])
		}
		return
	}
	tile := filtTiles[u.v-1][u.ci]
	img, out := g.H*g.W*g.C, g.OH*g.OW*f
	ih, iw := oh0*g.SH-g.PadTop+u.kh, ow0*g.SW-g.PadLeft+u.kw
	for n := n0; n < n1; n++ {
		xs := x[n*img+(ih*g.W+iw)*g.C+u.c0:]
		ds := dy[n*out+(oh0*g.OW+ow0)*f+u.f0:]
		tile(&dst[0], &xs[0], &ds[0], oh1-oh0, ow1-ow0, g.SW*g.C*4, g.SH*g.W*g.C*4, f*4, g.OW*f*4, f, n > 0)
	}
}
