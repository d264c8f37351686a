package profile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/internal/atomicfile"
)

// The files WriteAll writes.
const (
	PprofFile = "profile.pb.gz"
	TraceFile = "trace.json"
	HTMLFile  = "report.html"
)

// WriteAll writes PprofFile, TraceFile and HTMLFile for the plan (and the
// run h, which may be nil) into dir, creating it if needed. Each file is
// written atomically (package atomicfile), so a failed export leaves no
// half-written file and an existing file is replaced only by a complete
// one.
func WriteAll(dir string, p *compile.Plan, h *Run, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	files := []struct {
		name  string
		write func(io.Writer) error
	}{
		{PprofFile, func(w io.Writer) error { return WritePprof(w, p, name) }},
		{TraceFile, func(w io.Writer) error { return WriteTrace(w, p, name) }},
		{HTMLFile, func(w io.Writer) error { return WriteHTML(w, p, h, name) }},
	}
	for _, f := range files {
		var werr error // the writer's own error says what it was writing
		err := atomicfile.WriteFile(atomicfile.OS, filepath.Join(dir, f.name), 0o666, func(w io.Writer) error {
			werr = f.write(w)
			return werr
		})
		if werr != nil {
			return werr
		}
		if err != nil {
			return fmt.Errorf("profile: %w", err)
		}
	}
	return nil
}
