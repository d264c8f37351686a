package testutil

// NumericGrad returns the central-difference gradient of f at x:
//
//	grad[i] = (f(x + eps·e_i) - f(x - eps·e_i)) / 2eps
//
// whose truncation error is O(eps²) (Nocedal & Wright, Numerical
// Optimization, §8.1). eps around 1e-6 balances truncation against rounding
// in float64. x is modified during the evaluation and restored exactly
// before NumericGrad returns; f must not retain x.
func NumericGrad(f func(x []float64) float64, x []float64, eps float64) []float64 {
	grad := make([]float64, len(x))
	for i, xi := range x {
		x[i] = xi + eps
		fp := f(x)
		x[i] = xi - eps
		fm := f(x)
		x[i] = xi
		grad[i] = (fp - fm) / (2 * eps)
	}
	return grad
}
