//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package mem

import (
	"errors"
	"unsafe"
)

// errNoMem is never returned on platforms without mmap support here.
var errNoMem = errors.New("mem: out of memory")

// mapAnon falls back to the Go heap where headroom has no mmap binding: the
// memory is zeroed and 64-byte aligned but owned by the garbage collector,
// so unmapping only drops the reference.
func mapAnon(size int64) ([]byte, error) {
	b := make([]byte, size+PageSize)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % PageSize); r != 0 {
		off = PageSize - r
	}
	return b[off : off+int(size) : off+int(size)], nil
}

func unmapAnon(b []byte) error { return nil }

// releasePages is a no-op where the memory is the Go heap.
func releasePages(b []byte) error { return nil }
