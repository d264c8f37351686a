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
// per position) at a time, the others element by element.
func packIm2col(d, x []float32, g ConvGeom, i0, mc, mr int, scatter func(d, src []float32, ld, kc, valid int)) {
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
