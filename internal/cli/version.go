package cli

import (
	"fmt"
	"io"
	goruntime "runtime"
	"runtime/debug"
)

// version is headroom's version; release builds set it with
// -ldflags "-X github.com/headroom-ml/headroom/internal/cli.version=v1.2.3".
var version = "0.1.0-dev"

// runVersion prints the version, the commit it was built from (when the
// build recorded it), the Go version and the platform.
func runVersion(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("version takes no arguments, got %q", args[0])
	}
	line := "headroom " + version
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			line += " (commit " + rev
			if dirty {
				line += ", modified"
			}
			line += ")"
		}
	}
	fmt.Fprintf(stdout, "%s %s %s/%s\n", line, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
	return nil
}

// defaultThreads is the default of --threads: the CPUs Go may use.
func defaultThreads() int { return goruntime.NumCPU() }

// setThreads makes Go run n threads at once: the backend's kernels run on
// n threads of their own (train.Config.Threads), and the Go scheduler gets
// as many.
func setThreads(n int) { goruntime.GOMAXPROCS(n) }
