//go:build !linux

package mem

import (
	"fmt"
	"runtime"
)

// ProcessLimit returns the memory limit the process lives under. Only Linux
// has one headroom can read (cgroups, /proc/meminfo); elsewhere the error
// wraps ErrNoLimit, and callers run without a default budget.
func ProcessLimit() (Limit, error) {
	return Limit{}, fmt.Errorf("%w: no cgroups or /proc/meminfo on %s", ErrNoLimit, runtime.GOOS)
}
