package data

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
)

// DefaultBufferSize is the read buffer of a file source (tf.data's 256 KiB).
const DefaultBufferSize = 256 << 10

// maxAheadBuffers is how many buffers a reading-ahead source cycles through
// at most; it uses fewer when they would pass a sixteenth of the budget.
const maxAheadBuffers = 16

// fileReader reads a file (or a decompressed stream) through fixed-size
// buffers taken from the arena, so a source holds a bounded amount of memory
// whatever the file's size. With read-ahead, a goroutine fills the next
// buffers while one is consumed, so the disk keeps working while the
// pipeline computes. It tracks the offset of the next byte.
type fileReader struct {
	src  io.Reader
	bufs []*Block
	b    []byte
	r, w int
	off  int64 // offset of b[r] in the stream
	size int64 // the stream's length when known (a plain file), else -1
	err  error
	c    []io.Closer

	// read-ahead: buffers go to the goroutine empty and come back filled
	ahead  bool
	empty  chan []byte
	filled chan filledBuf
	stop   chan struct{}
	wg     sync.WaitGroup
}

type filledBuf struct {
	b   []byte
	err error
}

// openFile opens path with buffers of size bytes from pool (up to
// maxAheadBuffers with read-ahead). When gz is true and the file starts with the gzip magic
// (1f 8b) it is decompressed and offsets count decompressed bytes.
func openFile(ctx context.Context, pool *pool, path string, size int, gz, ahead bool) (*fileReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	return newFileReader(ctx, pool, f, size, gz, ahead, path, f)
}

func newFileReader(ctx context.Context, pool *pool, src io.Reader, size int, gz, ahead bool, name string, closers ...io.Closer) (*fileReader, error) {
	if size <= 0 {
		size = DefaultBufferSize
	}
	fr := &fileReader{src: src, c: closers, size: -1}
	if f, ok := src.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			fr.size = fi.Size()
		}
	}
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
			fr.size = -1 // offsets count decompressed bytes
		} else {
			fr.src = br
		}
	}
	n := 1
	if ahead {
		n = maxAheadBuffers
		if b := pool.a.budget; b > 0 {
			n = int(min(max(b/16/int64(size), 2), maxAheadBuffers))
		}
	}
	for range n {
		b, err := pool.getPinned(ctx, size)
		if err != nil {
			fr.close()
			return nil, err
		}
		fr.bufs = append(fr.bufs, b)
	}
	fr.b = fr.bufs[0].Bytes()[:0]
	if ahead {
		fr.ahead = true
		fr.empty = make(chan []byte, n)
		fr.filled = make(chan filledBuf, n)
		fr.stop = make(chan struct{})
		for _, b := range fr.bufs {
			fr.empty <- b.Bytes()
		}
		fr.wg.Add(1)
		go fr.readAhead()
	}
	return fr, nil
}

// readAhead fills empty buffers in turn until the stream ends or close.
func (fr *fileReader) readAhead() {
	defer fr.wg.Done()
	for {
		var b []byte
		select {
		case b = <-fr.empty:
		case <-fr.stop:
			return
		}
		n, err := io.ReadFull(fr.src, b)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		fr.filled <- filledBuf{b[:n], err} // never blocks: room for every buffer
		if err != nil {
			return
		}
	}
}

// fill makes more bytes available in b[r:w] (none at the end or an error).
func (fr *fileReader) fill() {
	if fr.ahead {
		if fr.r < fr.w || fr.err != nil {
			return
		}
		if cap(fr.b) > 0 && fr.w > 0 {
			fr.empty <- fr.b[:cap(fr.b)]
		}
		fb := <-fr.filled
		fr.b, fr.r, fr.w, fr.err = fb.b, 0, len(fb.b), fb.err
		return
	}
	fr.b = fr.b[:cap(fr.b)]
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
			if !fr.ahead && len(dst)-n >= cap(fr.b) { // large read: skip the buffer
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
			if fr.err == nil {
				return 0, nil
			}
			return 0, fr.err
		}
	}
	m := copy(p, fr.b[fr.r:fr.w])
	fr.r += m
	fr.off += int64(m)
	return m, nil
}

// close stops the read-ahead goroutine (waiting for it), closes the file
// and returns the buffers.
func (fr *fileReader) close() {
	if fr.ahead {
		close(fr.stop)
		fr.wg.Wait()
		fr.ahead = false
	}
	for i := len(fr.c) - 1; i >= 0; i-- {
		fr.c[i].Close()
	}
	fr.c = nil
	for _, b := range fr.bufs {
		b.Release()
	}
	fr.bufs = nil
	fr.b = nil
}

// readFullEach fills bufs from f in order, one read per buffer.
func readFullEach(f *os.File, bufs [][]byte) error {
	for _, b := range bufs {
		if _, err := io.ReadFull(f, b); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}
