package kernels

// Winograd's minimal filtering for 3×3 stride-1 convolutions (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2016),
// F(m×m, 3×3) for m = 2 and 4: each m×m block of outputs ("tile") is
// computed from an n×n block of inputs (n = m + 2) with n² products a
// channel pair instead of 9m²: 2.25 times fewer multiply-adds than the
// direct sum for F(2×2, 3×3) (16 for 36), 4 times for F(4×4, 3×3) (36
// for 144). With d an n×n input tile, g a 3×3 filter and w an m×m tile of
// output gradients:
//
//	forward:          y  = Aᵀ·[(G·g·Gᵀ) ⊙ (Bᵀ·d·B)]·A
//	filter gradient:  dg = Gᵀ·[(A·w·Aᵀ) ⊙ (Bᵀ·d·B)]·G, summed over tiles
//	input gradient:   the forward product of dy, padded by 2 - pad, with
//	                  the filter turned 180° and its channels swapped
//
// (the filter gradient follows from the forward formula: both are the
// derivatives of one trilinear form Σ w·y). Over channels the ⊙ becomes
// n² matrix products, one per element ξ of the n×n transformed tile:
// M[ξ] = V[ξ]·U[ξ] with V[ξ] [tiles, C] and U[ξ] [C, F] for the forward
// product, and M[ξ] = V[ξ]ᵀ·W[ξ] for the filter gradient; they run on the
// direct convolution's register tiles as convolutions of one tap
// (wgProduct, wgFilterProduct: nothing packed) where those take the
// channels, else on the packed product (gemm.go). The transforms of d, w
// and the products' results hold small integers (F(2×2, 3×3)'s only 0 and
// ±1; F(4×4, 3×3)'s up to 8), and run sixteen channels at a time in
// assembly (wgBT512, wgA512, wgAT512; wg4BT512, wg4A512, wg4AT512); the
// filter's transforms (with fractions) run once a call in Go, split over
// the threads.
//
// Numerics. The transforms add and subtract up to 16 inputs (36) around
// the products; F(2×2, 3×3) is the form with the smallest error, below
// the direct sum's; F(4×4, 3×3)'s 4s, 5s and 8s make its error 3 to 9
// times the direct sum's. kernels' tests bound both (TestWinogradError);
// docs/kernels.md gives the measured error per layer shape.
//
// Work. The workspace holds the transformed filter (the filter gradient:
// two groups' sums) and, per thread, a slot of a chunk of tiles' V and M
// (W) and their staging (WinogradWork): a small image whole, padded so
// that every tile lies inside it (padImg, padDy), or else one edge tile at
// a time. The tiles split into chunks of wgRegionBytes; the forward
// product's chunks are independent, and the filter gradient's add up in
// two fixed groups, so the result does not depend on the number of
// threads.

// The tiles' transforms, by their matrices in wgMats (genvision holds the
// same): Bᵀ, Aᵀ, and A with its last row negated, which the final
// transform of the filter gradient (wgGp, G's last row negated) undoes.
// F(4×4, 3×3)'s (Lavin and Gray's, at the points 0, ±1, ±2 and ∞) are
// Bᵀ, Aᵀ and A = (Aᵀ)ᵀ, and G for the filter.
const (
	wgBT = iota
	wgAT
	wgA
	wg4BT
	wg4AT
	wg4A
)

var wgMats = [6][][]int{
	wgBT: {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
	wgAT: {{1, 1, 1, 0}, {0, 1, -1, -1}},
	wgA:  {{1, 0}, {1, 1}, {1, -1}, {0, 1}},
	wg4BT: {{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
		{0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}},
	wg4AT: {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}},
	wg4A:  {{1, 0, 0, 0}, {1, 1, 1, 1}, {1, -1, 1, -1}, {1, 2, 4, 8}, {1, -2, 4, -8}, {0, 0, 0, 1}},
}

// wgGp is G' for F(2×2, 3×3)'s filter gradient's final transform: G with
// its last row negated (undoing A's); F(4×4, 3×3)'s G is in wg4G and wg4Gt.
var wgGp = [4][3]float32{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, -1}}

// wgRegionBytes is the size aimed at for one chunk's V and M: in a core's
// L2 with the packed panels of its products.
var wgRegionBytes = 512 << 10

// WinogradOK reports whether Winograd (either form) can run a
// convolution of geometry g (and its gradients): a plain 3×3 window at
// stride 1, padded by at most 2 before.
func WinogradOK(g ConvGeom) bool {
	return !g.General() && g.KH == 3 && g.KW == 3 && g.SH == 1 && g.SW == 1 &&
		g.PadTop <= 2 && g.PadLeft <= 2 && g.N > 0 && g.OH > 0 && g.OW > 0 && g.C > 0
}

