package mem

import (
	"runtime"
	"strconv"
	"strings"
)

// callerSite returns file:line of the first caller outside headroom's
// memory machinery (mem, runtime, train), for ledger reports: who asked for
// the memory.
func callerSite() string {
	var pcs [16]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !machinery(f.Function) {
			return trimSite(f.File) + ":" + strconv.Itoa(f.Line)
		}
		if !more {
			return ""
		}
	}
}

const module = "github.com/headroom-ml/headroom/"

func machinery(fn string) bool {
	for _, p := range []string{"mem.", "runtime.", "train."} {
		if strings.HasPrefix(fn, module+p) {
			return true
		}
	}
	return false
}

// trimSite shortens a file path to the part after the module's directory
// (or after the last "/src/"), as graph does for node sites.
func trimSite(file string) string {
	if i := strings.LastIndex(file, "/headroom/"); i >= 0 {
		return file[i+len("/headroom/"):]
	}
	if i := strings.LastIndex(file, "/"); i >= 0 {
		if j := strings.LastIndex(file[:i], "/"); j >= 0 {
			return file[j+1:]
		}
	}
	return file
}
