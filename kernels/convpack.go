package kernels

// Packing straight from the image: the A panels of Conv2D's products
// (jobs.go) written from x without the im2col matrix in between, in the
// layout of gemm_pack.go (micro-panels [kc][MR]), so the products see the
// same numbers as through im2col and packA and give the same results, with
// one pass over memory fewer. (The transposed panels of the filter gradient
// were tried the same way in Go, a copy of MR floats per position and
// micro-panel: slower than im2col and the assembly gather.)

// packIm2col packs op(A)[i0:i0+mc, 0:K] of Conv2D's product, where row i of
// op(A) is the im2col row of output position i (n·OH·OW + oh·OW + ow) and K =
// KH·KW·C, into d as ceil(mc/mr) micro-panels [K][mr] (rows past mc zero).
// scatter transposes a micro-panel of rows at stride ld (the tier's
// scatterA; nil: scatterRows); a micro-panel whose windows lie inside one output row and
// inside the image is packed one window row (KW·C contiguous floats of x
// per position) at a time; the others (windows over the padding, or rows
// of two output rows) are written as im2col rows into tmp, when it holds
// mr of them, and transposed from there by the same scatter, else element
// by element.
func packIm2col(d, x, tmp []float32, g ConvGeom, i0, mc, mr int, scatter func(d, src []float32, ld, kc, valid int)) {
	rowLen := g.KW * g.C
	k := g.KH * rowLen
	img := g.H * g.W * g.C
	for q := 0; q*mr < mc; q++ {
		rows := min(mr, mc-q*mr)
		dq := d[q*mr*k : (q+1)*mr*k]
		i := i0 + q*mr
		n, oh, ow := i/(g.OH*g.OW), i/g.OW%g.OH, i%g.OW
		ih0, iw0 := oh*g.SH-g.PadTop, ow*g.SW-g.PadLeft
		if ow+rows <= g.OW && ih0 >= 0 && ih0+g.KH <= g.H && iw0 >= 0 && (ow+rows-1)*g.SW-g.PadLeft+g.KW <= g.W {
			for kh := 0; kh < g.KH; kh++ {
				src := x[n*img+((ih0+kh)*g.W+iw0)*g.C:]
				dk := dq[kh*rowLen*mr : (kh+1)*rowLen*mr]
				if scatter != nil {
					scatter(dk, src, g.SW*g.C, rowLen, rows)
				} else {
					scatterRows(dk, mr, src, g.SW*g.C, rowLen, rows)
				}
			}
			continue
		}
		if len(tmp) >= mr*k {
			im2colPositions(tmp, x, g, i, rows)
			if scatter != nil {
				scatter(dq, tmp, k, k, rows)
			} else {
				scatterRows(dq, mr, tmp, k, k, rows)
			}
			continue
		}
		for r := 0; r < mr; r++ {
			if r >= rows {
				for p := 0; p < k; p++ {
					dq[p*mr+r] = 0
				}
				continue
			}
			ir := i + r
			n, oh, ow := ir/(g.OH*g.OW), ir/g.OW%g.OH, ir%g.OW
			xi := x[n*img : (n+1)*img]
			for p := 0; p < k; p++ {
				dq[p*mr+r] = im2colAt(xi, g, oh, ow, p)
			}
		}
	}
}

// im2colAt returns element p of the im2col row of output (oh, ow) of the
// image xi ([H, W, C]): 0 in the padding.
func im2colAt(xi []float32, g ConvGeom, oh, ow, p int) float32 {
	kh, kw, c := p/(g.KW*g.C), p/g.C%g.KW, p%g.C
	ih, iw := oh*g.SH-g.PadTop+kh, ow*g.SW-g.PadLeft+kw
	if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
		return 0
	}
	return xi[(ih*g.W+iw)*g.C+c]
}

// im2colPositions writes the im2col rows of the rows output positions
// i, i+1, ... (n·OH·OW + oh·OW + ow order, across output rows and images)
// into cols, [rows, KH·KW·C]: each window row is one copy of its in-range
// cells, the padding zeros.
func im2colPositions(cols, x []float32, g ConvGeom, i, rows int) {
	rowLen := g.KW * g.C
	k := g.KH * rowLen
	img := g.H * g.W * g.C
	n, oh, ow := i/(g.OH*g.OW), i/g.OW%g.OH, i%g.OW
	for r := 0; r < rows; r++ {
		xi := x[n*img : n*img+img]
		ih0, iw0 := oh*g.SH-g.PadTop, ow*g.SW-g.PadLeft
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
			clear(seg[:lo*g.C])
			copy(seg[lo*g.C:hi*g.C], xi[src:src+(hi-lo)*g.C])
			clear(seg[hi*g.C:])
		}
		if ow++; ow == g.OW {
			ow = 0
			if oh++; oh == g.OH {
				oh, n = 0, n+1
			}
		}
	}
}
