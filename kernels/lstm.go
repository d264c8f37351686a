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
