package data

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
)

// DefaultBufferSize is the read buffer of a file source (tf.data's 256 KiB).
const DefaultBufferSize = 256 << 10

// fileReader reads a file (or a decompressed stream) through one buffer of
// fixed size taken from the arena, so a source holds a bounded amount of
// memory whatever the file's size. It tracks the offset of the next byte.
type fileReader struct {
	src  io.Reader
	buf  *Block
	b    []byte
	r, w int
	off  int64 // offset of b[r] in the stream
	err  error
	c    []io.Closer
}

// openFile opens path with a buffer of size bytes from pool. When gz is true
// and the file starts with the gzip magic (1f 8b) it is decompressed and
// offsets count decompressed bytes.
func openFile(ctx context.Context, pool *pool, path string, size int, gz bool) (*fileReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	return newFileReader(ctx, pool, f, size, gz, path, f)
}

func newFileReader(ctx context.Context, pool *pool, src io.Reader, size int, gz bool, name string, closers ...io.Closer) (*fileReader, error) {
	if size <= 0 {
		size = DefaultBufferSize
	}
	fr := &fileReader{src: src, c: closers}
	if gz {
		br := bufio.NewReaderSize(src, 4096)
		if m, _ := br.Peek(2); len(m) == 2 && m[0] == 0x1f && m[1] == 0x8b {
			z, err := gzip.NewReader(br)
			if err != nil {
				fr.close()
				return nil, formatErr("gzip", name, 0, err, "bad gzip header")
			}
			fr.src = z
			fr.c = append(fr.c, z)
		} else {
			fr.src = br
		}
	}
	b, err := pool.get(ctx, size)
	if err != nil {
		fr.close()
		return nil, err
	}
	fr.buf, fr.b = b, b.Bytes()
	return fr, nil
}

func (fr *fileReader) fill() {
	if fr.r > 0 {
		copy(fr.b, fr.b[fr.r:fr.w])
		fr.w -= fr.r
		fr.r = 0
	}
	for fr.w < len(fr.b) && fr.err == nil {
		n, err := fr.src.Read(fr.b[fr.w:])
		fr.w += n
		fr.err = err
		if n > 0 {
			return
		}
	}
}

// readFull fills dst. At the end of the stream it returns io.EOF when no
// byte was read and io.ErrUnexpectedEOF after a part.
func (fr *fileReader) readFull(dst []byte) (int, error) {
	n := 0
	for n < len(dst) {
		if fr.r == fr.w {
			if fr.err != nil {
				break
			}
			if len(dst)-n >= len(fr.b) { // large read: skip the buffer
				m, err := io.ReadFull(fr.src, dst[n:])
				n += m
				fr.off += int64(m)
				if err != nil {
					fr.err = err
					if err == io.ErrUnexpectedEOF {
						fr.err = io.EOF
					}
				}
				continue
			}
			fr.fill()
			continue
		}
		m := copy(dst[n:], fr.b[fr.r:fr.w])
		fr.r += m
		fr.off += int64(m)
		n += m
	}
	if n == len(dst) {
		return n, nil
	}
	err := fr.err
	if err == nil || err == io.EOF {
		if n == 0 {
			return 0, io.EOF
		}
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// peek returns up to n buffered bytes without consuming them (n <= buffer).
func (fr *fileReader) peek(n int) []byte {
	if fr.w-fr.r < n && fr.err == nil {
		fr.fill()
		for fr.w-fr.r < n && fr.err == nil {
			fr.fill()
		}
	}
	return fr.b[fr.r:min(fr.w, fr.r+n)]
}

// Read implements io.Reader (for encoding/csv and the image decoders).
func (fr *fileReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if fr.r == fr.w {
		if fr.err != nil {
			return 0, fr.err
		}
		fr.fill()
		if fr.r == fr.w {
			return 0, fr.err
		}
	}
	m := copy(p, fr.b[fr.r:fr.w])
	fr.r += m
	fr.off += int64(m)
	return m, nil
}

// ReadByte implements io.ByteReader.
func (fr *fileReader) ReadByte() (byte, error) {
	var b [1]byte
	if _, err := fr.readFull(b[:]); err != nil {
		return 0, err
	}
	return b[0], nil
}

func (fr *fileReader) close() {
	for i := len(fr.c) - 1; i >= 0; i-- {
		fr.c[i].Close()
	}
	fr.c = nil
	fr.buf.Release()
	fr.buf, fr.b = nil, nil
}
