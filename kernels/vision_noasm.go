//go:build purego || !amd64

package kernels

// Without the assembly tiles every convolution runs through im2col.

type convTileFunc func(y, x, w *float32, xoff, woff *int, taps, cin, xstride, ldw, ldy int)

var directTiles [2][5]convTileFunc

type filtTileFunc func(dw, x, dy *float32, rows, cols, xcol, xrow, dycol, dyrow, ldw int, acc bool)

var filtTiles [2][3]filtTileFunc

type stemTileFunc func(dw, x, dy *float32, rows, cols, xcol, xrow, xtap, dycol, dyrow, ldw int, acc bool)

var stemTiles [2][stemPairs]stemTileFunc

func momentsSIMD(s1, s2 []float64, x, shift []float32, rows, stride, blocks int) bool { return false }

func sumsSIMD(s1, s2 []float64, g, x []float32, rows, stride, blocks int) bool { return false }

func wgSIMD(which int, out, in []float32, orow, ocol, irow, icol, blocks, tiles, ostep, istep int) bool {
	return false
}
