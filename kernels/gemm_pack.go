package kernels

// Packing for Sgemm (gemm.go): copies of blocks of op(A) and op(B) laid out
// in the order the micro-kernel reads them (Goto and van de Geijn 2008, §6;
// BLIS's packm). Each transpose variant has its own loop, so the operands are
// read in place, whatever their layout, and no copy precedes the product.
//
//	A panel: op(A)[i0:i0+mc, p0:p0+kc] as ceil(mc/MR) micro-panels [kc][MR];
//	         micro-panel q holds rows i0+q·MR ... and starts at q·MR·kc.
//	B block: op(B)[p0:p0+kc, j0:j0+nc] as ceil(nc/NR) micro-panels [kc][NR];
//	         micro-panel q holds columns j0+q·NR ... and starts at q·NR·kc.
//
// Rows (columns) of the last micro-panel beyond the matrix are zero, so the
// micro-kernel can always compute a full tile.

// packA packs op(A)[i0:i0+mc, p0:p0+kc] into dst in MR-row micro-panels.
// op(A)[i, p] is a[i·k + p], or a[p·m + i] when transA.
func (c *gemmCall) packA(dst []float32, i0, mc, p0, kc, mr int) {
	for q := 0; q*mr < mc; q++ {
		ib, rows := i0+q*mr, min(mr, mc-q*mr)
		d := dst[q*mr*kc : (q+1)*mr*kc]
		switch t := &c.tier; {
		case c.transA && t.gatherA != nil:
			t.gatherA(d, c.a[p0*c.m+ib:], c.m, kc, rows)
		case c.transA:
			// a is [k, m]: the MR elements of each step are contiguous.
			gatherRows(d, mr, c.a[p0*c.m+ib:], c.m, kc, rows)
		case t.scatterA != nil:
			t.scatterA(d, c.a[ib*c.k+p0:], c.k, kc, rows)
		default:
			// a is [m, k]: row i of op(A) is contiguous; transpose it in.
			scatterRows(d, mr, c.a[ib*c.k+p0:], c.k, kc, rows)
		}
	}
}

// packB packs op(B)[p0:p0+kc, j0:j0+nc] into dst in NR-column micro-panels.
// op(B)[p, j] is b[p·n + j], or b[j·k + p] when transB.
func (c *gemmCall) packB(dst []float32, p0, kc, j0, nc, nr int) {
	for q := 0; q*nr < nc; q++ {
		jb, cols := j0+q*nr, min(nr, nc-q*nr)
		d := dst[q*nr*kc : (q+1)*nr*kc]
		switch t := &c.tier; {
		case c.transB && t.scatterB != nil:
			t.scatterB(d, c.b[jb*c.k+p0:], c.k, kc, cols)
		case c.transB:
			// b is [n, k]: column j of op(B) is contiguous; transpose it in.
			scatterRows(d, nr, c.b[jb*c.k+p0:], c.k, kc, cols)
		case t.gatherB != nil:
			t.gatherB(d, c.b[p0*c.n+jb:], c.n, kc, cols)
		default:
			// b is [k, n]: the NR elements of each step are contiguous.
			gatherRows(d, nr, c.b[p0*c.n+jb:], c.n, kc, cols)
		}
	}
}

// gatherRows sets d[p·w : p·w+w] to src[p·ld : p·ld+valid] followed by zeros,
// for p < kc: a micro-panel whose steps are contiguous in the source.
func gatherRows(d []float32, w int, src []float32, ld, kc, valid int) {
	d = d[:kc*w]
	switch {
	case valid == 32 && w == 32:
		for p := 0; p < kc; p++ {
			*(*[32]float32)(d[p*32:]) = *(*[32]float32)(src[p*ld:])
		}
	case valid == 16 && w == 16:
		for p := 0; p < kc; p++ {
			*(*[16]float32)(d[p*16:]) = *(*[16]float32)(src[p*ld:])
		}
	case valid == 12 && w == 12:
		for p := 0; p < kc; p++ {
			*(*[12]float32)(d[p*12:]) = *(*[12]float32)(src[p*ld:])
		}
	default:
		for p := 0; p < kc; p++ {
			dp := d[p*w : p*w+w]
			copy(dp, src[p*ld:p*ld+valid])
			clear(dp[valid:])
		}
	}
}

// scatterRows sets d[p·w + r] = src[r·ld + p] for r < valid and p < kc, and
// zero for valid <= r < w: a micro-panel whose rows are contiguous in the
// source, transposed. Eight (then four, then one) source rows are read
// together so that each step writes a run of contiguous elements.
func scatterRows(d []float32, w int, src []float32, ld, kc, valid int) {
	d = d[:kc*w]
	r := 0
	for ; r+8 <= valid; r += 8 {
		s0 := src[r*ld : r*ld+kc]
		s1 := src[(r+1)*ld:][:len(s0)]
		s2 := src[(r+2)*ld:][:len(s0)]
		s3 := src[(r+3)*ld:][:len(s0)]
		s4 := src[(r+4)*ld:][:len(s0)]
		s5 := src[(r+5)*ld:][:len(s0)]
		s6 := src[(r+6)*ld:][:len(s0)]
		s7 := src[(r+7)*ld:][:len(s0)]
		for p := range s0 {
			*(*[8]float32)(d[p*w+r:]) = [8]float32{s0[p], s1[p], s2[p], s3[p], s4[p], s5[p], s6[p], s7[p]}
		}
	}
	for ; r+4 <= valid; r += 4 {
		s0 := src[r*ld : r*ld+kc]
		s1 := src[(r+1)*ld:][:len(s0)]
		s2 := src[(r+2)*ld:][:len(s0)]
		s3 := src[(r+3)*ld:][:len(s0)]
		for p := range s0 {
			*(*[4]float32)(d[p*w+r:]) = [4]float32{s0[p], s1[p], s2[p], s3[p]}
		}
	}
	for ; r < valid; r++ {
		for p, v := range src[r*ld : r*ld+kc] {
			d[p*w+r] = v
		}
	}
	if valid < w {
		for p := 0; p < kc; p++ {
			clear(d[p*w+valid : p*w+w])
		}
	}
}
