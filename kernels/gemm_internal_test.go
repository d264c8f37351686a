package kernels

import "testing"

// TestGemmTierBlocking checks that every tier's tile and blocks fit the
// workspace and that the blocks are whole tiles.
func TestGemmTierBlocking(t *testing.T) {
	for _, tier := range allGemmTiers() {
		b := tier.blk
		if tier.mr > gemmMaxMR || tier.nr > gemmMaxNR {
			t.Errorf("%s: tile %d×%d, want at most %d×%d", tier.name, tier.mr, tier.nr, gemmMaxMR, gemmMaxNR)
		}
		if b.mc%tier.mr != 0 || b.nc%tier.nr != 0 || b.kc < 1 {
			t.Errorf("%s: blocks mc=%d nc=%d kc=%d are not whole %d×%d tiles", tier.name, b.mc, b.nc, b.kc, tier.mr, tier.nr)
		}
		if b.mc*b.kc > gemmMC*gemmKC || b.kc*b.nc > gemmKC*gemmNC {
			t.Errorf("%s: A panel %d or B block %d floats, want at most %d and %d", tier.name, b.mc*b.kc, b.kc*b.nc, gemmMC*gemmKC, gemmKC*gemmNC)
		}
	}
	if gemmMC%12 != 0 || gemmNC%32 != 0 {
		t.Errorf("gemmMC=%d, gemmNC=%d: want multiples of 12 and 32 (UseGemmBlocking relies on it)", gemmMC, gemmNC)
	}
}

// BenchmarkSgemmMicroKernel times each tier's micro-kernel alone on packed
// panels that stay in L1 and L2 (one A micro-panel against eight B
// micro-panels, KC deep, accumulating into C), so its GFLOP/s is the ceiling
// the blocked product approaches.
func BenchmarkSgemmMicroKernel(b *testing.B) {
	for _, t := range allGemmTiers() {
		b.Run(t.name, func(b *testing.B) {
			const kc, panels = gemmKC, 8
			a := make([]float32, kc*t.mr)
			bp := make([]float32, kc*t.nr*panels)
			c := make([]float32, t.mr*t.nr*panels)
			for b.Loop() {
				for j := 0; j < panels; j++ {
					t.kernel(kc, a, bp[j*kc*t.nr:], c[j*t.nr:], t.nr*panels, true)
				}
			}
			b.ReportMetric(2*float64(kc*t.mr*t.nr*panels)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkSgemmTier times a 1024³ product on one thread with each tier.
func BenchmarkSgemmTier(b *testing.B) {
	const n = 1024
	x, y, z := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for _, t := range gemmTiers {
		b.Run(t.name, func(b *testing.B) {
			old := gemmActive
			gemmActive = t
			defer func() { gemmActive = old }()
			p := NewPool(1)
			defer p.Close()
			for b.Loop() {
				sgemm(p, z, x, y, n, n, n, false, false, false)
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// allGemmTiers returns gemmTiers and their narrow variants.
func allGemmTiers() []gemmTier {
	var all []gemmTier
	for _, t := range gemmTiers {
		all = append(all, t)
		if t.narrow != nil {
			all = append(all, *t.narrow)
		}
	}
	return all
}
