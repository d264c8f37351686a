//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

//go:generate go run ./internal/genln -out layernorm_amd64.s -stubs layernorm_stub_amd64.go -pkg kernels

// lnVector reports whether this CPU runs the AVX-512 layer norm loops.
var lnVector = cpu.X86.HasAVX512F

// simdNorm switches them on; tests turn it off (SetSIMD) so that the Go
// loops can be compared with them.
var simdNorm = true

func lnOn() bool { return lnVector && simdNorm }