// wgShape is one Winograd call's sizes: the forward product of an input of
// cin channels over geometry g into cout channels (the input gradient is
// one, over the turned geometry), or the filter gradient.
type wgShape struct {
	g          ConvGeom
	cin, cout  int
	filterGrad bool
	turned     bool // the input gradient: the forward product over the turned geometry
	m, n       int  // F(m×m, 3×3): a tile's outputs across, and its inputs (m + 2)
	nx         int  // the transformed tile's elements (n²): products a channel pair
	bt, at, a  int  // the tile transforms' matrices in wgMats
	th, tw     int  // tiles down and across
	// padImg: the input is staged an image at a time, padded to hp×wp so
	// that every tile lies inside it (small images, where most tiles touch
	// an edge); else a tile that crosses an edge is staged alone
	padImg bool
	hp, wp int
	// padDy: the filter gradient stages an odd-sized dy image whole,
	// padded to whole tiles; padOut: the forward product writes an
	// odd-sized output image so, then copies it out
	padDy, padOut bool
	regs          bool // the products run on the direct convolution's register tiles (wgProduct)
}

func newWgShape(kind ConvKind, g ConvGeom, f, m int) wgShape {
	s := wgShape{g: g, cin: g.C, cout: f, filterGrad: kind == ConvFilterGrad, turned: kind == ConvInputGrad,
		m: m, n: m + 2, nx: (m + 2) * (m + 2), bt: wgBT, at: wgAT, a: wgA}
	if m == 4 {
		s.bt, s.at, s.a = wg4BT, wg4AT, wg4A
	}
	if kind == ConvInputGrad {
		// dx = the forward product of dy (padded by 2 - pad) with the
		// filter turned and its channels swapped
		s.g = ConvGeom{N: g.N, H: g.OH, W: g.OW, C: f, KH: 3, KW: 3, SH: 1, SW: 1,
			PadTop: 2 - g.PadTop, PadLeft: 2 - g.PadLeft, OH: g.H, OW: g.W}
		s.cin, s.cout = f, g.C
	}
	s.th, s.tw = ceilDiv(s.g.OH, m), ceilDiv(s.g.OW, m)
	s.hp, s.wp = m*s.th+2, m*s.tw+2
	s.padImg = wgPadImages && s.hp*s.wp*s.cin <= wgPadImage
	odd := s.g.OH%m != 0 || s.g.OW%m != 0 // tiles that cross the output's edge
	s.padDy = wgPadImages && s.filterGrad && odd && m*m*s.th*s.tw*s.cout <= wgPadImage
	s.padOut = wgPadImages && !s.filterGrad && odd && m*m*s.th*s.tw*s.cout <= wgPadImage
	if s.filterGrad {
		s.regs = wgTiles && filtTiles[0][0] != nil && s.cout%16 == 0 && s.cin%4 == 0
	} else {
		s.regs = wgTiles && directTiles[0][0] != nil && s.cout%16 == 0
	}
	return s
}

// wgTiles lets the products run on the register tiles where they apply;
// tests turn it off to check the packed products.
var wgTiles = true

// wgZeroOffs is the one tap offset (0) the register tiles take for
// Winograd's products: a table the tiles only read.
var wgZeroOffs = [1]int{0}

// wgProduct sets m ([rows, cout]) = v ([rows, cin])·u ([cin, cout]) with
// the direct convolution's register tiles as a convolution of one tap
// (cout a multiple of 16): no packing, each element summed over the
// channels in order.
func wgProduct(m, v, u []float32, rows, cin, cout int) {
	if len(m) < rows*cout || len(v) < rows*cin || len(u) < cin*cout {
		panicf("winograd: a product's operands are too short")
	}
	for r0 := 0; r0 < rows; {
		ri := 0
		for directTileRows[ri] > rows-r0 {
			ri++
		}
		for f0 := 0; f0 < cout; {
			nv := 1
			if cout-f0 >= 32 {
				nv = 2
			}
			directTiles[nv-1][ri](&m[r0*cout+f0], &v[r0*cin], &u[f0], &wgZeroOffs[0], &wgZeroOffs[0], 1, cin, cin, cout, cout)
			f0 += 16 * nv
		}
		r0 += directTileRows[ri]
	}
}

// wgFilterProduct sets (acc: adds to) d ([cin, cout]) = v ([rows, cin])ᵀ·w
// ([rows, cout]) with the filter gradient's register tiles (cin a multiple
// of 4, cout of 16), each element summed over the rows in order.
func wgFilterProduct(d, v, w []float32, rows, cin, cout int, acc bool) {
	if len(d) < cin*cout || len(v) < rows*cin || len(w) < rows*cout || rows < 1 {
		panicf("winograd: a filter product's operands are too short")
	}
	for f0 := 0; f0 < cout; {
		nv := 1
		if cout-f0 >= 32 {
			nv = 2
		}
		for c0 := 0; c0 < cin; {
			ci := 0
			for filtChannels[nv-1][ci] > cin-c0 {
				ci++
			}
			filtTiles[nv-1][ci](&d[c0*cout+f0], &v[c0], &w[f0], 1, rows, 4*cin, 0, 4*cout, 0, cout, acc)
			c0 += filtChannels[nv-1][ci]
		}
		f0 += 16 * nv
	}
}

func (s wgShape) tiles() int { return s.g.N * s.th * s.tw }

// fixed is the workspace's fixed part: the transformed filter, or the
// filter gradient's two groups' sums.
func (s wgShape) fixed() int {
	if s.filterGrad {
		return 2 * s.nx * s.cin * s.cout
	}
	return s.nx * s.cin * s.cout
}

