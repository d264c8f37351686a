package checkpoint

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/internal/atomicfile/faultfs"
	"github.com/headroom-ml/headroom/tensor"
)

// withFS makes Save use f for the rest of the test.
func withFS(t *testing.T, f atomicfile.FS) {
	old := fsys
	fsys = f
	t.Cleanup(func() { fsys = old })
}

// oldAndNew writes a first checkpoint at dir/c.safetensors and returns its
// path, its bytes, and the entries of a different second checkpoint.
func oldAndNew(t *testing.T, dir string) (path string, old []byte, next []Entry) {
	t.Helper()
	path = filepath.Join(dir, "c.safetensors")
	if err := Save(path, []Entry{{"w", filled(tensor.Float32, tensor.Shape{300}, 1)}}, map[string]string{"step": "1"}); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, old, []Entry{{"w", filled(tensor.Float32, tensor.Shape{300000}, 2)}}
}

// TestSaveFaults fails each step of the atomic-write protocol in turn: Save
// returns the error, the previous file is intact (or, when only the final
// directory fsync fails, the new file is complete), and no temporary file
// is left.
func TestSaveFaults(t *testing.T) {
	for _, op := range faultfs.Ops {
		wantNew := op == faultfs.SyncDir // the rename happened before the fault
		t.Run(string(op), func(t *testing.T) {
			dir := t.TempDir()
			path, old, next := oldAndNew(t, dir)
			withFS(t, faultfs.FS{At: op})
			err := Save(path, next, nil)
			if !errors.Is(err, faultfs.ErrInjected) || !strings.Contains(err.Error(), path) {
				t.Fatalf("got error %v, want the injected fault, naming %s", err, path)
			}
			got, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if wantNew {
				f, lerr := Load(path)
				if lerr != nil {
					t.Fatalf("after a failed directory fsync: Load: %v, want the new complete file", lerr)
				}
				if w, _ := f.Get("w"); w.Len() != 300000 {
					t.Errorf("got %v, want the new float32[300000]", w)
				}
			} else if !bytes.Equal(got, old) {
				t.Errorf("previous file changed: got %d bytes, want its %d bytes", len(got), len(old))
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{"c.safetensors"}) {
				t.Errorf("got files %q, want only c.safetensors (no temporary file)", names)
			}
		})
	}
}

func TestSaveFails(t *testing.T) {
	t.Run("directory not writable", func(t *testing.T) {
		dir := t.TempDir()
		path, old, next := oldAndNew(t, dir)
		if os.Geteuid() == 0 {
			// Permission bits do not bind root; make the create fail as the
			// kernel would for another user.
			withFS(t, faultfs.FS{At: faultfs.Create, Err: syscall.EACCES})
		} else {
			if err := os.Chmod(dir, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
		}
		err := Save(path, next, nil)
		if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), path) {
			t.Fatalf("got %v, want a permission error naming %s", err, path)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
			t.Errorf("previous file changed: got %d bytes, want its %d bytes", len(got), len(old))
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"c.safetensors"}) {
			t.Errorf("got files %q, want only c.safetensors", names)
		}
	})
	t.Run("path is a directory", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "c.safetensors")
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		inside := filepath.Join(path, "keep.txt")
		if err := os.WriteFile(inside, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := Save(path, []Entry{{"w", filled(tensor.Float32, tensor.Shape{4}, 0)}}, nil)
		if err == nil || !strings.Contains(err.Error(), "directory") || !strings.Contains(err.Error(), path) {
			t.Fatalf("got %v, want an error saying %s is a directory", err, path)
		}
		if got, _ := os.ReadFile(inside); string(got) != "keep" {
			t.Errorf("directory content changed: got %q, want \"keep\"", got)
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"c.safetensors"}) {
			t.Errorf("got files %q, want only the directory c.safetensors", names)
		}
	})
	t.Run("directory missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "no", "c.safetensors")
		err := Save(path, nil, nil)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
			t.Fatalf("got %v, want an error wrapping fs.ErrNotExist naming %s", err, path)
		}
	})
	t.Run("parent is a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := Save(filepath.Join(file, "c.safetensors"), nil, nil)
		if !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("got %v, want ENOTDIR", err)
		}
		if got, _ := os.ReadFile(file); string(got) != "x" {
			t.Errorf("file changed: got %q, want \"x\"", got)
		}
	})
}

func TestSaveReplaces(t *testing.T) {
	dir := t.TempDir()
	path, _, next := oldAndNew(t, dir)
	if err := Save(path, next, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := f.Get("w"); w.Len() != 300000 {
		t.Errorf("got %v, want the new float32[300000]", w)
	}
	if _, ok := f.Meta["step"]; ok {
		t.Errorf("got the old metadata %q, want the new (none)", f.Meta)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode().Perm(), 0o666&^currentUmask(t); got != want {
		t.Errorf("got mode %v, want %v (0666 less the umask, like os.Create)", got, want)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"c.safetensors"}) {
		t.Errorf("got files %q, want only c.safetensors", names)
	}
}

// currentUmask reads the process umask by creating a file with mode 0666.
func currentUmask(t *testing.T) os.FileMode {
	p := filepath.Join(t.TempDir(), "umask")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return 0o666 &^ fi.Mode().Perm()
}
