package data

import (
	"os"

	"golang.org/x/sys/unix"
)

// willNeed asks the kernel to start reading [off, off+n) of f into the page
// cache now (posix_fadvise POSIX_FADV_WILLNEED), so the disk keeps streaming
// ahead of the reading goroutine even when that goroutine waits for a CPU.
// It is advice: errors are ignored.
func willNeed(f *os.File, off, n int64) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.Fadvise(int(fd), off, n, unix.FADV_WILLNEED)
		})
	}
}
