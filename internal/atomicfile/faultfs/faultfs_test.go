package faultfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/headroom-ml/headroom/internal/atomicfile/faultfs"
)

// Each Op fails only its own step; a failed Write writes half of its bytes
// first, as a full disk would.
func TestFaults(t *testing.T) {
	for _, at := range append([]faultfs.Op{""}, faultfs.Ops...) {
		t.Run("at="+string(at), func(t *testing.T) {
			dir := t.TempDir()
			fsys := faultfs.FS{At: at}
			failed := map[faultfs.Op]error{}
			f, err := fsys.CreateExcl(filepath.Join(dir, "a"), 0o666)
			failed[faultfs.Create] = err
			if err == nil {
				_, failed[faultfs.Write] = f.Write([]byte("abcd"))
				failed[faultfs.Sync] = f.Sync()
				failed[faultfs.Close] = f.Close()
				failed[faultfs.Rename] = fsys.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b"))
				failed[faultfs.SyncDir] = fsys.SyncDir(dir)
			}
			for op, err := range failed {
				if want := op == at; errors.Is(err, faultfs.ErrInjected) != want || (!want && err != nil) {
					t.Errorf("%s: got %v, want a fault: %v", op, err, want)
				}
			}
			if at == faultfs.Write {
				if b, _ := os.ReadFile(filepath.Join(dir, "b")); string(b) != "ab" {
					t.Errorf("after a failed write: got %q, want \"ab\"", b)
				}
			}
		})
	}
}
