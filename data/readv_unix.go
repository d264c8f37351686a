//go:build darwin || linux || openbsd

package data

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// readFullv fills bufs from f in order with vectored reads (readv), so the
// kernel copies straight into them.
func readFullv(f *os.File, bufs [][]byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return readFullEach(f, bufs)
	}
	for len(bufs) > 0 {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Readv(int(fd), bufs[:min(len(bufs), 1024)])
			return rerr != unix.EAGAIN
		}); err != nil {
			return err
		}
		if rerr == unix.EINTR {
			continue
		}
		if rerr != nil {
			return rerr
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		for n > 0 {
			m := min(n, len(bufs[0]))
			bufs[0] = bufs[0][m:]
			n -= m
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
	return nil
}
