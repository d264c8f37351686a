package testutil

import "math/rand/v2"

// NewRand returns a deterministic generator for seed, so a failing test
// reproduces exactly.
func NewRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6865616472)) }

// RandFloats returns n values drawn uniformly from [-1, 1).
func RandFloats(rng *rand.Rand, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 2*rng.Float64() - 1
	}
	return out
}

// RandFloat32s returns n float32 values drawn uniformly from [-1, 1).
func RandFloat32s(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(2*rng.Float64() - 1)
	}
	return out
}