// perTile is a tile's floats in a slot, and stage the slot's staging tiles.
func (s wgShape) perTile() int { return s.nx * (s.cin + s.cout) }
func (s wgShape) stage() int   { return s.stageIn() + s.stageOut() }

// stageOut is the slot's staging for the outputs (or the filter
// gradient's dy): a whole image padded to whole tiles (padOut, padDy), or
// one tile.
func (s wgShape) stageOut() int {
	if s.padDy || s.padOut {
		return s.m * s.m * s.th * s.tw * s.cout
	}
	return s.nx * s.cout
}

// stageIn is the slot's staging for the inputs: a whole padded image
// (padImg), or one tile.
func (s wgShape) stageIn() int {
	if s.padImg {
		return s.hp * s.wp * s.cin
	}
	return s.nx * s.cin
}

// wgPadImage is the most floats of a padded image staged whole.
const wgPadImage = 64 << 10

// chunk returns the tiles of a chunk and the slots that work of n floats
// holds for threads threads.
func (s wgShape) chunk(n, threads int) (tiles, slots int) {
	avail := n - s.fixed()
	tiles = max(1, min(wgRegionBytes/(4*s.perTile()), s.tiles()))
	if per := (avail/max(threads, 1) - s.stage()) / s.perTile(); per < tiles {
		tiles = max(1, per) // fewer tiles a chunk, a slot for each thread
	}
	if img := s.th * s.tw; s.padImg && tiles > img {
		tiles = tiles / img * img // whole images, each staged once
	}
	if s.filterGrad && s.tiles() >= 2 {
		tiles = min(tiles, ceilDiv(s.tiles(), 2)) // a chunk for each group at least
	}
	return tiles, (avail) / (tiles*s.perTile() + s.stage())
}

// WinogradWork returns the least workspace, in floats, that Winograd's
// form algo (ConvWinograd or ConvWinograd4) needs for the product kind
// over g with f filters: the fixed part and one slot of one tile (a larger
// workspace runs larger chunks, on more threads).
func WinogradWork(algo ConvAlgo, kind ConvKind, g ConvGeom, f int) int {
	return winogradWork(kind, g, f, algo.winogradTile())
}

func winogradWork(kind ConvKind, g ConvGeom, f, m int) int {
	s := newWgShape(kind, g, f, m)
	return s.fixed() + s.perTile() + s.stage()
}

// winogradPack is the most packing scratch Winograd's products need on
// g with f filters, over its three kinds and both forms.
func winogradPack(g ConvGeom, f int) int {
	need := 0
	for _, m := range []int{2, 4} {
		for _, kind := range []ConvKind{ConvForward, ConvInputGrad, ConvFilterGrad} {
			s := newWgShape(kind, g, f, m)
			rows, n, k := s.tiles(), s.cout, s.cin
			if s.filterGrad {
				rows, n, k = s.cin, s.cout, s.tiles()
			}
			tier, blk, ok := gemmSetup(n, false)
			if !ok {
				return 0
			}
			need = max(need, packNeed(tier, blk, rows, n, k).floats())
		}
	}
	return need
}

// winograd runs the float32 product kind on g with f filters as F(m×m,
// 3×3) (m 2 or 4) on pool p (dst; a, b as for ConvOn), and returns false,
// doing nothing, where it cannot (WinogradOK, or products run elsewhere).
func winograd(p *Pool, kind ConvKind, dst, a, b, work []float32, g ConvGeom, f, m int) bool {
	ran, _ := winogradMoments(p, kind, dst, a, b, work, g, f, m, nil, 0)
	return ran
}

