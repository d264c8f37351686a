//go:build !purego

package kernels

//go:generate go run ./internal/genvision -out vision_amd64.s -stubs vision_stub_amd64.go -pkg kernels

// convTileFunc is the signature of the direct convolution's tiles
// (vision_amd64.s).
type convTileFunc func(y, x, w *float32, xoff, woff *int, taps, cin, xstride, ldw, ldy int)

// directTiles holds the tiles by width (V = 1, 2) and height (12, 8, 4,
// 2, 1), or nothing where the assembly does not run (no AVX-512).
var directTiles = func() (t [2][5]convTileFunc) {
	if !simdPool {
		return t
	}
	return [2][5]convTileFunc{
		{convTile512r12v1, convTile512r8v1, convTile512r4v1, convTile512r2v1, convTile512r1v1},
		{convTile512r12v2, convTile512r8v2, convTile512r4v2, convTile512r2v2, convTile512r1v2},
	}
}()

// filtTileFunc is the signature of the filter gradient's tiles.
type filtTileFunc func(dw, x, dy *float32, rows, cols, xcol, xrow, dycol, dyrow, ldw int, acc bool)

// filtTiles holds the filter gradient's tiles by width (V = 1, 2) and
// channel block (filtChannels), or nothing without AVX-512.
var filtTiles = func() (t [2][3]filtTileFunc) {
	if !simdPool {
		return t
	}
	return [2][3]filtTileFunc{
		{filtTile512c16v1, filtTile512c8v1, filtTile512c4v1},
		{filtTile512c12v2, filtTile512c8v2, filtTile512c4v2},
	}
}()

// stemTileFunc is the signature of the stem filter gradient's tiles.
type stemTileFunc func(dw, x, dy *float32, rows, cols, xcol, xrow, xtap, dycol, dyrow, ldw int, acc bool)

// stemTiles holds the stem filter gradient's tiles: [0][p-1] one window
// row of p pairs, [1][p-1] three rows (p <= 9); nothing without AVX-512.
var stemTiles = func() (t [2][stemPairs]stemTileFunc) {
	if !simdPool {
		return t
	}
	t[0] = [stemPairs]stemTileFunc{stemTile512r1p1, stemTile512r1p2, stemTile512r1p3, stemTile512r1p4, stemTile512r1p5,
		stemTile512r1p6, stemTile512r1p7, stemTile512r1p8, stemTile512r1p9, stemTile512r1p10, stemTile512r1p11,
		stemTile512r1p12, stemTile512r1p13, stemTile512r1p14, stemTile512r1p15, stemTile512r1p16, stemTile512r1p17,
		stemTile512r1p18, stemTile512r1p19, stemTile512r1p20, stemTile512r1p21, stemTile512r1p22, stemTile512r1p23,
		stemTile512r1p24, stemTile512r1p25, stemTile512r1p26, stemTile512r1p27}
	copy(t[1][:], []stemTileFunc{stemTile512r3p1, stemTile512r3p2, stemTile512r3p3, stemTile512r3p4, stemTile512r3p5,
		stemTile512r3p6, stemTile512r3p7, stemTile512r3p8, stemTile512r3p9})
	return t
}()

// momentsSIMD adds the shifted sums and sums of squares of the first
// 16·blocks channels of rows rows of x (stride floats apart) to s1 and s2,
// and returns true; or returns false, doing nothing, without AVX-512.
func momentsSIMD(s1, s2 []float64, x, shift []float32, rows, stride, blocks int) bool {
	if !simdPool || rows < 1 || blocks < 1 {
		return false
	}
	if len(s1) < 16*blocks || len(s2) < 16*blocks || len(shift) < 16*blocks || (rows-1)*stride+16*blocks > len(x) {
		panicf("moments: %d rows of %d blocks past the end of x (%d) or the sums", rows, blocks, len(x))
	}
	moments512(&s1[0], &s2[0], &x[0], &shift[0], rows, stride, blocks)
	return true
}

// sumsSIMD adds the sums of g and of g·x over rows rows (stride floats
// apart) of the first 16·blocks channels to s1 and s2, and returns true;
// or returns false, doing nothing, without AVX-512.
func sumsSIMD(s1, s2 []float64, g, x []float32, rows, stride, blocks int) bool {
	if !simdPool || rows < 1 || blocks < 1 {
		return false
	}
	if end := (rows-1)*stride + 16*blocks; len(s1) < 16*blocks || len(s2) < 16*blocks || end > len(g) || end > len(x) {
		panicf("channel sums: %d rows of %d blocks past the end of g (%d), x (%d) or the sums", rows, blocks, len(g), len(x))
	}
	sums512(&s1[0], &s2[0], &g[0], &x[0], rows, stride, blocks)
	return true
}

// wgAsm holds the tile transforms' assembly by their index in wgMats.
var wgAsm = [...]func(out, in *float32, orow, ocol, irow, icol, blocks, tiles, onext, inext int){
	wgBT: wgBT512, wgAT: wgAT512, wgA: wgA512, wg4BT: wg4BT512, wg4AT: wg4AT512, wg4A: wg4A512}

// wgSIMD runs wgApply's transform which over 16·blocks channels in
// assembly and returns true, or returns false without AVX-512 (wgApply
// has checked the bounds).
func wgSIMD(which int, out, in []float32, orow, ocol, irow, icol, blocks, tiles, ostep, istep int) bool {
	if !simdPool {
		return false
	}
	wgAsm[which](&out[0], &in[0], orow, ocol, irow, icol, blocks, tiles, 4*(ostep-16*blocks), 4*(istep-16*blocks))
	return true
}
