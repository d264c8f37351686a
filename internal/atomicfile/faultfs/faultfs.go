package faultfs

import (
	"errors"
	"io/fs"
	"os"

	"github.com/headroom-ml/headroom/internal/atomicfile"
)

// Op names a step of the atomic-write protocol.
type Op string

// The steps of the protocol.
const (
	Create  Op = "create"
	Write   Op = "write"
	Sync    Op = "sync"
	Close   Op = "close"
	Rename  Op = "rename"
	SyncDir Op = "syncdir"
)

// Ops lists every Op in the order the protocol takes them.
var Ops = []Op{Create, Write, Sync, Close, Rename, SyncDir}

// ErrInjected is the error an FS injects when its Err is nil.
var ErrInjected = errors.New("faultfs: injected fault")

// FS passes every call to Base (atomicfile.OS if nil) except step At, which
// fails with Err (ErrInjected if nil). The zero FS injects nothing.
type FS struct {
	Base atomicfile.FS
	At   Op
	Err  error
}

func (f FS) base() atomicfile.FS {
	if f.Base == nil {
		return atomicfile.OS
	}
	return f.Base
}

func (f FS) fail(op Op) error {
	if op != f.At {
		return nil
	}
	if f.Err != nil {
		return f.Err
	}
	return ErrInjected
}

// CreateExcl creates name on Base unless At is Create.
func (f FS) CreateExcl(name string, perm fs.FileMode) (atomicfile.File, error) {
	if err := f.fail(Create); err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	file, err := f.base().CreateExcl(name, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{file, f}, nil
}

// Rename renames on Base unless At is Rename.
func (f FS) Rename(oldpath, newpath string) error {
	if err := f.fail(Rename); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return f.base().Rename(oldpath, newpath)
}

// Remove removes name on Base.
func (f FS) Remove(name string) error { return f.base().Remove(name) }

// Stat describes name on Base.
func (f FS) Stat(name string) (fs.FileInfo, error) { return f.base().Stat(name) }

// SyncDir fsyncs dir on Base unless At is SyncDir.
func (f FS) SyncDir(dir string) error {
	if err := f.fail(SyncDir); err != nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: err}
	}
	return f.base().SyncDir(dir)
}

type faultFile struct {
	atomicfile.File
	fs FS
}

// Write writes half of p before failing, as a full disk would.
func (f faultFile) Write(p []byte) (int, error) {
	if err := f.fs.fail(Write); err != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, err
	}
	return f.File.Write(p)
}

// WriteAt writes half of p before failing, as a full disk would.
func (f faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.fail(Write); err != nil {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return f.File.WriteAt(p, off)
}

func (f faultFile) Sync() error {
	if err := f.fs.fail(Sync); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f faultFile) Close() error {
	err := f.File.Close()
	if ferr := f.fs.fail(Close); ferr != nil {
		return ferr
	}
	return err
}