// winogradMoments is winograd that also, for the forward product with mom
// non-nil, sums the moments of each group of k whole output images that a
// chunk of tiles writes into the group's two rows of mom (momentsGroup,
// 2·f float64s a group) while the chunk is in the cache. It returns the
// tiles of a chunk (0 where it summed none): a group whose tiles lie in
// two chunks is left to the caller (wgGroupSummed).
func winogradMoments(p *Pool, kind ConvKind, dst, a, b, work []float32, g ConvGeom, f, m int, mom []float64, k int) (ran bool, chunk int) {
	if !WinogradOK(g) || f < 1 || (m != 2 && m != 4) {
		return false, 0
	}
	s := newWgShape(kind, g, f, m)
	tier, blk, ok := gemmSetup(s.cout, false)
	if !ok || len(work) < winogradWork(kind, g, f, m) {
		return false, 0
	}
	x, dy, filter := g.N*g.H*g.W*g.C, g.N*g.OH*g.OW*f, 9*g.C*f
	want := [3][3]int{ConvForward: {dy, x, filter}, ConvInputGrad: {x, dy, filter}, ConvFilterGrad: {filter, x, dy}}[kind]
	if len(dst) != want[0] || len(a) != want[1] || len(b) != want[2] {
		panicf("%v: Winograd's operands hold %d, %d and %d floats, want %d, %d and %d", kind, len(dst), len(a), len(b), want[0], want[1], want[2])
	}
	tiles, slots := s.chunk(len(work), p.Threads())
	if kind != ConvForward || k < 1 || len(mom) < 2*f*ceilDiv(g.N, k) {
		mom = nil
	}
	fixed := work[:s.fixed()]
	p.calls.jobMu.Lock()
	defer p.calls.jobMu.Unlock()
	j := &p.calls.job
	*j = poolJob{kind: jobWinograd, maxSlots: slots, work: work[s.fixed():], per: tiles,
		slot: tiles*s.perTile() + s.stage(), tier: tier, blk: blk, wg: s, mom: mom, momImages: k}
	// the filter's transforms split over the pool's threads by channels
	j.regions = max(1, min(p.Threads(), g.C))
	switch kind {
	case ConvFilterGrad:
		// a: x, b: dy; two groups' sums into fixed, then dst from them
		j.x, j.filter, j.partial, j.y = a, b, fixed, dst
		j.groups = min(2, ceilDiv(s.tiles(), tiles))
		p.runJob(j, j.groups)
		j.wgPhase = wgFilterPhase
		p.runJob(j, j.regions)
	default:
		// a: the input (x or dy), b: the filter; U into fixed first
		j.x, j.filter, j.y, j.partial = a, fixed, dst, b
		j.wgPhase = wgFilterPhase
		p.runJob(j, j.regions)
		j.wgPhase = wgTilesPhase
		chunks := ceilDiv(s.tiles(), tiles)
		j.groups = ceilDiv(chunks, maxRegions) // chunks a region
		p.runJob(j, ceilDiv(chunks, j.groups))
	}
	*j = poolJob{}
	if mom == nil {
		return true, 0
	}
	return true, tiles
}

// wgGroupSummed reports whether winogradMoments summed group gr of k
// images of img tiles each (of n images) with chunks of chunk tiles: its
// tiles lie in one chunk.
func wgGroupSummed(gr, k, n, img, chunk int) bool {
	if chunk < 1 {
		return false
	}
	first, last := gr*k*img, min((gr+1)*k, n)*img-1
	return first/chunk == last/chunk
}

// maxRegions is the most regions runJob takes.
const maxRegions = 0xffff

// A jobWinograd's phases: the tiles, then (the filter gradient) the
// filter's transforms; or the filter's transforms, then the tiles.
const (
	wgTilesPhase = iota
	wgFilterPhase
)

// wgPart runs region r of a jobWinograd with the packing buffers ws and
// scratch slot.
func (j *poolJob) wgPart(ws *gemmWorkspace, r, slot int) {
	s := j.wg
	if j.wgPhase == wgFilterPhase {
		parts := j.regions
		if s.filterGrad {
			cf := s.cin * s.cout
			wgFilterOut(j.y, j.partial, s, j.groups, cf*r/parts, cf*(r+1)/parts)
			return
		}
		// the input gradient's shape swaps the channels: the filter's own
		// are [3, 3, cout, cin]
		c, f := s.cin, s.cout
		if s.turned {
			c, f = f, c
		}
		wgFilterIn(j.filter, j.partial, c, f, s.m, s.turned, c*r/parts, c*(r+1)/parts)
		return
	}
	sl := j.work[slot*j.slot : (slot+1)*j.slot]
	ntAll := s.tiles()
	if !s.filterGrad {
		// region r: chunks [r·groups, (r+1)·groups) (j.groups chunks a
		// region, so that the regions stay within runJob's bound)
		for ch := r * j.groups; ch < min((r+1)*j.groups, ceilDiv(ntAll, j.per)); ch++ {
			j.wgChunk(ws, sl, ch*j.per, min((ch+1)*j.per, ntAll))
		}
		return
	}
	// the filter gradient: group r's chunks, summed in order into its part
	// of j.partial
	cf := s.nx * s.cin * s.cout
	dst := j.partial[r*cf : (r+1)*cf]
	chunks := ceilDiv(ntAll, j.per)
	c0, c1 := chunks*r/j.groups, chunks*(r+1)/j.groups
	if c0 == c1 {
		clear(dst)
	}
	stIn, stOut := sl[j.per*s.perTile():][:s.stageIn()], sl[j.per*s.perTile()+s.stageIn():][:s.stageOut()]
	for ch := c0; ch < c1; ch++ {
		t0, t1 := ch*j.per, min((ch+1)*j.per, ntAll)
		nt := t1 - t0
		v, w := sl[:s.nx*nt*s.cin], sl[s.nx*nt*s.cin:s.nx*nt*(s.cin+s.cout)]
		s.inputTiles(v, nt*s.cin, j.x, t0, t1, stIn)
		s.gradTiles(w, nt*s.cout, j.filter, t0, t1, stOut)
		for xi := 0; xi < s.nx; xi++ {
			// [nt, cin]ᵀ·[nt, cout] -> [cin, cout], accumulated over chunks
			dx, vx, wx := dst[xi*s.cin*s.cout:(xi+1)*s.cin*s.cout], v[xi*nt*s.cin:(xi+1)*nt*s.cin], w[xi*nt*s.cout:(xi+1)*nt*s.cout]
			if s.regs {
				wgFilterProduct(dx, vx, wx, nt, s.cin, s.cout, ch > c0)
				continue
			}
			c := j.call(dx, vx, wx, s.cin, s.cout, nt, true, false)
			c.accumulate = ch > c0
			c.region(ws, 0, s.cin, 0, s.cout)
		}
	}
}

