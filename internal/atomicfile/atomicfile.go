package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// TempInfix separates a temporary file's target name from its random
// suffix: "." + base + TempInfix + random.
const TempInfix = ".tmp-"

// writeFileBuffer is the size of WriteFile's buffer.
const writeFileBuffer = 1 << 20

// ErrDone is returned by a Pending's Write, WriteAt and Commit after it was
// committed or aborted.
var ErrDone = errors.New("atomicfile: already committed or aborted")

// ParseTemp reports whether name (a base name, without directory) is a
// temporary file of this package, and for which target base name. A
// directory's writer can remove the ones a killed process left.
func ParseTemp(name string) (target string, ok bool) {
	i := strings.LastIndex(name, TempInfix)
	if !strings.HasPrefix(name, ".") || i < 2 {
		return "", false
	}
	suffix := name[i+len(TempInfix):]
	if suffix == "" {
		return "", false
	}
	for _, c := range suffix {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return "", false
		}
	}
	return name[1:i], true
}

// Pending is a file being written that is not yet at its target: a
// temporary file beside it. Write and WriteAt go straight to the file (wrap
// a Pending in a bufio.Writer for small writes); Commit moves it to the
// target and Abort removes it. After the first failed write, Commit aborts
// and returns that error. A Pending is not safe for concurrent use;
// different Pendings are.
type Pending struct {
	fsys      FS
	path, dir string
	tmp       string
	f         File
	err       error // the first write error
	done      bool  // committed or aborted
}

// Create starts a Pending for path on fsys: a new temporary file in path's
// directory with mode perm before the umask (0o666 gives what os.Create
// gives). path itself is not touched until Commit. It fails if path is a
// directory.
func Create(fsys FS, path string, perm fs.FileMode) (*Pending, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if base == "" {
		return nil, &fs.PathError{Op: "create", Path: path, Err: syscall.EISDIR}
	}
	if fi, err := fsys.Stat(path); err == nil && fi.IsDir() {
		return nil, &fs.PathError{Op: "create", Path: path, Err: syscall.EISDIR}
	}
	var f File
	var tmp string
	var err error
	for range 100 {
		tmp = filepath.Join(dir, "."+base+TempInfix+strconv.FormatUint(rand.Uint64(), 36))
		f, err = fsys.CreateExcl(tmp, perm)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create a temporary file for %s: %w", path, err)
	}
	return &Pending{fsys: fsys, path: path, dir: dir, tmp: tmp, f: f}, nil
}

// Path returns the target.
func (p *Pending) Path() string { return p.path }

// Write writes b at the end of the file.
func (p *Pending) Write(b []byte) (int, error) {
	if p.done {
		return 0, fmt.Errorf("write %s: %w", p.path, ErrDone)
	}
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.f.Write(b)
	if err != nil {
		p.err = fmt.Errorf("write %s: %w", p.tmp, err)
		return n, p.err
	}
	return n, nil
}

// WriteAt writes b at offset off, as io.WriterAt (to fill in a header
// once the rest is known).
func (p *Pending) WriteAt(b []byte, off int64) (int, error) {
	if p.done {
		return 0, fmt.Errorf("write %s: %w", p.path, ErrDone)
	}
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.f.WriteAt(b, off)
	if err != nil {
		p.err = fmt.Errorf("write %s at offset %d: %w", p.tmp, off, err)
		return n, p.err
	}
	return n, nil
}

// Commit completes the protocol: fsync, close, rename over the target,
// fsync the directory. On an error before the rename the temporary file is
// removed and the target is as it was; if only the directory fsync fails,
// the target holds the new file and the error is returned (see the package
// doc).
func (p *Pending) Commit() error {
	if p.done {
		return fmt.Errorf("commit %s: %w", p.path, ErrDone)
	}
	if p.err != nil {
		p.Abort()
		return p.err
	}
	p.done = true
	if err := p.f.Sync(); err != nil {
		p.f.Close()
		p.fsys.Remove(p.tmp)
		return fmt.Errorf("fsync %s: %w", p.tmp, err)
	}
	if err := p.f.Close(); err != nil {
		p.fsys.Remove(p.tmp)
		return fmt.Errorf("close %s: %w", p.tmp, err)
	}
	if err := p.fsys.Rename(p.tmp, p.path); err != nil {
		p.fsys.Remove(p.tmp)
		return fmt.Errorf("rename %s to %s: %w", p.tmp, p.path, err)
	}
	if err := p.fsys.SyncDir(p.dir); err != nil {
		return fmt.Errorf("fsync directory %s after renaming %s: %w", p.dir, p.path, err)
	}
	return nil
}

// Abort closes and removes the temporary file, leaving the target as it
// was. It does nothing after Commit or Abort, so `defer p.Abort()` is
// safe; it returns an error only when the temporary file cannot be
// removed.
func (p *Pending) Abort() error {
	if p.done {
		return nil
	}
	p.done = true
	p.f.Close()
	if err := p.fsys.Remove(p.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p.tmp, err)
	}
	return nil
}

// WriteFile writes path on fsys with the protocol: write writes the whole
// content through a 1 MiB buffer to a Pending, which is committed if write
// returns nil and aborted otherwise. perm is as for Create. On an error
// path is as it was, except as the package doc says for a failed directory
// fsync.
func WriteFile(fsys FS, path string, perm fs.FileMode, write func(io.Writer) error) error {
	p, err := Create(fsys, path, perm)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(p, writeFileBuffer)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		p.Abort()
		if p.err != nil {
			return p.err // the file's own error, naming it
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return p.Commit()
}
