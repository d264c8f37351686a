package kernels

// An LSTM step in one pass over its rows (graph.LSTMCell and its gradient).
// Each row runs the elementwise kernels the step's composition would run
// (Sigmoid, Tanh, Binary, SigmoidGrad, TanhGrad: vectors where the CPU
// has them), on the row's gate slices where they lie, with the same
// operations in the same order: a step gives the composition's bits, and
// what it saves is the dozen instructions, slices and buffers a step
// otherwise takes.

// LSTMCellRows computes rows lo..hi of an LSTM step of B rows and n units: from the
// pre-activations z [B, 4n] (gates i, f, g, o side by side) and the
// previous cell state cPrev [B, n] (nil: zero), the output h and state c
// [B, n] and the activations acts [B, 5n] (each row's i, f, g, o and
// tanh(c)):
//
//	i, f, g, o = σ(z_i), σ(z_f), tanh(z_g), σ(z_o)
//	c = f·cPrev + i·g   (i·g without cPrev)
//	h = o·tanh(c)
func LSTMCellRows[T Float](h, c, acts, z, cPrev []T, n, lo, hi int) {
	const fn = "LSTMCellRows"
	m := checkStepRows(fn, len(h), n, lo, hi)
	checkLen(fn, "z", len(z), 4*m)
	checkLen(fn, "acts", len(acts), 5*m)
	checkLen(fn, "c", len(c), m)
	if cPrev != nil {
		checkLen(fn, "cPrev", len(cPrev), m)
	}
	for r := lo; r < hi; r++ {
		zr := z[4*n*r : 4*n*(r+1)]
		a := acts[5*n*r : 5*n*(r+1)]
		i, f, g, o, tc := a[:n], a[n:2*n], a[2*n:3*n], a[3*n:4*n], a[4*n:]
		Sigmoid(a[:2*n], zr[:2*n]) // i and f
		Tanh(g, zr[2*n:3*n])
		Sigmoid(o, zr[3*n:])
		cr := c[n*r : n*(r+1)]
		Binary(Mul, cr, i, g)
		if cPrev != nil {
			Binary(Mul, tc, f, cPrev[n*r:n*(r+1)]) // tc holds f·cPrev for now
			Binary(Add, cr, tc, cr)
		}
		Tanh(tc, cr)
		Binary(Mul, h[n*r:n*(r+1)], o, tc)
	}
}

// checkStepRows checks a step's rows lo..hi of n units against a state of
// size elements and returns size.
func checkStepRows(fn string, size, n, lo, hi int) int {
	if n <= 0 || size%n != 0 || lo < 0 || lo > hi || hi > size/n {
		panicf("%s: rows %d..%d of %d units in a state of %d elements", fn, lo, hi, n, size)
	}
	return size
}

// LSTMCellGradRows computes rows lo..hi of an LSTM step's gradient: dz
// [B, 4n] and dcPrev [B, n] (nil: not wanted) from the step's activations
// acts [B, 5n], the gradients dh and dc [B, n] of its h and c, and its
// previous state cPrev (nil: none, and dz_f is 0). With tc = tanh(c):
//
//	dc' = dc + (dh·o)·(1 - tc·tc)
//	dz_i = ((dc'·g)·i)·(1 - i)     dz_f = ((dc'·cPrev)·f)·(1 - f)
//	dz_g = (dc'·i)·(1 - g·g)       dz_o = ((dh·tc)·o)·(1 - o)
//	dcPrev = dc'·f
func LSTMCellGradRows[T Float](dz, dcPrev, acts, dh, dc, cPrev []T, n, lo, hi int) {
	const fn = "LSTMCellGradRows"
	m := checkStepRows(fn, len(dh), n, lo, hi)
	checkLen(fn, "dz", len(dz), 4*m)
	checkLen(fn, "acts", len(acts), 5*m)
	checkLen(fn, "dc", len(dc), m)
	if cPrev != nil {
		checkLen(fn, "cPrev", len(cPrev), m)
	}
	if dcPrev != nil {
		checkLen(fn, "dcPrev", len(dcPrev), m)
	}
	var t1, t2 [256]T
	for r := lo; r < hi; r++ {
		a := acts[5*n*r : 5*n*(r+1)]
		d := dz[4*n*r : 4*n*(r+1)]
		row := func(s []T) []T {
			if s == nil {
				return nil
			}
			return s[n*r : n*(r+1)]
		}
		for j0 := lstmGradSIMD(d, row(dcPrev), a, row(dh), row(dc), row(cPrev), n); j0 < n; j0 += len(t1) {
			j1 := min(n, j0+len(t1))
			w := j1 - j0
			i, f, g, o, tc := a[j0:j1], a[n+j0:n+j1], a[2*n+j0:2*n+j1], a[3*n+j0:3*n+j1], a[4*n+j0:4*n+j1]
			di, df, dg, do := d[j0:j1], d[n+j0:n+j1], d[2*n+j0:2*n+j1], d[3*n+j0:3*n+j1]
			at := n*r + j0
			dhr, dcr := dh[at:at+w], dc[at:at+w]
			s, dct := t1[:w], t2[:w]
			Binary(Mul, s, tc, tc)
			ScalarBinary(Sub, s, 1, s) // 1 - tc·tc
			Binary(Mul, dct, dhr, o)
			Binary(Mul, dct, dct, s)
			Binary(Add, dct, dcr, dct) // dc'
			Binary(Mul, do, dhr, tc)
			SigmoidGrad(do, o, do)
			Binary(Mul, di, dct, g)
			SigmoidGrad(di, i, di)
			Binary(Mul, dg, dct, i)
			TanhGrad(dg, g, dg)
			if cPrev != nil {
				Binary(Mul, df, dct, cPrev[at:at+w])
				SigmoidGrad(df, f, df)
			} else {
				clear(df)
			}
			if dcPrev != nil {
				Binary(Mul, dcPrev[at:at+w], dct, f)
			}
		}
	}
}

