package hdf5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// signature opens every HDF5 superblock.
var signature = []byte("\x89HDF\r\n\x1a\n")

// IsHDF5 reports whether data starts as an HDF5 file does (a superblock
// at byte 0; files with a user block are found by Open, not by this
// sniff).
func IsHDF5(data []byte) bool { return bytes.HasPrefix(data, signature) }

// maxFileBytes bounds what Open reads into memory.
const maxFileBytes = 1 << 40

// FormatError is a malformed or unsupported HDF5 structure: it names the
// file and the byte offset of the structure.
type FormatError struct {
	File   string
	Offset int64
	Msg    string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("hdf5: %s: at byte %d: %s", e.File, e.Offset, e.Msg)
}

// ErrUnsupported is matched (errors.Is) by errors about a valid HDF5
// feature that this package does not read.
var ErrUnsupported = errors.New("not supported")

type unsupported struct{ *FormatError }

func (u unsupported) Is(target error) bool { return target == ErrUnsupported }
func (u unsupported) Unwrap() error        { return u.FormatError }

// File is an HDF5 file held in memory.
type File struct {
	name    string
	data    []byte
	base    int64 // the superblock's base address
	offSize int   // bytes of an address
	lenSize int   // bytes of a length
	version int   // superblock version
	root    int64 // the root group's object header address
	headers map[int64]*header
	// budget bounds the bytes decompressed or materialized while reading,
	// so that a small file cannot ask for unbounded memory.
	budget int64
}

// Open reads the file at path.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("hdf5: %s: %w", path, err)
	}
	return Parse(data, path)
}

// Parse reads an HDF5 file from data; name is what errors call it.
func Parse(data []byte, name string) (*File, error) {
	f := &File{name: name, data: data, headers: map[int64]*header{}}
	f.budget = 16*int64(len(data)) + 64<<20
	at := int64(-1)
	for off := int64(0); off+8 <= int64(len(data)); {
		if bytes.Equal(data[off:off+8], signature) {
			at = off
			break
		}
		if off == 0 {
			off = 512
		} else {
			off *= 2
		}
	}
	if at < 0 {
		return nil, f.errf(0, "no HDF5 signature at byte 0 or at a power of two from 512: not an HDF5 file")
	}
	if err := f.superblock(at); err != nil {
		return nil, err
	}
	return f, nil
}

// Name returns the name errors give the file.
func (f *File) Name() string { return f.name }

