//go:build race

package kerneltest

// raceEnabled shrinks the suite's largest problems under the race detector,
// which slows the Go loops many times over.
const raceEnabled = true
