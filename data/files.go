package data

import (
	"fmt"
	"path/filepath"
	"sort"
)

// Files returns the names of the files matching a glob pattern, sorted
// (tf.data's list_files with shuffle=False), for Interleave.
func Files(pattern string) (Dataset[string], error) {
	names, err := filepath.Glob(pattern)
	if err != nil {
		return Dataset[string]{}, fmt.Errorf("data: Files(%q): %w", pattern, err)
	}
	sort.Strings(names)
	return FromSlice(names), nil
}

func baseName(path string) string { return filepath.Base(path) }
