//go:build !linux

package data

import "os"

func willNeed(f *os.File, off, n int64) {}