// GRUCellRows computes rows lo..hi of a GRU step (graph.GRUCell, reset
// after the recurrent product) of B rows and n units: from the input
// projection x [B, 3n] (gates z, r, h side by side), the recurrent
// projection u [B, 3n] (nil: none) and the previous output hPrev [B, n]
// (nil: zero; it needs u), the output h [B, n] and the activations acts
// [B, 4n] (each row's z, r, h' and u_h, 0 without u):
//
//	z = σ(x_z + u_z), r = σ(x_r + u_r), h' = tanh(x_h + r·u_h)
//	h = h' + z·(hPrev - h')   (h' - z·h' without hPrev)
func GRUCellRows[T Float](h, acts, x, u, hPrev []T, n, lo, hi int) {
	const fn = "GRUCellRows"
	m := checkStepRows(fn, len(h), n, lo, hi)
	checkLen(fn, "x", len(x), 3*m)
	checkLen(fn, "acts", len(acts), 4*m)
	if u != nil {
		checkLen(fn, "u", len(u), 3*m)
	}
	if hPrev != nil {
		if u == nil {
			panicf("%s: a previous state without the recurrent projection", fn)
		}
		checkLen(fn, "hPrev", len(hPrev), m)
	}
	for r := lo; r < hi; r++ {
		xr, a := x[3*n*r:3*n*(r+1)], acts[4*n*r:4*n*(r+1)]
		z, rg, hh, uh := a[:n], a[n:2*n], a[2*n:3*n], a[3*n:]
		if u != nil {
			ur := u[3*n*r : 3*n*(r+1)]
			copy(uh, ur[2*n:])
			Binary(Add, a[:2*n], xr[:2*n], ur[:2*n])
			Sigmoid(a[:2*n], a[:2*n]) // z and r
			Binary(Mul, hh, rg, uh)
			Binary(Add, hh, xr[2*n:], hh)
			Tanh(hh, hh)
		} else {
			clear(uh)
			Sigmoid(a[:2*n], xr[:2*n])
			Tanh(hh, xr[2*n:])
		}
		hr := h[n*r : n*(r+1)]
		if hPrev != nil {
			Binary(Sub, hr, hPrev[n*r:n*(r+1)], hh)
			Binary(Mul, hr, z, hr)
			Binary(Add, hr, hh, hr)
		} else {
			Binary(Mul, hr, z, hh)
			Binary(Sub, hr, hh, hr)
		}
	}
}

// GRUCellGradRows computes rows lo..hi of a GRU step's gradient: dx
// [B, 3n], du [B, 3n] (nil: not wanted) and dhPrev [B, n] (nil: not
// wanted) from the step's activations acts [B, 4n], the gradient dh [B, n]
// of its output and its hPrev (nil: none). With D = hPrev - h' (-h'
// without hPrev):
//
//	dh' = dh - dh·z                   dhPrev = dh·z
//	da = dh'·(1 - h'·h')              dz = ((dh·D)·z)·(1 - z)
//	dr = ((da·u_h)·r)·(1 - r)
//	dx = [dz, dr, da]                 du = [dz, dr, da·r]
func GRUCellGradRows[T Float](dx, du, dhPrev, acts, dh, hPrev []T, n, lo, hi int) {
	const fn = "GRUCellGradRows"
	m := checkStepRows(fn, len(dh), n, lo, hi)
	checkLen(fn, "dx", len(dx), 3*m)
	checkLen(fn, "acts", len(acts), 4*m)
	if du != nil {
		checkLen(fn, "du", len(du), 3*m)
	}
	if hPrev != nil {
		checkLen(fn, "hPrev", len(hPrev), m)
	}
	if dhPrev != nil {
		checkLen(fn, "dhPrev", len(dhPrev), m)
	}
	var t1, t2 [256]T
	for r := lo; r < hi; r++ {
		a, d := acts[4*n*r:4*n*(r+1)], dx[3*n*r:3*n*(r+1)]
		for j0 := 0; j0 < n; j0 += len(t1) {
			j1 := min(n, j0+len(t1))
			w, at := j1-j0, n*r+j0
			z, rg, hh, uh := a[j0:j1], a[n+j0:n+j1], a[2*n+j0:2*n+j1], a[3*n+j0:3*n+j1]
			dz, dr, da := d[j0:j1], d[n+j0:n+j1], d[2*n+j0:2*n+j1]
			dhr := dh[at : at+w]
			s, dhh := t1[:w], t2[:w]
			Binary(Mul, s, dhr, z)
			if dhPrev != nil {
				Copy(dhPrev[at:at+w], s)
			}
			Binary(Sub, dhh, dhr, s) // dh'
			Binary(Mul, s, hh, hh)
			ScalarBinary(Sub, s, 1, s)
			Binary(Mul, da, dhh, s)
			if hPrev != nil {
				Binary(Sub, s, hPrev[at:at+w], hh)
			} else {
				Neg(s, hh)
			}
			Binary(Mul, dz, dhr, s)
			SigmoidGrad(dz, z, dz)
			Binary(Mul, dr, da, uh)
			SigmoidGrad(dr, rg, dr)
			if du != nil {
				ud := du[3*n*r : 3*n*(r+1)]
				Copy(ud[j0:j1], dz)
				Copy(ud[n+j0:n+j1], dr)
				Binary(Mul, ud[2*n+j0:2*n+j1], da, rg)
			}
		}
	}
}
