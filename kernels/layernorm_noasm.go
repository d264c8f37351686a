//go:build !amd64 || purego

package kernels

// Without assembly the layer norm runs its Go loops.
func lnOn() bool { return false }

func lnSum512(x *float32, n int) float64                                  { panic("no assembly") }
func lnSumSq512(x *float32, n int, m float64) float64                     { panic("no assembly") }
func lnFwd512(y, x, gamma, beta *float32, n int, m, rs float64)           { panic("no assembly") }
func lnBwdDx512(dx, x, dy, gamma *float32, n int, m, rs, sg, sgx float64) { panic("no assembly") }
func lnBwdSums512(x, dy, gamma *float32, dgamma, dbeta *float64, n int, m, rs float64) (sg, sgx float64) {
	panic("no assembly")
}