// wgChunk runs the forward product of tiles [t0, t1) in slot sl.
func (j *poolJob) wgChunk(ws *gemmWorkspace, sl []float32, t0, t1 int) {
	s := j.wg
	nt := t1 - t0
	v, m := sl[:s.nx*nt*s.cin], sl[s.nx*nt*s.cin:s.nx*nt*(s.cin+s.cout)]
	stIn, stOut := sl[j.per*s.perTile():][:s.stageIn()], sl[j.per*s.perTile()+s.stageIn():][:s.stageOut()]
	s.inputTiles(v, nt*s.cin, j.x, t0, t1, stIn)
	for xi := 0; xi < s.nx; xi++ {
		mx, vx, ux := m[xi*nt*s.cout:(xi+1)*nt*s.cout], v[xi*nt*s.cin:(xi+1)*nt*s.cin], j.filter[xi*s.cin*s.cout:(xi+1)*s.cin*s.cout]
		if s.regs {
			wgProduct(mx, vx, ux, nt, s.cin, s.cout)
			continue
		}
		c := j.call(mx, vx, ux, nt, s.cout, s.cin, false, false)
		c.region(ws, 0, nt, 0, s.cout)
	}
	s.outputTiles(j.y, m, nt*s.cout, t0, t1, stOut)
	if j.mom != nil { // the groups of k whole images in the chunk (winogradMoments)
		img, rows, c, k, n := s.th*s.tw, s.g.OH*s.g.OW, s.cout, j.momImages, s.g.N
		for gr := ceilDiv(ceilDiv(t0, img), k); gr*k < n && min((gr+1)*k, n)*img <= t1; gr++ {
			n0, n1 := gr*k, min((gr+1)*k, n)
			momentsGroup(j.mom[2*gr*c:(2*gr+2)*c], j.y[n0*rows*c:n1*rows*c], (n1-n0)*rows, c)
		}
	}
}

// tile returns tile t's image and its first output row and column.
func (s wgShape) tile(t int) (n, oh, ow int) {
	per := s.th * s.tw
	n, t = t/per, t%per
	return n, t / s.tw * s.m, t % s.tw * s.m
}

// inputTiles writes Bᵀ·d·B of the 4×4 inputs (x, cin channels) of tiles
// [t0, t1) into v, tile t's element ξ at v[(t-t0)·cin + ξ·vs:]: runs of
// tiles inside the image in one call, a tile that crosses an edge staged
// in st.
func (s wgShape) inputTiles(v []float32, vs int, x []float32, t0, t1 int, st []float32) {
	g, c := s.g, s.cin
	if s.padImg {
		staged := -1
		for t := t0; t < t1; {
			n, oh, ow := s.tile(t)
			if n != staged {
				s.stageImage(st, x[n*g.H*g.W*c:(n+1)*g.H*g.W*c])
				staged = n
			}
			run := min(t1-t, s.tw-ow/s.m) // the rest of the tile row
			wgApply(s.bt, v[(t-t0)*c:], st[(oh*s.wp+ow)*c:], s.n*vs, vs, s.wp*c, c, c, run, c, s.m*c)
			t += run
		}
		return
	}
	for t := t0; t < t1; {
		n, oh, ow := s.tile(t)
		h0, w0 := oh-g.PadTop, ow-g.PadLeft
		img := x[n*g.H*g.W*c : (n+1)*g.H*g.W*c]
		run := 0
		if h0 >= 0 && h0+s.n <= g.H {
			for w := w0; t+run < t1 && w >= 0 && w+s.n <= g.W && (ow+s.m*run) < s.m*s.tw; w += s.m {
				run++
			}
		}
		if run > 0 {
			wgApply(s.bt, v[(t-t0)*c:], img[(h0*g.W+w0)*c:], s.n*vs, vs, g.W*c, c, c, run, c, s.m*c)
			t += run
			continue
		}
		// the tile's rows and columns inside the image, zeros around them
		lo, hi := max(0, -w0), max(0, min(s.n, g.W-w0))
		for a := 0; a < s.n; a++ {
			row := st[a*s.n*c : (a+1)*s.n*c]
			if h0+a < 0 || h0+a >= g.H || lo >= hi {
				clear(row)
				continue
			}
			clear(row[:lo*c])
			copy(row[lo*c:hi*c], img[((h0+a)*g.W+w0+lo)*c:])
			clear(row[hi*c:])
		}
		wgApply(s.bt, v[(t-t0)*c:], st, s.n*vs, vs, s.n*c, c, c, 1, 0, 0)
		t++
	}
}

// stageImage writes img ([H, W, cin]) into st as an hp×wp image, its
// first row and column at (PadTop, PadLeft), zeros around it.
func (s wgShape) stageImage(st, img []float32) {
	g, c := s.g, s.cin
	lo, hi := g.PadLeft, min(s.wp, g.PadLeft+g.W) // the columns img fills
	for r := 0; r < s.hp; r++ {
		row := st[r*s.wp*c : (r+1)*s.wp*c]
		ih := r - g.PadTop
		if ih < 0 || ih >= g.H || lo >= hi {
			clear(row)
			continue
		}
		clear(row[:lo*c])
		copy(row[lo*c:hi*c], img[ih*g.W*c:])
		clear(row[hi*c:])
	}
}

