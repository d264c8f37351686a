package atomicfile_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/internal/atomicfile/faultfs"
)

// names lists dir's entries, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	slices.Sort(out)
	return out
}

// umask reads the process umask by creating a file with mode 0666.
func umask(t *testing.T) fs.FileMode {
	t.Helper()
	p := filepath.Join(t.TempDir(), "umask")
	if err := os.WriteFile(p, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return 0o666 &^ fi.Mode().Perm()
}

// content is a new file's bytes: larger than WriteFile's buffer, so a write
// fault hits a write that reaches the file, not the buffer's final flush.
var content = bytes.Repeat([]byte("0123456789abcdef"), 200_000) // 3.2 MB

// The two ways to write a file, over the same protocol.
var writers = []struct {
	name  string
	write func(fsys atomicfile.FS, path string, b []byte) error
}{
	{"WriteFile", func(fsys atomicfile.FS, path string, b []byte) error {
		return atomicfile.WriteFile(fsys, path, 0o666, func(w io.Writer) error {
			for len(b) > 0 { // in pieces, as an encoder writes
				n := min(len(b), 70_000)
				if _, err := w.Write(b[:n]); err != nil {
					return err
				}
				b = b[n:]
			}
			return nil
		})
	}},
	{"Create+Commit", func(fsys atomicfile.FS, path string, b []byte) error {
		p, err := atomicfile.Create(fsys, path, 0o666)
		if err != nil {
			return err
		}
		if _, err := p.Write(b); err != nil {
			p.Abort()
			return err
		}
		return p.Commit()
	}},
}

// TestFaults injects a fault at each step of the protocol, over an existing
// target and over none: the error wraps the fault and names a file, no
// temporary file is left, and the target is byte for byte as it was, except
// after a failed directory fsync, when the rename has happened and the
// target holds exactly the new bytes.
func TestFaults(t *testing.T) {
	old := []byte("the previous content\n")
	for _, w := range writers {
		for _, op := range faultfs.Ops {
			for _, existed := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/existed=%v", w.name, op, existed), func(t *testing.T) {
					dir := t.TempDir()
					path := filepath.Join(dir, "target.bin")
					if existed {
						if err := os.WriteFile(path, old, 0o644); err != nil {
							t.Fatal(err)
						}
					}
					err := w.write(faultfs.FS{At: op}, path, content)
					if !errors.Is(err, faultfs.ErrInjected) || !strings.Contains(err.Error(), dir) {
						t.Fatalf("got error %v, want the injected fault, naming a file in %s", err, dir)
					}
					got, rerr := os.ReadFile(path)
					switch {
					case op == faultfs.SyncDir:
						if !bytes.Equal(got, content) {
							t.Errorf("after a failed directory fsync: got %d bytes (%v), want the %d new bytes", len(got), rerr, len(content))
						}
					case existed:
						if !bytes.Equal(got, old) {
							t.Errorf("target changed: got %q (%v), want %q", got, rerr, old)
						}
					default:
						if !errors.Is(rerr, fs.ErrNotExist) {
							t.Errorf("target: got %d bytes (%v), want no file", len(got), rerr)
						}
					}
					want := []string{"target.bin"}
					if !existed && op != faultfs.SyncDir {
						want = nil
					}
					if got := names(t, dir); !slices.Equal(got, want) {
						t.Errorf("got files %q, want %q (no temporary file)", got, want)
					}
				})
			}
		}
	}
}

// TestSuccess writes over an existing file and a new one: the target holds
// exactly the new bytes, with the mode asked less the umask, and nothing
// else is left.
func TestSuccess(t *testing.T) {
	for _, w := range writers {
		for _, existed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/existed=%v", w.name, existed), func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "target.bin")
				if existed {
					if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 5_000_000), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.write(atomicfile.OS, path, content); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(path)
				if err != nil || !bytes.Equal(got, content) {
					t.Errorf("got %d bytes (%v), want the %d new bytes", len(got), err, len(content))
				}
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := fi.Mode().Perm(), 0o666&^umask(t); got != want {
					t.Errorf("got mode %v, want %v (0666 less the umask, as os.Create)", got, want)
				}
				if got := names(t, dir); !slices.Equal(got, []string{"target.bin"}) {
					t.Errorf("got files %q, want only target.bin", got)
				}
			})
		}
	}
}

func TestPerm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	if err := atomicfile.WriteFile(atomicfile.OS, path, 0o600, func(w io.Writer) error { return nil }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode().Perm(), 0o600&^umask(t); got != want || fi.Size() != 0 {
		t.Errorf("got mode %v size %d, want %v size 0", got, fi.Size(), want)
	}
}

// TestDirectoryRefused: a target that is a directory is refused before
// anything is created, and the directory's content is untouched.
func TestDirectoryRefused(t *testing.T) {
	for _, w := range writers {
		for _, form := range []string{"dir", "dir/"} {
			t.Run(w.name+"/"+form, func(t *testing.T) {
				root := t.TempDir()
				dir := filepath.Join(root, "dir")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				keep := filepath.Join(dir, "keep")
				if err := os.WriteFile(keep, []byte("keep"), 0o644); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(root, form)
				if strings.HasSuffix(form, "/") {
					path += "/"
				}
				err := w.write(atomicfile.OS, path, content)
				if !errors.Is(err, syscall.EISDIR) || !strings.Contains(err.Error(), path) {
					t.Fatalf("got %v, want EISDIR naming %s", err, path)
				}
				if got, _ := os.ReadFile(keep); string(got) != "keep" {
					t.Errorf("the directory's file: got %q, want \"keep\"", got)
				}
				if got := names(t, root); !slices.Equal(got, []string{"dir"}) {
					t.Errorf("got files %q, want only dir", got)
				}
			})
		}
	}
}

