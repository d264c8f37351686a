//go:build unix

package cpu

import (
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockChoices takes an exclusive lock on the choices file's lock file
// (file + ".lock"), waiting up to wait for another process to release
// it, and returns the release. Where the lock cannot be had (no such
// directory, a file system without locks, a holder that never lets go),
// it returns a release that does nothing: the choices are then measured
// without the lock, as before it existed.
func lockChoices(file string, wait time.Duration) func() {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return func() {}
	}
	f, err := os.OpenFile(file+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return func() {}
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR || time.Now().After(deadline) {
			f.Close()
			return func() {}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
