//go:build linux || darwin || freebsd || netbsd || openbsd

package mem

import "syscall"

// errNoMem is the error the OS gives when it cannot map more memory.
var errNoMem error = syscall.ENOMEM

// mapAnon maps size bytes of zeroed, private, anonymous memory outside the
// Go heap.
func mapAnon(size int64) ([]byte, error) {
	return syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

// unmapAnon returns memory from mapAnon to the OS.
func unmapAnon(b []byte) error { return syscall.Munmap(b) }

// releasePages gives b's pages back to the OS (madvise MADV_DONTNEED): they
// stay mapped and read as zero when touched again.
func releasePages(b []byte) error { return syscall.Madvise(b, syscall.MADV_DONTNEED) }
