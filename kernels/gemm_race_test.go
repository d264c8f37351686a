//go:build race

package kernels_test

// raceEnabled shrinks the largest Sgemm test problems under the race
// detector, which slows the packing loops and the Go tier many times over.
const raceEnabled = true