// gradTiles writes A'·w·A'ᵀ of the 2×2 output gradients (dy, cout
// channels; zero past the edge) of tiles [t0, t1) into w, tile t's element
// ξ at w[(t-t0)·cout + ξ·ws:].
func (s wgShape) gradTiles(w []float32, ws int, dy []float32, t0, t1 int, st []float32) {
	g, c := s.g, s.cout
	if s.padDy {
		staged, wp := -1, s.m*s.tw
		for t := t0; t < t1; {
			n, oh, ow := s.tile(t)
			if n != staged {
				img := dy[n*g.OH*g.OW*c : (n+1)*g.OH*g.OW*c]
				for r := 0; r < s.m*s.th; r++ {
					row := st[r*wp*c : (r+1)*wp*c]
					if r >= g.OH {
						clear(row)
						continue
					}
					copy(row, img[r*g.OW*c:(r+1)*g.OW*c])
					clear(row[g.OW*c:])
				}
				staged = n
			}
			run := min(t1-t, s.tw-ow/s.m)
			wgApply(s.a, w[(t-t0)*c:], st[(oh*wp+ow)*c:], s.n*ws, ws, wp*c, c, c, run, c, s.m*c)
			t += run
		}
		return
	}
	for t := t0; t < t1; {
		n, oh, ow := s.tile(t)
		base := ((n*g.OH+oh)*g.OW + ow) * c
		run := s.outRun(t, t1, oh, ow)
		if run > 0 {
			wgApply(s.a, w[(t-t0)*c:], dy[base:], s.n*ws, ws, g.OW*c, c, c, run, c, s.m*c)
			t += run
			continue
		}
		m := s.m
		st := st[:m*m*c]
		clear(st)
		for a := 0; a < m && oh+a < g.OH; a++ {
			copy(st[a*m*c:(a*m+min(m, g.OW-ow))*c], dy[base+a*g.OW*c:])
		}
		wgApply(s.a, w[(t-t0)*c:], st, s.n*ws, ws, m*c, c, c, 1, 0, 0)
		t++
	}
}

// outRun returns how many tiles from tile t (before t1, at output row oh
// and column ow) lie wholly inside the output, in its tile row.
func (s wgShape) outRun(t, t1, oh, ow int) int {
	if oh+s.m > s.g.OH {
		return 0
	}
	return min(t1-t, (s.g.OW-ow)/s.m)
}

// outputTiles writes Aᵀ·m·A of the products of tiles [t0, t1) (tile t's
// element ξ at m[(t-t0)·cout + ξ·ms:]) into their 2×2 outputs of y, staging
// a tile that crosses the edge in st.
func (s wgShape) outputTiles(y, m []float32, ms, t0, t1 int, st []float32) {
	g, c := s.g, s.cout
	if img := s.th * s.tw; s.padOut && t0%img == 0 && (t1-t0)%img == 0 {
		// whole images: each into st, 2·th × 2·tw outputs, then its OH×OW
		// corner into y
		wp := s.m * s.tw
		for t := t0; t < t1; t += img {
			for r := 0; r < s.th; r++ {
				k := t - t0 + r*s.tw
				wgApply(s.at, st[s.m*r*wp*c:], m[k*c:], wp*c, c, s.n*ms, ms, c, s.tw, s.m*c, c)
			}
			out := y[t/img*g.OH*g.OW*c:]
			for r := 0; r < g.OH; r++ {
				copy(out[r*g.OW*c:(r+1)*g.OW*c], st[r*wp*c:])
			}
		}
		return
	}
	for t := t0; t < t1; {
		n, oh, ow := s.tile(t)
		base := ((n*g.OH+oh)*g.OW + ow) * c
		run := s.outRun(t, t1, oh, ow)
		if run > 0 {
			wgApply(s.at, y[base:], m[(t-t0)*c:], g.OW*c, c, s.n*ms, ms, c, run, s.m*c, c)
			t += run
			continue
		}
		q := s.m
		st := st[:q*q*c]
		wgApply(s.at, st, m[(t-t0)*c:], q*c, c, s.n*ms, ms, c, 1, 0, 0)
		for a := 0; a < q && oh+a < g.OH; a++ {
			copy(y[base+a*g.OW*c:base+(a*g.OW+min(q, g.OW-ow))*c], st[a*q*c:])
		}
		t++
	}
}

