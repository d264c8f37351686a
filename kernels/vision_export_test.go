package kernels

// SetDirectConv turns the direct convolution tiles on or off and returns a
// function that restores the setting.
func SetDirectConv(on bool) (restore func()) {
	old := directConv
	directConv = on
	return func() { directConv = old }
}

// Winograd runs kind as Winograd's form algo on pool p and reports
// whether it ran.
func Winograd(p *Pool, algo ConvAlgo, kind ConvKind, dst, a, b, work []float32, g ConvGeom, f int) bool {
	return winograd(p, kind, dst, a, b, work, g, f, algo.winogradTile())
}

// WinogradMoments runs the forward product as Winograd's form algo on
// pool p, summing into mom the moments of each group of k output images
// that a chunk of tiles holds whole, and reports whether it ran and how
// many of the groups it summed.
func WinogradMoments(p *Pool, algo ConvAlgo, y, x, filter, work []float32, g ConvGeom, f int, mom []float64, k int) (ran bool, summed int) {
	ran, chunk := winogradMoments(p, ConvForward, y, x, filter, work, g, f, algo.winogradTile(), mom, k)
	s := newWgShape(ConvForward, g, f, algo.winogradTile())
	for gr := 0; gr < ceilDiv(g.N, k); gr++ {
		if wgGroupSummed(gr, k, g.N, s.th*s.tw, chunk) {
			summed++
		}
	}
	return ran, summed
}

// SetWinogradRegion sets the bytes aimed at for one chunk of Winograd's
// tiles and returns a function that restores it.
func SetWinogradRegion(bytes int) (restore func()) {
	old := wgRegionBytes
	wgRegionBytes = bytes
	return func() { wgRegionBytes = old }
}

// SetWinogradTiles lets Winograd's products run on the register tiles (or
// not: the packed products) and returns a function that restores it.
func SetWinogradTiles(on bool) (restore func()) {
	old := wgTiles
	wgTiles = on
	return func() { wgTiles = old }
}

// SetWinogradPadImages lets Winograd stage small images whole and returns
// a function that restores the setting.
func SetWinogradPadImages(on bool) (restore func()) {
	old := wgPadImages
	wgPadImages = on
	return func() { wgPadImages = old }
}

// SetConvRegionBytes sets the bytes aimed at for one region of the
// float32 Conv2D job and returns a function that restores it.
func SetConvRegionBytes(bytes int) (restore func()) {
	old := convRegionBytes
	convRegionBytes = bytes
	return func() { convRegionBytes = old }
}

// HasTiles reports whether the direct convolution's register tiles (and so
// MatMulTiles) exist on this machine.
func HasTiles() bool { return directTiles[0][0] != nil && filtTiles[0][0] != nil }
