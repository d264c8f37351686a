//go:build race

package dist

// raceEnabled: the test program is built with -race too.
const raceEnabled = true
