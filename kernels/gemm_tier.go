package kernels

// The micro-kernel tiers of Sgemm. gemm_amd64.go adds the assembly tiers on
// CPUs that have them; the Go tier below runs everywhere (and alone in a
// purego build).

// gemmActive is the tier Sgemm uses: the first of gemmTiers, the fastest the
// CPU supports, chosen once at start-up.
var gemmActive = gemmTiers[0]

// gemmGo is the portable tier: a 4×4 tile of scalar sums.
var gemmGo = gemmTier{name: "go", mr: 4, nr: 4, kernel: sgemmKernelGo,
	blk: gemmBlocking{kc: 256, mc: 480, nc: 384}, bInL1: true}

// sgemmKernelGo is the Go micro-kernel: c[4×4] (+)= a[k][4]·b[k][4]. The
// sixteen sums stay in locals over the k loop, so each loaded element of a
// and b is used four times. (About 4 GFLOP/s on amd64, where the compiler
// spills some of the sums; a wider tile spills more. On arm64, with 32
// floating-point registers and fused multiply-add, it fits.)
func sgemmKernelGo(k int, a, b, c []float32, ldc int, load bool) {
	a, b = a[:4*k], b[:4*k]
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	var c20, c21, c22, c23, c30, c31, c32, c33 float32
	for len(a) >= 4 && len(b) >= 4 {
		av, bv := (*[4]float32)(a), (*[4]float32)(b)
		a, b = a[4:], b[4:]
		b0, b1, b2, b3 := bv[0], bv[1], bv[2], bv[3]
		a0 := av[0]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		a1 := av[1]
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		a2 := av[2]
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		a3 := av[3]
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	rows := [4][4]float32{{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}, {c30, c31, c32, c33}}
	for i := range rows {
		d := (*[4]float32)(c[i*ldc:])
		if load {
			d[0] += rows[i][0]
			d[1] += rows[i][1]
			d[2] += rows[i][2]
			d[3] += rows[i][3]
		} else {
			*d = rows[i]
		}
	}
}
