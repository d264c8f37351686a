//go:build !unix

package cpu

import "time"

// lockChoices does nothing where there is no flock: processes sharing a
// choices file may then time the same shape at once, and the last to
// write keeps its line.
func lockChoices(file string, wait time.Duration) func() { return func() {} }
