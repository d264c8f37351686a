package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// lstmRef computes one element of an LSTM step and its gradient from the
// definitions' formulas (graph.LSTMCell, graph.LSTMCellGrad), one
// operation at a time, with the activations of the elementwise kernels
// (run on one element), so that the step's kernels must give its bits.
type lstmRef[T kernels.Float] struct{}

func (lstmRef[T]) sig(x T) T  { var d [1]T; kernels.Sigmoid(d[:], []T{x}); return d[0] }
func (lstmRef[T]) tanh(x T) T { var d [1]T; kernels.Tanh(d[:], []T{x}); return d[0] }

// step returns i, f, g, o, tanh(c), c and h of one unit.
func (r lstmRef[T]) step(zi, zf, zg, zo, cp T, hasPrev bool) (i, f, g, o, tc, c, h T) {
	i, f, g, o = r.sig(zi), r.sig(zf), r.tanh(zg), r.sig(zo)
	c = i * g
	if hasPrev {
		fc := f * cp
		c = fc + c
	}
	tc = r.tanh(c)
	h = o * tc
	return
}

// grad returns dz_i, dz_f, dz_g, dz_o and dcPrev of one unit.
func (lstmRef[T]) grad(i, f, g, o, tc, dh, dc, cp T, hasPrev bool) (di, df, dg, do, dcp T) {
	s := 1 - tc*tc
	t := dh * o
	t = t * s
	d := dc + t
	do = dh * tc
	do = do * o * (1 - o)
	di = d * g
	di = di * i * (1 - i)
	dg = d * i
	dg = dg * (1 - g*g)
	if hasPrev {
		df = d * cp
		df = df * f * (1 - f)
	}
	dcp = d * f
	return
}

func testLSTMCell[T kernels.Float](t *testing.T, rng *rand.Rand, same func(a, b T) bool) {
	var ref lstmRef[T]
	fill := func(n int, scale float64) []T {
		x := make([]T, n)
		for i := range x {
			x[i] = T(rng.NormFloat64() * scale)
		}
		return x
	}
	for _, sz := range [][2]int{{1, 1}, {3, 5}, {7, 33}, {2, 256}, {5, 300}, {32, 256}} {
		B, n := sz[0], sz[1]
		for _, hasPrev := range []bool{false, true} {
			z, cp := fill(B*4*n, 3), fill(B*n, 2)
			var cPrev []T
			if hasPrev {
				cPrev = cp
			}
			// rows lo..hi only: the others must stay as they were
			lo, hi := B/3, B-B/4
			const mark = 12345
			h, c, acts := fill(B*n, 0), fill(B*n, 0), fill(B*5*n, 0)
			for _, s := range [][]T{h, c, acts} {
				for k := range s {
					s[k] = mark
				}
			}
			kernels.LSTMCellRows(h, c, acts, z, cPrev, n, lo, hi)
			dh, dc := fill(B*n, 1), fill(B*n, 1)
			dz, dcPrev := fill(B*4*n, 0), fill(B*n, 0)
			for _, s := range [][]T{dz, dcPrev} {
				for k := range s {
					s[k] = mark
				}
			}
			var dcp []T
			if hasPrev {
				dcp = dcPrev
			}
			kernels.LSTMCellGradRows(dz, dcp, acts, dh, dc, cPrev, n, lo, hi)
			for b := range B {
				for j := range n {
					at, z4, a5 := b*n+j, b*4*n+j, b*5*n+j
					got := []T{acts[a5], acts[a5+n], acts[a5+2*n], acts[a5+3*n], acts[a5+4*n], c[at], h[at],
						dz[z4], dz[z4+n], dz[z4+2*n], dz[z4+3*n], dcPrev[at]}
					var want []T
					if b < lo || b >= hi {
						want = []T{mark, mark, mark, mark, mark, mark, mark, mark, mark, mark, mark, mark}
					} else {
						i, f, g, o, tc, cc, hh := ref.step(z[z4], z[z4+n], z[z4+2*n], z[z4+3*n], cp[at], hasPrev)
						di, df, dg, do, dcpv := ref.grad(i, f, g, o, tc, dh[at], dc[at], cp[at], hasPrev)
						if !hasPrev {
							dcpv = mark // not wanted: not written
						}
						want = []T{i, f, g, o, tc, cc, hh, di, df, dg, do, dcpv}
					}
					names := []string{"i", "f", "g", "o", "tanh(c)", "c", "h", "dz_i", "dz_f", "dz_g", "dz_o", "dcPrev"}
					for k := range got {
						if !same(got[k], want[k]) {
							t.Fatalf("B=%d n=%d prev=%v rows %d..%d: row %d unit %d: %s = %v, want %v", B, n, hasPrev, lo, hi, b, j, names[k], got[k], want[k])
						}
					}
				}
			}
		}
	}
}

