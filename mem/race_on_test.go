//go:build race

package mem

// raceEnabled is true when tests run under the race detector, which makes
// the single-goroutine randomized test about five times slower; it then runs
// fewer seeds (concurrency is covered by TestConcurrentAlloc).
const raceEnabled = true
