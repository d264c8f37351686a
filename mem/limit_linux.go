//go:build linux

package mem

import "os"

// ProcessLimit returns the memory limit the process lives under: the
// smallest memory limit of its cgroup and the cgroup's ancestors (cgroup v1
// memory.limit_in_bytes, or v2 memory.max), found through /proc/self/cgroup
// and /proc/self/mountinfo wherever the hierarchy is mounted; or, where no
// cgroup limits it, the machine's available memory (/proc/meminfo's
// MemAvailable; MemFree + Cached on kernels without it). Limit.Source names
// which, for reports. Swap limits (v1 memory.memsw.limit_in_bytes, v2
// memory.swap.max) are not read: the limit is on resident memory, which swap
// can only extend.
//
// The error wraps ErrNoLimit when nothing can be found, or names the file
// that could not be read or parsed.
func ProcessLimit() (Limit, error) {
	return readProcessLimit(os.DirFS("/"))
}
