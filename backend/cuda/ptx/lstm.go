package ptx

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// An LSTM step in one op and its gradient (graph.LSTMCell, LSTMCellGrad),
// as the host's kernels (kernels/lstm.go): one thread per unit j of row b
// (B·n threads, Matrix Rows B and Cols n), each reading its gates from
// the row's slices of z (i, f, g, o side by side, 4n a row) or of the
// activations (i, f, g, o, tanh c: 5n a row). The gates' sigmoid and tanh
// are the unary ops' (stepOp: float64, rounded once), and the products
// and sums float32 in the host's order, each rounded (.rn, no fma), so a
// step matches the elementwise composition it stands for.
//
// A GRU step and its gradient (graph.GRUCell, GRUCellGrad; reset after the
// recurrent product) the same way: one thread per unit, its gates z, r, h
// read from the row's slices of x and u (3n a row) and of the activations
// (z, r, h' and u_h: 4n a row).
func init() {
	register(graph.OpLSTMCell, renderer{dtypes: only32, render: renderLSTMCell})
	register(graph.OpLSTMCellGrad, renderer{dtypes: only32, render: renderLSTMCellGrad})
	register(graph.OpGRUCell, renderer{dtypes: only32, render: renderGRUCell})
	register(graph.OpGRUCellGrad, renderer{dtypes: only32, render: renderGRUCellGrad})
}

// lstmGeom returns an LSTM instruction's rows and units, or an error when
// its activations (5 values a unit) are past 32-bit indices.
func (r *req) lstmGeom() (rows, n int, err error) { return r.cellGeom("LSTM", 5) }

// gruGeom returns a GRU instruction's rows and units, or an error when its
// activations (4 values a unit) are past 32-bit indices.
func (r *req) gruGeom() (rows, n int, err error) { return r.cellGeom("GRU", 4) }

// cellGeom returns a recurrent step's rows and units from its Matrix, or
// an error when its widest operand (width values a unit) is past 32-bit
// indices.
func (r *req) cellGeom(cell string, width int) (rows, n int, err error) {
	m := r.it.Matrix
	if m == nil || m.Rows < 0 || m.Cols <= 0 {
		return 0, 0, fmt.Errorf("no %s geometry (rows, units)", cell)
	}
	if width*m.Rows*m.Cols > maxElems {
		return 0, 0, fmt.Errorf("%d rows of %d units: activations past 32-bit indices", m.Rows, m.Cols)
	}
	return m.Rows, m.Cols, nil
}

// gateAddr returns the address of gate k's element at idx of a row of
// gates n wide (idx: the element of gate 0).
func (b *builder) gateAddr(base, idx string, k, n int) string {
	if k > 0 {
		idx = b.addu(idx, u32i(k*n))
	}
	return b.offset(base, idx, 4)
}

// renderLSTMCell renders h = o·tanh(c) with c = f·cPrev + i·g from z
// [B, 4n] (in0) and cPrev [B, n] (in1; without it c = i·g): i, f, o =
// σ(z_i, z_f, z_o), g = tanh(z_g). Parts: c [B, n] and the activations
// [B, 5n] (each row's i, f, g, o, tanh c), in the workspace when nothing
// reads them.
func renderLSTMCell(r *req) error {
	B, n, err := r.lstmGeom()
	if err != nil {
		return err
	}
	prev := len(r.it.In) > 1
	c := r.partOrWork(0, int64(B*n*4))
	acts := r.partOrWork(1, int64(B*5*n*4))
	params := 4
	if prev {
		params++
	}
	b, p, e := r.elementwiseKernel("lstm_cell", params, B*n)
	row, j := b.divu(e, n), b.remu(e, n)
	zi, ai := b.madu(row, 4*n, j), b.madu(row, 5*n, j)
	var gates [4]string
	for k, op := range []graph.Op{graph.OpSigmoid, graph.OpSigmoid, graph.OpTanh, graph.OpSigmoid} {
		v, err := b.stepOp(op, b.load(tensor.Float32, b.gateAddr(p[3], zi, k, n)), "")
		if err != nil {
			return err
		}
		b.store(tensor.Float32, b.gateAddr(p[2], ai, k, n), v)
		gates[k] = v
	}
	i, f, g, o := gates[0], gates[1], gates[2], gates[3]
	cv := b.mulF(i, g)
	if prev {
		cv = b.addF(b.mulF(f, b.load(tensor.Float32, b.offset(p[4], e, 4))), cv)
	}
	b.store(tensor.Float32, b.offset(p[1], e, 4), cv)
	tc, err := b.stepOp(graph.OpTanh, cv, "")
	if err != nil {
		return err
	}
	b.store(tensor.Float32, b.gateAddr(p[2], ai, 4, n), tc)
	b.store(tensor.Float32, b.offset(p[0], e, 4), b.mulF(o, tc))
	args := []Arg{out(), c, acts, in(0)}
	if prev {
		args = append(args, in(1))
	}
	r.launch(b.kernel(), blocks(B*n), args...)
	return nil
}

