package atomicfile

import (
	"io"
	"io/fs"
	"os"
)

// FS is the file system the protocol runs on. OS is the operating system's;
// tests substitute one that injects faults.
type FS interface {
	// CreateExcl creates name for writing with mode perm (before the
	// umask); it fails with an error wrapping fs.ErrExist if name exists.
	CreateExcl(name string, perm fs.FileMode) (File, error)
	// Rename renames oldpath to newpath, replacing newpath atomically.
	Rename(oldpath, newpath string) error
	// Remove removes the file name.
	Remove(name string) error
	// Stat describes the file name (following symbolic links).
	Stat(name string) (fs.FileInfo, error)
	// SyncDir fsyncs the directory dir, making the renames in it durable.
	SyncDir(dir string) error
}

// File is a file that FS.CreateExcl opened for writing.
type File interface {
	io.Writer
	io.WriterAt
	Sync() error
	Close() error
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) CreateExcl(name string, perm fs.FileMode) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

func (osFS) Rename(oldpath, newpath string) error  { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error              { return os.Remove(name) }
func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
