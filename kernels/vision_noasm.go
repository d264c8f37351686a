//go:build purego || !amd64

package kernels

// Without the assembly tiles every convolution runs through im2col.

type convTileFunc func(y, x, w *float32, xoff, woff *int, taps, cin, xstride, ldw, ldy int)

var directTiles [2][5]convTileFunc
