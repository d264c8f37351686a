package kernels

import "fmt"

// MatMulAlgo names how a float32 matrix product runs. Every algorithm sums
// each element's k products in float32, but not in the same order: the
// packed product sums in blocks of KC (gemm.go), the register tiles in
// order. A run that must give the same bits as another must run the same
// algorithms (the CPU backend's choice cache pins them).
type MatMulAlgo uint8

const (
	// MatMulPacked is the built-in rule: the packed, cache-blocked product
	// (gemm.go), split over the pool's threads with at least gemmMinFlops
	// of work each (a threshold measured on a Zen 4).
	MatMulPacked MatMulAlgo = iota
	// MatMulPackedOne is the packed product on the calling thread alone: no
	// hand-off to the pool's threads.
	MatMulPackedOne
	// MatMulTiles is the direct convolution's register tiles (AVX-512) as a
	// convolution of one tap: nothing is packed, the operands are read
	// where they lie. It runs in strips of 32 columns of dst over the
	// pool's threads; within a strip every row tile reads the strip of b
	// while it is in the core's cache. It takes products whose b is not
	// transposed, n a multiple of 16 and (with a transposed a) m a multiple
	// of 4, and does not accumulate.
	MatMulTiles
	// MatMulTilesOne is MatMulTiles on the calling thread alone.
	MatMulTilesOne
)

var matMulAlgoNames = [...]string{MatMulPacked: "packed", MatMulPackedOne: "packed1", MatMulTiles: "tiles", MatMulTilesOne: "tiles1"}

func (a MatMulAlgo) String() string {
	if int(a) < len(matMulAlgoNames) {
		return matMulAlgoNames[a]
	}
	return fmt.Sprintf("MatMulAlgo(%d)", a)
}

// ParseMatMulAlgo parses a MatMulAlgo's name ("packed", "packed1",
// "tiles", "tiles1").
func ParseMatMulAlgo(s string) (MatMulAlgo, error) {
	for a, n := range matMulAlgoNames {
		if n == s {
			return MatMulAlgo(a), nil
		}
	}
	return 0, fmt.Errorf("unknown matrix product algorithm %q (want packed, packed1, tiles or tiles1)", s)
}

// tilesStrip is the columns of dst one region of a MatMulTiles product
// computes: two vectors of the widest tiles.
const tilesStrip = 32

// MatMulAlgos returns the algorithms that can run the float32 product
// dst[m, n] = op(a)·op(b) (accumulate: dst +=) on threads threads, the
// rule's first: MatMulPacked always; MatMulPackedOne where the rule would
// split the product over more than one thread; MatMulTiles (and, on more
// than one thread, MatMulTilesOne) where the tiles can take it.
func MatMulAlgos(m, n, k int, transA, transB, accumulate bool, threads int) []MatMulAlgo {
	algos := []MatMulAlgo{MatMulPacked}
	if m <= 0 || n <= 0 || k <= 0 || sgemmExternal != nil {
		return algos
	}
	c := gemmCall{tier: gemmTierFor(n), m: m, n: n, k: k}
	if c.plan(threads) > 1 {
		algos = append(algos, MatMulPackedOne)
	}
	if matMulTilesOK(m, n, transA, transB, accumulate) {
		algos = append(algos, MatMulTiles)
		if threads > 1 && n > tilesStrip {
			algos = append(algos, MatMulTilesOne)
		}
	}
	return algos
}

// matMulTilesOK reports whether the register tiles can run the product.
func matMulTilesOK(m, n int, transA, transB, accumulate bool) bool {
	if directTiles[0][0] == nil || filtTiles[0][0] == nil || transB || accumulate || n%16 != 0 {
		return false
	}
	return !transA || m%4 == 0
}

// MatMulWith sets dst = op(a)·op(b) (accumulate: adds it) in float32 with
// algorithm algo on pool p, as MatMulOn does, and returns dst. An
// algorithm MatMulAlgos does not offer for the product runs as
// MatMulPacked.
func MatMulWith(p *Pool, algo MatMulAlgo, dst, a, b []float32, m, n, k int, transA, transB, accumulate bool) []float32 {
	checkMatMul("MatMul", len(dst), len(a), len(b), m, n, k)
	if m == 0 || n == 0 || k == 0 || sgemmExternal != nil {
		algo = MatMulPacked
	}
	switch {
	case (algo == MatMulTiles || algo == MatMulTilesOne) && matMulTilesOK(m, n, transA, transB, accumulate):
		strips := ceilDiv(n, tilesStrip)
		if algo == MatMulTilesOne || strips < 2 || p.Threads() < 2 {
			tilesStrips(dst, a, b, m, n, k, transA, 0, n)
			return dst
		}
		p.calls.jobMu.Lock()
		defer p.calls.jobMu.Unlock()
		j := &p.calls.job
		*j = poolJob{kind: jobMatMul, y: dst, x: a, filter: b, mm: mmShape{m: m, n: n, k: k, transA: transA}}
		p.runJob(j, strips)
		*j = poolJob{}
	case algo == MatMulPackedOne:
		sgemmOn(p, dst, a, b, m, n, k, transA, transB, accumulate, true)
	default:
		sgemm(p, dst, a, b, m, n, k, transA, transB, accumulate)
	}
	return dst
}

// mmShape is a jobMatMul's product: dst[m, n] = op(a)·b.
type mmShape struct {
	m, n, k int
	transA  bool
}

// mmPart computes strip r of a jobMatMul: columns [32r, 32r+32) of dst.
func (j *poolJob) mmPart(r int) {
	s := j.mm
	tilesStrips(j.y, j.x, j.filter, s.m, s.n, s.k, s.transA, r*tilesStrip, min((r+1)*tilesStrip, s.n))
}

// tilesStrips computes columns [c0, c1) of dst = op(a)·b on the register
// tiles, a strip of up to 32 columns at a time. Without transA each tile
// is the direct convolution's ([rows of a]·[k, strip of b], 12 rows at
// most), with it the filter gradient's ([k, channels of a]ᵀ·[k, strip of
// b], 16 channels at most); each element is summed over k in order.
func tilesStrips(dst, a, b []float32, m, n, k int, transA bool, c0, c1 int) {
	for f0 := c0; f0 < c1; {
		nv := 1
		if c1-f0 >= 32 {
			nv = 2
		}
		if transA {
			for i := 0; i < m; {
				ci := 0
				for filtChannels[nv-1][ci] > m-i {
					ci++
				}
				filtTiles[nv-1][ci](&dst[i*n+f0], &a[i], &b[f0], 1, k, 4*m, 0, 4*n, 0, n, false)
				i += filtChannels[nv-1][ci]
			}
		} else {
			for i := 0; i < m; {
				ri := 0
				for directTileRows[ri] > m-i {
					ri++
				}
				directTiles[nv-1][ri](&dst[i*n+f0], &a[i*k], &b[f0], &wgZeroOffs[0], &wgZeroOffs[0], 1, k, k, n, n)
				i += directTileRows[ri]
			}
		}
		f0 += 16 * nv
	}
}