// wgApply sets out = M·in·Mᵀ over c channels of tiles tiles, in[a][b] at
// in[a·irow + b·icol:], out[i][j] at out[i·orow + j·ocol:], tile k's at
// in[k·istep:] and out[k·ostep:]: sixteen channels at a time in assembly,
// the rest in Go, with the same operations in the same order.
func wgApply(which int, out, in []float32, orow, ocol, irow, icol, c, tiles, ostep, istep int) {
	m := wgMats[which]
	r, q := len(m), len(m[0])
	if last := (tiles-1)*ostep + (r-1)*orow + (r-1)*ocol + c; last > len(out) {
		panicf("winograd: a tile's output past the end (%d > %d)", last, len(out))
	}
	if last := (tiles-1)*istep + (q-1)*irow + (q-1)*icol + c; last > len(in) {
		panicf("winograd: a tile's input past the end (%d > %d)", last, len(in))
	}
	done := 0
	if blocks := c / 16; blocks > 0 && wgSIMD(which, out, in, orow, ocol, irow, icol, blocks, tiles, ostep, istep) {
		done = 16 * blocks
	}
	if done == c {
		return
	}
	var t [6][6]float32
	var col [6]float32
	for k := 0; k < tiles; k++ {
		in, out := in[k*istep:], out[k*ostep:]
		for ch := done; ch < c; ch++ {
			for b := 0; b < q; b++ {
				for a := 0; a < q; a++ {
					col[a] = in[a*irow+b*icol+ch]
				}
				for i := 0; i < r; i++ {
					t[i][b] = wgCombine(m[i], col[:q])
				}
			}
			for i := 0; i < r; i++ {
				for jj := 0; jj < r; jj++ {
					out[i*orow+jj*ocol+ch] = wgCombine(m[jj], t[i][:q])
				}
			}
		}
	}
}

// wgCombine returns Σ_k c[k]·v[k]: the first positive term, then the
// others in order, added or subtracted, a coefficient other than ±1
// multiplying its term first (as genvision's wgCombine: its product is
// rounded on its own, which a power of two's exact product makes the same
// as the fused multiply-add the assembly uses).
func wgCombine(c []int, v []float32) float32 {
	first := 0
	for c[first] <= 0 {
		first++
	}
	acc := v[first]
	if c[first] != 1 {
		acc = float32(float32(c[first]) * v[first])
	}
	for k, x := range c {
		switch {
		case k == first || x == 0:
		case x == 1:
			acc += v[k]
		case x == -1:
			acc -= v[k]
		case x > 0:
			acc += float32(float32(x) * v[k])
		default:
			acc -= float32(float32(-x) * v[k])
		}
	}
	return acc
}

// wgFilterIn writes U = G·g·Gᵀ of F(m×m, 3×3) of the channel pairs of
// input channels [c0, c1) of filter ([3, 3, C, F]) into u ([(m+2)²][C][F]);
// turned, it writes the input gradient's U of the filter turned 180° with
// its channels swapped ([(m+2)²][F][C]).
func wgFilterIn(u, filter []float32, c, f, m int, turned bool, c0, c1 int) {
	cf := c * f
	if m == 4 {
		wg4FilterIn(u, filter, c, f, turned, c0, c1)
		return
	}
	u, filter = u[:16*cf], filter[:9*cf]
	for ci := c0; ci < c1; ci++ {
		for fi := 0; fi < f; fi++ {
			src, at := ci*f+fi, ci*f+fi
			var g [9]float32
			for k := range g {
				g[k] = filter[k*cf+src]
			}
			if turned {
				for k := 0; k < 4; k++ {
					g[k], g[8-k] = g[8-k], g[k]
				}
				at = fi*c + ci
			}
			// t = G·g (4×3), then U = t·Gᵀ (4×4); G's rows are (1, 0, 0),
			// ½(1, 1, 1), ½(1, -1, 1) and (0, 0, 1)
			var t [4][3]float32
			for b := 0; b < 3; b++ {
				g0, g1, g2 := g[b], g[3+b], g[6+b]
				t[0][b], t[1][b], t[2][b], t[3][b] = g0, 0.5*(g0+g1+g2), 0.5*(g0-g1+g2), g2
			}
			for i := 0; i < 4; i++ {
				a0, a1, a2 := t[i][0], t[i][1], t[i][2]
				o := u[4*i*cf+at:]
				o[0], o[cf], o[2*cf], o[3*cf] = a0, 0.5*(a0+a1+a2), 0.5*(a0-a1+a2), a2
			}
		}
	}
}

// wg4FilterIn is wgFilterIn for F(4×4, 3×3): G's rows are (¼, 0, 0),
// -⅙(1, 1, 1), -⅙(1, -1, 1), (1/24, 1/12, ⅙), (1/24, -1/12, ⅙) and
// (0, 0, 1), applied to the filter's columns and then to the rows, in
// float64, each result rounded once.
func wg4FilterIn(u, filter []float32, c, f int, turned bool, c0, c1 int) {
	cf := c * f
	u, filter = u[:36*cf], filter[:9*cf]
	const blk = 32
	var g [9][blk]float64
	var t [6][3]float64
	var out [36][blk]float32
	for ci := c0; ci < c1; ci++ {
		for f0 := 0; f0 < f; f0 += blk {
			n := min(blk, f-f0)
			for k := range g {
				tap := k
				if turned { // the filter turned 180°
					tap = 8 - k
				}
				for j, v := range filter[tap*cf+ci*f+f0 : tap*cf+ci*f+f0+n] {
					g[k][j] = float64(v)
				}
			}
			for j := 0; j < n; j++ {
				for b := 0; b < 3; b++ {
					t[0][b], t[1][b], t[2][b], t[3][b], t[4][b], t[5][b] = wg4G(g[b][j], g[3+b][j], g[6+b][j])
				}
				for i := 0; i < 6; i++ {
					r0, r1, r2, r3, r4, r5 := wg4G(t[i][0], t[i][1], t[i][2])
					out[6*i][j], out[6*i+1][j], out[6*i+2][j] = float32(r0), float32(r1), float32(r2)
					out[6*i+3][j], out[6*i+4][j], out[6*i+5][j] = float32(r3), float32(r4), float32(r5)
				}
			}
			for xi := range out {
				plane := u[xi*cf : (xi+1)*cf]
				if !turned {
					copy(plane[ci*f+f0:ci*f+f0+n], out[xi][:n])
					continue
				}
				for j, v := range out[xi][:n] { // channels swapped: [F][C]
					plane[(f0+j)*c+ci] = v
				}
			}
		}
	}
}

