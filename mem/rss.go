package mem

import (
	"bytes"
	"os"
	"strconv"
)

// Resident returns the process's resident memory now and its high-water
// mark (VmRSS and VmHWM of /proc/self/status, in bytes); 0, 0 where the
// file is not there (not Linux).
func Resident() (rss, peak int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(k) {
		case "VmRSS":
			dst = &rss
		case "VmHWM":
			dst = &peak
		default:
			continue
		}
		v = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))
		if kb, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			*dst = kb << 10
		}
	}
	return rss, peak
}
