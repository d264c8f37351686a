package data

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
)

// RecordOptions configure FixedLengthRecords.
type RecordOptions struct {
	HeaderBytes int // bytes to skip at the start of the file
	FooterBytes int // bytes to ignore at the end of the file
	// BufferSize is how many bytes one read fetches (whole records, at
	// least one); <= 0: DefaultBufferSize.
	BufferSize int
}

// FixedLengthRecords returns the records of recordBytes bytes each stored
// back to back in a binary file (tf.data's FixedLengthRecordDataset), after
// an optional header and before an optional footer. A goroutine reads ahead
// straight into the records' pooled Blocks (one vectored read per
// BufferSize bytes where the system has readv, so no byte is copied twice),
// up to 16 reads ahead and at most a sixteenth of the budget; on Linux it
// also asks the kernel to read up to 32 MiB further (POSIX_FADV_WILLNEED),
// so the disk streams even while the goroutine waits for a CPU. A file whose
// records do not end evenly yields a *FormatError at the partial record. It
// panics if recordBytes < 1.
func FixedLengthRecords(path string, recordBytes int, opt RecordOptions) Dataset[Record] {
	if recordBytes < 1 {
		panic(fmt.Sprintf("data: FixedLengthRecords(%q, %d): want a positive record size", path, recordBytes))
	}
	name := fmt.Sprintf("records(%s)", baseName(path))
	return newDataset(name, kindSource, func(p *pipeline, st *stage) (iterator[Record], error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("data: %w", err)
		}
		start, end := int64(opt.HeaderBytes), fi.Size()-int64(opt.FooterBytes)
		if end < start {
			f.Close()
			return nil, formatErr("records", path, 0, io.ErrUnexpectedEOF, "file of %d bytes is shorter than its header and footer", fi.Size())
		}
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("data: %w", err)
		}
		size := opt.BufferSize
		if size <= 0 {
			size = DefaultBufferSize
		}
		perRead := max(1, size/recordBytes)
		depth := maxAheadBuffers
		if b := p.arena.budget; b > 0 {
			depth = int(min(max(b/16/int64(perRead*recordBytes), 1), maxAheadBuffers))
		}
		ctx, cancel := context.WithCancel(p.ctx)
		it := &fixedIter{
			p: p, st: st, f: f, pool: p.arena.pool(name), path: path, size: recordBytes,
			off: start, end: end, perRead: perRead, cancel: cancel,
			reads: make(chan recordRun, depth), stop: make(chan struct{}),
		}
		it.wg.Add(1)
		go it.readAhead(ctx)
		return it, nil
	})
}

// maxWillNeed bounds how far ahead of the reader the kernel is asked to
// read (page cache, not process memory).
const maxWillNeed = 32 << 20

// recordRun is the records of one read, or the error that ended reading.
type recordRun struct {
	recs []Record
	err  error
}

type fixedIter struct {
	p       *pipeline
	st      *stage
	f       *os.File
	pool    *pool
	path    string
	size    int
	off     int64 // next byte the read-ahead goroutine reads
	end     int64
	perRead int
	cancel  context.CancelFunc
	reads   chan recordRun
	stop    chan struct{}
	wg      sync.WaitGroup

	cur  recordRun // consumer side
	i    int
	done bool
}

// readAhead reads runs of records into pooled blocks until the end, an
// error, or close. It reads fewer records when the budget is short rather
// than wait while holding some.
func (it *fixedIter) readAhead(ctx context.Context) {
	defer it.wg.Done()
	defer close(it.reads)
	bufs := make([][]byte, 0, it.perRead)
	blocks := make([]*Block, 0, it.perRead)
	// Keep the kernel reading up to `window` bytes ahead of us.
	run := int64(it.perRead * it.size)
	window := min(int64(cap(it.reads))*run, maxWillNeed)
	advised := it.off
	for it.off < it.end {
		if advised < it.off+window && advised < it.end {
			n := min(it.off+window, it.end) - advised
			willNeed(it.f, advised, n)
			advised += n
		}
		left := it.end - it.off
		if left < int64(it.size) {
			err := formatErr("records", it.path, it.off, io.ErrUnexpectedEOF, "partial record of %d bytes, records are %d", left, it.size)
			it.send(recordRun{err: err})
			return
		}
		n := int(min(int64(it.perRead), left/int64(it.size)))
		var err error
		if blocks, err = it.pool.getUpTo(ctx, n, it.size, blocks[:0]); err != nil {
			it.send(recordRun{err: err})
			return
		}
		run := recordRun{recs: make([]Record, len(blocks))}
		for i, b := range blocks {
			off := it.off + int64(i*it.size)
			run.recs[i] = Record{Data: b.Bytes(), File: it.path, Offset: off, mem: b}
		}
		bufs = bufs[:0]
		for _, r := range run.recs {
			bufs = append(bufs, r.Data)
		}
		if err := readFullv(it.f, bufs); err != nil {
			releaseRecords(run.recs)
			it.send(recordRun{err: formatErr("records", it.path, it.off, err, "read failed")})
			return
		}
		it.off += int64(len(run.recs) * it.size)
		if !it.send(run) {
			releaseRecords(run.recs)
			return
		}
	}
}

func (it *fixedIter) send(r recordRun) bool {
	select {
	case it.reads <- r:
		return true
	case <-it.stop:
		return false
	}
}

func releaseRecords(rs []Record) {
	for _, r := range rs {
		r.Release()
	}
}

func (it *fixedIter) next(ctx context.Context) (Record, error) {
	for !it.done {
		if it.i < len(it.cur.recs) {
			r := it.cur.recs[it.i]
			it.cur.recs[it.i] = Record{}
			it.i++
			return r, nil
		}
		if err := it.cur.err; err != nil {
			it.done = true
			if it.p.skip(it.st, err) {
				break
			}
			return Record{}, err
		}
		var ok bool
		select {
		case it.cur, ok = <-it.reads:
		case <-ctx.Done():
			return Record{}, ctx.Err()
		}
		it.i = 0
		if !ok {
			it.done = true
			break
		}
	}
	return Record{}, io.EOF
}

func (it *fixedIter) close() {
	close(it.stop)
	it.cancel()
	it.wg.Wait()
	if it.i < len(it.cur.recs) {
		releaseRecords(it.cur.recs[it.i:])
	}
	it.cur = recordRun{}
	for r := range it.reads {
		releaseRecords(r.recs)
	}
	it.f.Close()
}
