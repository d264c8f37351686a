package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// evict drops path's pages from the page cache (posix_fadvise
// POSIX_FADV_DONTNEED), so that the next read comes from the disk.
func evict(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
