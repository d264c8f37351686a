//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

//go:generate go run ./internal/gentrans -out trans_amd64.s -stubs trans_stub_amd64.go -pkg kernels

// transVector reports whether this CPU runs the AVX-512 Sigmoid and Tanh
// loops (F for VSCALEFPS and the k-masks, BMI2 for the tail mask).
var transVector = cpu.X86.HasAVX512F && cpu.X86.HasBMI2

// sigmoidVector sets dst = Sigmoid(x) in AVX-512 and reports whether it
// did (len(dst) == len(x)).
func sigmoidVector(dst, x []float32) bool {
	if !transVector || !simdTrans || len(x) == 0 {
		return false
	}
	sigmoid512(&dst[0], &x[0], len(x))
	return true
}

// tanhVector sets dst = Tanh(x) in AVX-512 and reports whether it did.
func tanhVector(dst, x []float32) bool {
	if !transVector || !simdTrans || len(x) == 0 {
		return false
	}
	tanh512(&dst[0], &x[0], len(x))
	return true
}
