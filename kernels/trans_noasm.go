//go:build !amd64 || purego

package kernels

// transVector is false without assembly: Sigmoid and Tanh run their Go
// loops.
const transVector = false

func sigmoidVector(dst, x []float32) bool { return false }
func tanhVector(dst, x []float32) bool    { return false }
