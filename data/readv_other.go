//go:build !(darwin || linux || openbsd)

package data

import "os"

func readFullv(f *os.File, bufs [][]byte) error { return readFullEach(f, bufs) }