// TestLSTMCell checks an LSTM step and its gradient, in both float types,
// against the definitions' formulas element by element, bit for bit: on
// row ranges (other rows untouched), without and with a previous state,
// at sizes around the vector loops' blocks.
func TestLSTMCell(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	t.Run("float32", func(t *testing.T) {
		testLSTMCell(t, rng, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })
	})
	t.Run("float64", func(t *testing.T) {
		testLSTMCell(t, rng, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) })
	})
	t.Run("guards", func(t *testing.T) {
		for name, f := range map[string]func(){
			"short z": func() {
				kernels.LSTMCellRows(make([]float32, 6), make([]float32, 6), make([]float32, 30), make([]float32, 23), nil, 3, 0, 2)
			},
			"rows past B": func() {
				kernels.LSTMCellRows(make([]float32, 6), make([]float32, 6), make([]float32, 30), make([]float32, 24), nil, 3, 0, 3)
			},
			"short dc": func() {
				kernels.LSTMCellGradRows(make([]float32, 24), nil, make([]float32, 30), make([]float32, 6), make([]float32, 5), nil, 3, 0, 2)
			},
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: no panic", name)
					}
				}()
				f()
			}()
		}
	})
}

// BenchmarkLSTMCell times the reference lstm's step (32 rows, 256 units)
// and its gradient, with a previous state.
func BenchmarkLSTMCell(b *testing.B) {
	const B, n = 32, 256
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(k int) []float32 {
		x := make([]float32, k)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	z, cp, h, c, acts := fill(4*B*n), fill(B*n), fill(B*n), fill(B*n), fill(5*B*n)
	dh, dc, dz, dcp := fill(B*n), fill(B*n), fill(4*B*n), fill(B*n)
	b.Run("step", func(b *testing.B) {
		for b.Loop() {
			kernels.LSTMCellRows(h, c, acts, z, cp, n, 0, B)
		}
	})
	b.Run("grad", func(b *testing.B) {
		for b.Loop() {
			kernels.LSTMCellGradRows(dz, dcp, acts, dh, dc, cp, n, 0, B)
		}
	})
}

// gruStep returns z, r, h' and h of one unit of a GRU step by the
// definition (graph.GRUCell), one operation at a time.
func gruStep[T kernels.Float](xz, xr, xh, uz, ur, uh, hp T, hasU, hasPrev bool) (z, r, hh, h T) {
	var ref lstmRef[T]
	if hasU {
		az, ar := xz+uz, xr+ur
		z, r = ref.sig(az), ref.sig(ar)
		ru := r * uh
		hh = ref.tanh(xh + ru)
	} else {
		z, r, hh = ref.sig(xz), ref.sig(xr), ref.tanh(xh)
	}
	if hasPrev {
		d := hp - hh
		d = z * d
		h = hh + d
	} else {
		zh := z * hh
		h = hh - zh
	}
	return
}

// gruGrad returns dx_z, dx_r, dx_h, du_h and dhPrev of one unit (u_h is
// 0 for a step without u).
func gruGrad[T kernels.Float](z, r, hh, dh, uh, hp T, hasPrev bool) (dz, dr, da, duh, dhp T) {
	dhp = dh * z
	dhh := dh - dhp
	s := hh * hh
	da = dhh * (1 - s)
	D := -hh
	if hasPrev {
		D = hp - hh
	}
	dz = dh * D
	dz = dz * z * (1 - z)
	dr = da * uh
	dr = dr * r * (1 - r)
	duh = da * r
	return
}

func testGRUCell[T kernels.Float](t *testing.T, rng *rand.Rand, same func(a, b T) bool) {
	fill := func(n int, scale float64) []T {
		x := make([]T, n)
		for i := range x {
			x[i] = T(rng.NormFloat64() * scale)
		}
		return x
	}
	const mark = 12345
	marked := func(n int) []T {
		x := make([]T, n)
		for i := range x {
			x[i] = mark
		}
		return x
	}
	for _, sz := range [][2]int{{1, 1}, {3, 5}, {7, 33}, {5, 300}} {
		B, n := sz[0], sz[1]
		for _, mode := range []struct{ u, prev bool }{{false, false}, {true, false}, {true, true}} {
			x, uu, hp := fill(3*B*n, 2), fill(3*B*n, 2), fill(B*n, 1)
			var u, hPrev []T
			if mode.u {
				u = uu
			}
			if mode.prev {
				hPrev = hp
			}
			lo, hi := B/3, B-B/4
			h, acts := marked(B*n), marked(4*B*n)
			kernels.GRUCellRows(h, acts, x, u, hPrev, n, lo, hi)
			dh := fill(B*n, 1)
			dx, du, dhPrev := marked(3*B*n), marked(3*B*n), marked(B*n)
			var duw, dhpw []T
			if mode.u {
				duw = du
			}
			if mode.prev {
				dhpw = dhPrev
			}
			kernels.GRUCellGradRows(dx, duw, dhpw, acts, dh, hPrev, n, lo, hi)
			names := []string{"z", "r", "h'", "u_h", "h", "dx_z", "dx_r", "dx_h", "du_z", "du_r", "du_h", "dhPrev"}
			for b := range B {
				for j := range n {
					at, a3, a4 := b*n+j, 3*b*n+j, 4*b*n+j
					got := []T{acts[a4], acts[a4+n], acts[a4+2*n], acts[a4+3*n], h[at], dx[a3], dx[a3+n], dx[a3+2*n], du[a3], du[a3+n], du[a3+2*n], dhPrev[at]}
					want := make([]T, len(got))
					for k := range want {
						want[k] = mark
					}
					if b >= lo && b < hi {
						var uh T // u_h, 0 without u
						if mode.u {
							uh = uu[a3+2*n]
						}
						z, r, hh, hv := gruStep(x[a3], x[a3+n], x[a3+2*n], uu[a3], uu[a3+n], uh, hp[at], mode.u, mode.prev)
						dz, dr, da, duh, dhp := gruGrad(z, r, hh, dh[at], uh, hp[at], mode.prev)
						copy(want, []T{z, r, hh, uh, hv, dz, dr, da})
						if mode.u {
							copy(want[8:], []T{dz, dr, duh})
						}
						if mode.prev {
							want[11] = dhp
						}
					}
					for k := range got {
						if !same(got[k], want[k]) {
							t.Fatalf("B=%d n=%d u=%v prev=%v rows %d..%d: row %d unit %d: %s = %v, want %v", B, n, mode.u, mode.prev, lo, hi, b, j, names[k], got[k], want[k])
						}
					}
				}
			}
		}
	}
}

// TestGRUCell checks a GRU step and its gradient as TestLSTMCell does the
// LSTM's: both float types, bit for bit against the definitions, on row
// ranges, without a recurrent projection (u_h kept as 0), with one, and
// with a previous state.
func TestGRUCell(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	t.Run("float32", func(t *testing.T) {
		testGRUCell(t, rng, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })
	})
	t.Run("float64", func(t *testing.T) {
		testGRUCell(t, rng, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) })
	})
	t.Run("guards", func(t *testing.T) {
		for name, f := range map[string]func(){
			"state without u": func() {
				kernels.GRUCellRows(make([]float32, 6), make([]float32, 24), make([]float32, 18), nil, make([]float32, 6), 3, 0, 2)
			},
			"short dh": func() {
				kernels.GRUCellGradRows(make([]float32, 18), nil, nil, make([]float32, 24), make([]float32, 5), nil, 3, 0, 2)
			},
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: no panic", name)
					}
				}()
				f()
			}()
		}
	})
}