func (f *File) errf(off int64, format string, args ...any) error {
	return &FormatError{File: f.name, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (f *File) unsupportedf(off int64, format string, args ...any) error {
	return unsupported{&FormatError{File: f.name, Offset: off, Msg: fmt.Sprintf(format, args...)}}
}

// charge takes n bytes from the reading budget.
func (f *File) charge(off, n int64) error {
	if n < 0 || n > f.budget {
		return f.errf(off, "the data asks for %d bytes, more than a file of %d bytes can hold", n, len(f.data))
	}
	f.budget -= n
	return nil
}

// bytesAt returns n bytes at file offset off (an absolute offset).
func (f *File) bytesAt(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > int64(len(f.data)) || n > int64(len(f.data))-off {
		return nil, f.errf(off, "%d bytes needed past the end of the file (%d bytes): truncated, or a size or address that lies", n, len(f.data))
	}
	return f.data[off : off+n], nil
}

// addr turns a file address into an absolute offset.
func (f *File) addr(a uint64) int64 {
	if a > uint64(len(f.data)) { // keeps arithmetic in range; bytesAt refuses it
		return int64(len(f.data)) + 1
	}
	return f.base + int64(a)
}

// undefined reports whether a is the undefined address (all bits set).
func (f *File) undefined(a uint64) bool {
	return a == 1<<(8*uint(f.offSize))-1 || (f.offSize == 8 && a == ^uint64(0))
}

// cursor reads little-endian fields from a structure of the file, keeping
// the first error.
type cursor struct {
	f   *File
	buf []byte
	at  int   // position in buf
	off int64 // file offset of buf[0]
	err error
}

func (f *File) cursorAt(off, n int64) *cursor {
	b, err := f.bytesAt(off, n)
	return &cursor{f: f, buf: b, off: off, err: err}
}

func (f *File) cursorOver(b []byte, off int64) *cursor { return &cursor{f: f, buf: b, off: off} }

func (c *cursor) pos() int64 { return c.off + int64(c.at) }

func (c *cursor) fail(format string, args ...any) {
	if c.err == nil {
		c.err = c.f.errf(c.pos(), format, args...)
	}
}

func (c *cursor) take(n int) []byte {
	if c.err == nil && (n < 0 || n > len(c.buf)-c.at) {
		c.err = c.f.errf(c.pos(), "%d bytes needed past the end of the structure (%d left): truncated, or a size that lies", n, len(c.buf)-c.at)
	}
	if c.err != nil { // zeros for the fixed-size fields read after an error
		return make([]byte, min(max(n, 0), 8))
	}
	b := c.buf[c.at : c.at+n]
	c.at += n
	return b
}

func (c *cursor) skip(n int) { c.take(n) }
func (c *cursor) u8() uint8  { return c.take(1)[0] }
func (c *cursor) u16() uint16 {
	return binary.LittleEndian.Uint16(c.take(2))
}
func (c *cursor) u32() uint32 { return binary.LittleEndian.Uint32(c.take(4)) }
func (c *cursor) u64() uint64 { return binary.LittleEndian.Uint64(c.take(8)) }

// uint reads an n-byte little-endian unsigned integer (n <= 8).
func (c *cursor) uint(n int) uint64 {
	if n > 8 {
		c.fail("a %d-byte integer", n)
		return 0
	}
	var v uint64
	for i, b := range c.take(n) {
		v |= uint64(b) << (8 * uint(i))
	}
	return v
}

func (c *cursor) address() uint64 { return c.uint(c.f.offSize) }
func (c *cursor) length() uint64  { return c.uint(c.f.lenSize) }

// signature checks a 4-byte structure signature.
func (c *cursor) signature(want string) {
	if got := c.take(4); c.err == nil && string(got) != want {
		c.err = c.f.errf(c.pos()-4, "want signature %q, got %q", want, got)
	}
}

func (f *File) superblock(at int64) error {
	c := f.cursorAt(at, 12)
	c.skip(8)
	f.version = int(c.u8())
	if c.err != nil {
		return c.err
	}
	f.base = at
	switch f.version {
	case 0, 1:
		c = f.cursorAt(at, 24)
		c.skip(13) // signature, versions, reserved
		f.offSize, f.lenSize = int(c.u8()), int(c.u8())
		if c.err != nil {
			return c.err
		}
		if err := f.checkSizes(at); err != nil {
			return err
		}
		n := int64(24 + 4*f.offSize + f.offSize + f.offSize + 24)
		if f.version == 1 {
			n += 4
		}
		c = f.cursorAt(at, n)
		c.skip(24)
		if f.version == 1 {
			c.skip(4)
		}
		base := c.address()
		c.address() // free space
		c.address() // end of file
		c.address() // driver info
		c.address() // root entry: link name offset
		root := c.address()
		if c.err != nil {
			return c.err
		}
		f.base += int64(min(base, uint64(len(f.data)))) - at
		f.root = f.addr(root)
	case 2, 3:
		c = f.cursorAt(at, 12)
		c.skip(9)
		f.offSize, f.lenSize = int(c.u8()), int(c.u8())
		if c.err != nil {
			return c.err
		}
		if err := f.checkSizes(at); err != nil {
			return err
		}
		n := int64(12 + 4*f.offSize + 4)
		c = f.cursorAt(at, n)
		c.skip(12)
		base := c.address()
		c.address() // superblock extension
		c.address() // end of file
		root := c.address()
		if c.err != nil {
			return c.err
		}
		if err := f.checksum(at, n); err != nil {
			return err
		}
		f.base += int64(min(base, uint64(len(f.data)))) - at
		f.root = f.addr(root)
	default:
		return f.unsupportedf(at+8, "superblock version %d (0 to 3 are read)", f.version)
	}
	return nil
}

func (f *File) checkSizes(at int64) error {
	ok := func(n int) bool { return n == 2 || n == 4 || n == 8 }
	if !ok(f.offSize) || !ok(f.lenSize) {
		return f.errf(at, "sizes of offsets %d and lengths %d: want 2, 4 or 8", f.offSize, f.lenSize)
	}
	return nil
}

// checksum verifies the Jenkins lookup3 checksum stored in the last 4 of
// the n bytes at off.
func (f *File) checksum(off, n int64) error {
	b, err := f.bytesAt(off, n)
	if err != nil {
		return err
	}
	if n < 4 {
		return f.errf(off, "a checksummed structure of %d bytes", n)
	}
	want := binary.LittleEndian.Uint32(b[n-4:])
	if got := lookup3(b[:n-4], 0); got != want {
		return f.errf(off, "checksum %08x, stored %08x: the structure is corrupt", got, want)
	}
	return nil
}