// renderLSTMCellGrad renders dz [B, 4n] from the activations [B, 5n]
// (in0), dh and dc [B, n] (in1, in2) and cPrev (in3, if any), each
// operation rounded in this order (SigmoidGrad's (g·y)·(1-y), TanhGrad's
// g·(1-y·y)):
//
//	dc' = dc + (dh·o)·(1 - tc·tc)
//	dz_i = ((dc'·g)·i)·(1 - i)      dz_f = ((dc'·cPrev)·f)·(1 - f)  (0 without cPrev)
//	dz_g = (dc'·i)·(1 - g·g)        dz_o = ((dh·tc)·o)·(1 - o)
//
// and, with cPrev, its part dcPrev = dc'·f [B, n] (in the workspace when
// nothing reads it; without cPrev there is none and nothing is written).
func renderLSTMCellGrad(r *req) error {
	B, n, err := r.lstmGeom()
	if err != nil {
		return err
	}
	prev := len(r.it.In) > 3
	params := 4
	if prev {
		params = 6
	}
	b, p, e := r.elementwiseKernel("lstm_cell_grad", params, B*n)
	// p: dz, acts, dh, dc [, cPrev, dcPrev]
	row, j := b.divu(e, n), b.remu(e, n)
	zi, ai := b.madu(row, 4*n, j), b.madu(row, 5*n, j)
	var a [5]string
	for k := range a {
		a[k] = b.load(tensor.Float32, b.gateAddr(p[1], ai, k, n))
	}
	i, f, g, o, tc := a[0], a[1], a[2], a[3], a[4]
	dh := b.load(tensor.Float32, b.offset(p[2], e, 4))
	dc := b.load(tensor.Float32, b.offset(p[3], e, 4))
	one := f32i(1)
	sigGrad := func(y, gr string) string { return b.mulF(b.mulF(gr, y), b.subF(one, y)) }
	dct := b.addF(dc, b.mulF(b.mulF(dh, o), b.subF(one, b.mulF(tc, tc))))
	dzf := f32i(0)
	if prev {
		dzf = sigGrad(f, b.mulF(dct, b.load(tensor.Float32, b.offset(p[4], e, 4))))
		b.store(tensor.Float32, b.offset(p[5], e, 4), b.mulF(dct, f))
	}
	dz := [4]string{
		sigGrad(i, b.mulF(dct, g)),
		dzf,
		b.mulF(b.mulF(dct, i), b.subF(one, b.mulF(g, g))),
		sigGrad(o, b.mulF(dh, tc)),
	}
	for k, v := range dz {
		b.store(tensor.Float32, b.gateAddr(p[0], zi, k, n), v)
	}
	args := []Arg{out(), in(0), in(1), in(2)}
	if prev {
		args = append(args, in(3), r.partOrWork(0, int64(B*n*4)))
	}
	r.launch(b.kernel(), blocks(B*n), args...)
	return nil
}