// wg4G returns G·(g0, g1, g2) for F(4×4, 3×3)'s G.
func wg4G(g0, g1, g2 float64) (r0, r1, r2, r3, r4, r5 float64) {
	s, d := g0+g2, g1
	q := g0/4 + g2
	return g0 / 4, -(s + d) / 6, -(s - d) / 6, (q + d/2) / 6, (q - d/2) / 6, g2
}

// wg4Gt returns Gᵀ·(m0, ..., m5) for F(4×4, 3×3)'s G.
func wg4Gt(m0, m1, m2, m3, m4, m5 float64) (r0, r1, r2 float64) {
	p12, d12 := m1+m2, m2-m1
	p34, d34 := m3+m4, m3-m4
	return m0/4 - p12/6 + p34/24, d12/6 + d34/12, (p34-p12)/6 + m5
}

// wgFilterOut sets channel pairs [i0, i1) of dfilter ([3, 3, C, F]) to
// G'ᵀ·M·G' of the sum of the groups' parts of sums ([(m+2)²][C][F] each).
func wgFilterOut(dfilter, sums []float32, s wgShape, groups, i0, i1 int) {
	if s.m == 4 {
		wg4FilterOut(dfilter, sums, s, groups, i0, i1)
		return
	}
	cf := s.cin * s.cout
	for i := i0; i < i1; i++ {
		var m [4][4]float32
		for xi := 0; xi < 16; xi++ {
			v := sums[xi*cf+i]
			for gr := 1; gr < groups; gr++ {
				v += sums[gr*16*cf+xi*cf+i]
			}
			m[xi/4][xi%4] = v
		}
		// t = G'ᵀ·m (3×4), dg = t·G' (3×3)
		var t [3][4]float32
		for a := 0; a < 3; a++ {
			for b := 0; b < 4; b++ {
				t[a][b] = wgGp[0][a]*m[0][b] + wgGp[1][a]*m[1][b] + wgGp[2][a]*m[2][b] + wgGp[3][a]*m[3][b]
			}
		}
		for a := 0; a < 3; a++ {
			for b := 0; b < 3; b++ {
				dfilter[(a*3+b)*cf+i] = t[a][0]*wgGp[0][b] + t[a][1]*wgGp[1][b] + t[a][2]*wgGp[2][b] + t[a][3]*wgGp[3][b]
			}
		}
	}
}

// wgPadImages lets small images be staged whole (padImg); tests turn it
// off to check the tiles staged one at a time.
var wgPadImages = true

// wg4FilterOut is wgFilterOut for F(4×4, 3×3), in float64: Gᵀ on the
// columns of M, then on the rows. The sums are read a block of channel
// pairs at a time, each of the 36 planes (and groups) in a run.
func wg4FilterOut(dfilter, sums []float32, s wgShape, groups, i0, i1 int) {
	cf := s.cin * s.cout
	sums = sums[:groups*36*cf]
	const blk = 32
	var m [36][blk]float64
	for b0 := i0; b0 < i1; b0 += blk {
		n := min(blk, i1-b0)
		for xi := range m {
			row := sums[xi*cf+b0 : xi*cf+b0+n]
			for k, v := range row {
				m[xi][k] = float64(v)
			}
			for gr := 1; gr < groups; gr++ {
				row := sums[gr*36*cf+xi*cf+b0 : gr*36*cf+xi*cf+b0+n]
				for k, v := range row {
					m[xi][k] += float64(v)
				}
			}
		}
		for k := 0; k < n; k++ {
			var t [3][6]float64 // Gᵀ·m
			for b := 0; b < 6; b++ {
				t[0][b], t[1][b], t[2][b] = wg4Gt(m[b][k], m[6+b][k], m[12+b][k], m[18+b][k], m[24+b][k], m[30+b][k])
			}
			i := b0 + k
			for a := 0; a < 3; a++ {
				r0, r1, r2 := wg4Gt(t[a][0], t[a][1], t[a][2], t[a][3], t[a][4], t[a][5])
				o := 3 * a * cf
				dfilter[o+i], dfilter[o+cf+i], dfilter[o+2*cf+i] = float32(r0), float32(r1), float32(r2)
			}
		}
	}
}
