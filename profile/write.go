package profile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/headroom-ml/headroom/compile"
)

// The files WriteAll writes.
const (
	PprofFile = "profile.pb.gz"
	TraceFile = "trace.json"
	HTMLFile  = "report.html"
)

// WriteAll writes PprofFile, TraceFile and HTMLFile for the plan (and the
// run h, which may be nil) into dir, creating it if needed. Each file is
// written to a temporary name and renamed, so a failed export leaves no
// half-written file.
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
		var buf bytes.Buffer
		if err := f.write(&buf); err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(dir, f.name), buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("profile: writing %s: %w", path, err)
	}
	return nil
}