// TestPending follows a Pending: its temporary file is hidden in the
// target's directory and named for it, WriteAt fills in a header, Abort
// leaves the target as it was, and nothing works after Commit or Abort.
func TestPending(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.npy")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := atomicfile.Create(atomicfile.OS, path, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if p.Path() != path {
		t.Errorf("Path: got %q, want %q", p.Path(), path)
	}
	ns := names(t, dir)
	if len(ns) != 2 || ns[1] != "out.npy" {
		t.Fatalf("while pending: got files %q, want a temporary file and out.npy", ns)
	}
	if target, ok := atomicfile.ParseTemp(ns[0]); !ok || target != "out.npy" || !strings.HasPrefix(ns[0], ".") {
		t.Errorf("temporary file %q: got ParseTemp %q, %v, want a hidden file for out.npy", ns[0], target, ok)
	}
	if _, err := p.Write([]byte("HEADER body")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteAt([]byte("header"), 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("target while pending: got %q, want \"old\"", got)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "header body" {
		t.Errorf("after Commit: got %q, want \"header body\"", got)
	}
	if err := p.Abort(); err != nil {
		t.Errorf("Abort after Commit: got %v, want nil", err)
	}
	_, werr := p.Write([]byte("x"))
	if cerr := p.Commit(); !errors.Is(werr, atomicfile.ErrDone) || !errors.Is(cerr, atomicfile.ErrDone) {
		t.Errorf("Write, Commit after Commit: got %v, %v, want ErrDone", werr, cerr)
	}

	q, err := atomicfile.Create(atomicfile.OS, path, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Write([]byte("discarded")); err != nil {
		t.Fatal(err)
	}
	if err := q.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := q.Commit(); !errors.Is(err, atomicfile.ErrDone) {
		t.Errorf("Commit after Abort: got %v, want ErrDone", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "header body" {
		t.Errorf("after Abort: got %q, want \"header body\"", got)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"out.npy"}) {
		t.Errorf("after Abort: got files %q, want only out.npy", got)
	}
}

// TestWriteErrorSticks: after a failed write, Commit refuses (the file would
// be incomplete), removes the temporary file and returns the write's error.
func TestWriteErrorSticks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv")
	p, err := atomicfile.Create(faultfs.FS{At: faultfs.Write}, path, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	_, werr := p.Write([]byte("a,b\n"))
	_, again := p.Write([]byte("c,d\n"))
	cerr := p.Commit()
	for name, err := range map[string]error{"Write": werr, "second Write": again, "Commit": cerr} {
		if !errors.Is(err, faultfs.ErrInjected) {
			t.Errorf("%s: got %v, want the injected fault", name, err)
		}
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("got files %q, want none", got)
	}
}

// TestCallbackError: an error from WriteFile's func aborts the write and is
// returned, naming the target.
func TestCallbackError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := errors.New("cannot encode")
	err := atomicfile.WriteFile(atomicfile.OS, path, 0o666, func(w io.Writer) error {
		w.Write([]byte("half a report"))
		return bad
	})
	if !errors.Is(err, bad) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want the func's error naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("target: got %q, want \"old\"", got)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"report.html"}) {
		t.Errorf("got files %q, want only report.html", got)
	}
}

func TestMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "file")
	err := atomicfile.WriteFile(atomicfile.OS, path, 0o666, func(io.Writer) error { return nil })
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want fs.ErrNotExist naming %s", err, path)
	}
}

func TestParseTemp(t *testing.T) {
	for _, c := range []struct {
		name, target string
		ok           bool
	}{
		{".ckpt-0000000001.safetensors.tmp-3kq9z", "ckpt-0000000001.safetensors", true},
		{".a.tmp-0", "a", true},
		{".x.tmp-1.tmp-2", "x.tmp-1", true},
		{"a.tmp-0", "", false},    // not hidden
		{".a.tmp-", "", false},    // no random suffix
		{".tmp-12", "", false},    // no target
		{".a.tmp-AB", "", false},  // not base 36 lower case
		{".a.tmp-1/x", "", false}, // not a base name
		{".profile.pb.gz", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			target, ok := atomicfile.ParseTemp(c.name)
			if target != c.target || ok != c.ok {
				t.Errorf("got %q, %v, want %q, %v", target, ok, c.target, c.ok)
			}
		})
	}
}

// TestConcurrent writes many files at once, and the same file from many
// goroutines (run with -race): every file ends complete, holding one
// writer's bytes, and no temporary file is left.
func TestConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	body := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 100_000+i) }
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs[i] = writers[i%2].write(atomicfile.OS, filepath.Join(dir, fmt.Sprintf("f%02d", i)), body(i))
		}()
		go func() {
			defer wg.Done()
			errs[n+i] = writers[i%2].write(atomicfile.OS, filepath.Join(dir, "shared"), body(i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	for i := range n {
		if got, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%02d", i))); !bytes.Equal(got, body(i)) {
			t.Errorf("f%02d: got %d bytes, want writer %d's %d", i, len(got), i, len(body(i)))
		}
	}
	shared, _ := os.ReadFile(filepath.Join(dir, "shared"))
	if len(shared) < 100_000 || !bytes.Equal(shared, body(len(shared)-100_000)) {
		t.Errorf("shared: got %d bytes, want one writer's complete file", len(shared))
	}
	if got := names(t, dir); len(got) != n+1 {
		t.Errorf("got %d files %q, want %d (no temporary file)", len(got), got, n+1)
	}
}
