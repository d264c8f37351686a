package kernels

// The filter gradient of a convolution with few input channels: a stem's,
// whose input is an image of 1 to 3 channels. The direct filter tiles
// (filterUnitRun) hold one tap's channels × filters in registers, which
// takes channels in multiples of 4; im2col's product is [K, rows]·[rows,
// f] with K = KH·KW·C small and rows = N·OH·OW large, a shape the packed
// product runs far below its rate (the ResNet-20's stem, 3×3×1 → 16 at
// batch 128: 1.3 ms, 22 GFLOP/s on a Zen 5).
//
// Staged with its padding, an image's window row is KW·C consecutive
// floats, so one tile (stemTile512rRpP, vision_amd64.s) holds R window
// rows × P = KW·C pairs × 16 filters of accumulators (R·P ≤ 27) and, per
// output position, reads dy's 16 filters once and broadcasts each input
// value into its multiply-add: the whole window in registers.
//
// The images split into stemGroups fixed groups (fewer with fewer images,
// or a workspace that holds fewer): each sums its images in order into
// its own slot, and the slots add up in order, so the result does not
// depend on the threads. Each slot stages its images, padded, and holds
// its partial sum (StemFilterWork).

// stemPairs is the most (window column, channel) pairs of one window row
// a stem tile takes (KW·C).
const stemPairs = 27

// stemGroups is the most groups of images the stem filter gradient
// splits into.
const stemGroups = 16

// stemStageMax bounds a staged image, in floats (4 MiB).
const stemStageMax = 1 << 20

// stemShape is the staged image's size: the rows and columns the windows
// read, (OH-1)·SH + KH by (OW-1)·SW + KW.
func stemShape(g ConvGeom) (hp, wp int) {
	return (g.OH-1)*g.SH + g.KH, (g.OW-1)*g.SW + g.KW
}

// stemSlot is one group's workspace in floats: the staged image and the
// partial filter gradient.
func stemSlot(g ConvGeom, f int) int {
	hp, wp := stemShape(g)
	return hp*wp*g.C + g.KH*g.KW*g.C*f
}

// StemFilterWork returns the least workspace, in floats, that the stem
// filter gradient needs over g with f filters (one group), or 0 where it
// does not run.
func StemFilterWork(g ConvGeom, f int) int {
	if !stemFilterCan(g, f) {
		return 0
	}
	return stemSlot(g, f)
}

// stemFilterCan reports whether the stem tiles can run g's filter
// gradient with f filters: AVX-512, channels not a multiple of 4 (those
// take the direct filter tiles), a window row of at most stemPairs pairs,
// filters a multiple of 16, a staged image of at most stemStageMax floats.
func stemFilterCan(g ConvGeom, f int) bool {
	if !directConv || stemTiles[0][0] == nil || f <= 0 || f%16 != 0 || g.General() || g.C <= 0 || g.C%4 == 0 ||
		g.KW*g.C > stemPairs || g.N*g.OH*g.OW <= 0 {
		return false
	}
	hp, wp := stemShape(g)
	return hp*wp*g.C <= stemStageMax
}

// convFilterStem runs Conv2DBackpropFilter with the stem tiles and
// returns true, or returns false (doing nothing) where they do not apply
// (stemFilterCan, float32, a workspace of at least StemFilterWork).
func convFilterStem[T Float](p *Pool, dfilter, x, dy, work []T, g ConvGeom, f int, bf16 bool) bool {
	d32, ok := any(dfilter).([]float32)
	if !ok || bf16 || !stemFilterCan(g, f) || len(work) < stemSlot(g, f) {
		return false
	}
	slot := stemSlot(g, f)
	groups := min(g.N, stemGroups, len(work)/slot)
	p.calls.directMu.Lock()
	defer p.calls.directMu.Unlock()
	j := &p.calls.direct
	*j = directJob{dst: d32, x: any(x).([]float32), w: any(dy).([]float32), pad: any(work).([]float32), g: g, f: f, parts: groups}
	ParallelOn(p, groups, stemPart, j)
	*j = directJob{}
	// the groups' sums, in order
	size := g.KH * g.KW * g.C * f
	hp, wp := stemShape(g)
	w32 := any(work).([]float32)
	for q := 1; q < groups; q++ {
		part := w32[q*slot+hp*wp*g.C : (q+1)*slot]
		for i := range size {
			d32[i] += part[i]
		}
	}
	return true
}

// stemPart computes group q of the stem filter gradient in arg (w holds
// dy, pad the workspace): into dst for the first group, into the group's
// slot for the others.
func stemPart(arg any, q int) {
	j := arg.(*directJob)
	g, f := j.g, j.f
	hp, wp := stemShape(g)
	slot := stemSlot(g, f)
	stage := j.pad[q*slot : q*slot+hp*wp*g.C]
	dst := j.dst[:g.KH*g.KW*g.C*f]
	if q > 0 {
		dst = j.pad[q*slot+hp*wp*g.C : (q+1)*slot]
	}
	// the padding is the same for every image: cleared once, and only the
	// rows and columns inside the input copied for each image
	clear(stage)
	r0, r1 := min(g.PadTop, hp), min(hp, g.PadTop+g.H)
	c0, c1 := min(g.PadLeft, wp), min(wp, g.PadLeft+g.W)
	n0, n1 := g.N*q/j.parts, g.N*(q+1)/j.parts
	img, out := g.H*g.W*g.C, g.OH*g.OW*f
	pairs := g.KW * g.C
	for n := n0; n < n1; n++ {
		if c0 < c1 {
			for r := r0; r < r1; r++ {
				src := j.x[n*img+((r-g.PadTop)*g.W+c0-g.PadLeft)*g.C:]
				copy(stage[(r*wp+c0)*g.C:(r*wp+c1)*g.C], src[:(c1-c0)*g.C])
			}
		}
		for f0 := 0; f0 < f; f0 += 16 {
			ds := j.w[n*out+f0:]
			for kh := 0; kh < g.KH; {
				rows, tile := 3, stemTiles[1][pairs-1]
				if g.KH-kh < 3 || tile == nil {
					rows, tile = 1, stemTiles[0][pairs-1]
				}
				tile(&dst[kh*pairs*f+f0], &stage[kh*wp*g.C], &ds[0], g.OH, g.OW, g.SW*g.C*4, g.SH*wp*g.C*4, wp*g.C*4, f*4, g.OW*f*4, f, n > n0)
				kh += rows
			}
		}
	}
}