// renderGRUCell renders h [B, n] from x [B, 3n] (in0: gates z, r, h side
// by side), u [B, 3n] (in1, if any) and hPrev [B, n] (in2, if any; never
// without u), each operation rounded in this order:
//
//	z = σ(x_z + u_z)    r = σ(x_r + u_r)    h' = tanh(x_h + r·u_h)   (without u: σ(x_z), σ(x_r), tanh(x_h))
//	h = h' + z·(hPrev - h')                                         (h' - z·h' without hPrev)
//
// Part: the activations [B, 4n] (each row's z, r, h' and u_h, 0 without
// u), in the workspace when nothing reads them.
func renderGRUCell(r *req) error {
	B, n, err := r.gruGeom()
	if err != nil {
		return err
	}
	withU, prev := len(r.it.In) > 1, len(r.it.In) > 2
	acts := r.partOrWork(0, int64(B*4*n*4))
	b, p, e := r.elementwiseKernel("gru_cell", 2+len(r.it.In), B*n)
	// p: h, acts, x [, u [, hPrev]]
	row, j := b.divu(e, n), b.remu(e, n)
	gi, ai := b.madu(row, 3*n, j), b.madu(row, 4*n, j)
	var x, u [3]string
	for k := range x {
		x[k] = b.load(tensor.Float32, b.gateAddr(p[2], gi, k, n))
		if withU {
			u[k] = b.load(tensor.Float32, b.gateAddr(p[3], gi, k, n))
		}
	}
	pre := x
	if withU {
		pre = [3]string{b.addF(x[0], u[0]), b.addF(x[1], u[1]), ""}
	}
	var a [3]string // z, r, h'
	for k, op := range []graph.Op{graph.OpSigmoid, graph.OpSigmoid, graph.OpTanh} {
		if k == 2 && withU {
			pre[2] = b.addF(x[2], b.mulF(a[1], u[2]))
		}
		if a[k], err = b.stepOp(op, pre[k], ""); err != nil {
			return err
		}
		b.store(tensor.Float32, b.gateAddr(p[1], ai, k, n), a[k])
	}
	uh := f32i(0)
	if withU {
		uh = u[2]
	}
	b.store(tensor.Float32, b.gateAddr(p[1], ai, 3, n), uh)
	z, hh := a[0], a[2]
	var h string
	if prev {
		h = b.addF(hh, b.mulF(z, b.subF(b.load(tensor.Float32, b.offset(p[4], e, 4)), hh)))
	} else {
		h = b.subF(hh, b.mulF(z, hh))
	}
	b.store(tensor.Float32, b.offset(p[0], e, 4), h)
	args := []Arg{out(), acts}
	for i := range r.it.In {
		args = append(args, in(i))
	}
	r.launch(b.kernel(), blocks(B*n), args...)
	return nil
}

// renderGRUCellGrad renders dx [B, 3n] from the activations [B, 4n]
// (in0: z, r, h', u_h), dh [B, n] (in1) and hPrev [B, n] (in2, if any),
// with D = hPrev - h' (-h' without hPrev) and each operation rounded in
// this order (SigmoidGrad's (g·y)·(1-y)):
//
//	dhPrev = dh·z       dh' = dh - dh·z      da = dh'·(1 - h'·h')
//	dz = ((dh·D)·z)·(1 - z)                  dr = ((da·u_h)·r)·(1 - r)
//	dx = [dz, dr, da]                        du = [dz, dr, da·r]
//
// Parts: du [B, 3n], and dhPrev [B, n] with hPrev (each in the workspace
// when nothing reads it; without hPrev there is no dhPrev and nothing is
// written).
func renderGRUCellGrad(r *req) error {
	B, n, err := r.gruGeom()
	if err != nil {
		return err
	}
	prev := len(r.it.In) > 2
	params := 4
	if prev {
		params += 2
	}
	b, p, e := r.elementwiseKernel("gru_cell_grad", params, B*n)
	// p: dx, acts, dh, du [, hPrev, dhPrev]
	row, j := b.divu(e, n), b.remu(e, n)
	gi, ai := b.madu(row, 3*n, j), b.madu(row, 4*n, j)
	var a [4]string
	for k := range a {
		a[k] = b.load(tensor.Float32, b.gateAddr(p[1], ai, k, n))
	}
	z, rg, hh, uh := a[0], a[1], a[2], a[3]
	dh := b.load(tensor.Float32, b.offset(p[2], e, 4))
	one := f32i(1)
	sigGrad := func(y, gr string) string { return b.mulF(b.mulF(gr, y), b.subF(one, y)) }
	s := b.mulF(dh, z)
	var d string
	if prev {
		b.store(tensor.Float32, b.offset(p[5], e, 4), s)
		d = b.subF(b.load(tensor.Float32, b.offset(p[4], e, 4)), hh)
	} else {
		d = b.f32()
		b.ins("neg.f32", d, hh)
	}
	da := b.mulF(b.subF(dh, s), b.subF(one, b.mulF(hh, hh)))
	dz := sigGrad(z, b.mulF(dh, d))
	dr := sigGrad(rg, b.mulF(da, uh))
	for k, v := range []string{dz, dr, da} {
		b.store(tensor.Float32, b.gateAddr(p[0], gi, k, n), v)
	}
	for k, v := range []string{dz, dr, b.mulF(da, rg)} {
		b.store(tensor.Float32, b.gateAddr(p[3], gi, k, n), v)
	}
	args := []Arg{out(), in(0), in(1), r.partOrWork(0, int64(B*3*n*4))}
	if prev {
		args = append(args, in(2), r.partOrWork(1, int64(B*n*4)))
	}
	r.launch(b.kernel(), blocks(B*n), args...)
	return nil
}
