package data

import (
	"context"
	"fmt"
	"io"
	"os"
)

// RecordOptions configure FixedLengthRecords.
type RecordOptions struct {
	HeaderBytes int // bytes to skip at the start of the file
	FooterBytes int // bytes to ignore at the end of the file
	BufferSize  int // read buffer; <= 0: DefaultBufferSize
}

// FixedLengthRecords returns the records of recordBytes bytes each stored
// back to back in a binary file (tf.data's FixedLengthRecordDataset), after
// an optional header and before an optional footer. The file is read through
// one buffer of BufferSize bytes; each record is a pooled Block. A file whose
// records do not end evenly yields a *FormatError at the partial record.
// It panics if recordBytes < 1.
func FixedLengthRecords(path string, recordBytes int, opt RecordOptions) Dataset[Record] {
	if recordBytes < 1 {
		panic(fmt.Sprintf("data: FixedLengthRecords(%q, %d): want a positive record size", path, recordBytes))
	}
	name := fmt.Sprintf("records(%s)", baseName(path))
	return newDataset(name, kindSource, func(p *pipeline, st *stage) (iterator[Record], error) {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		pool := p.arena.pool(name)
		fr, err := openFile(p.ctx, pool, path, opt.BufferSize, false)
		if err != nil {
			return nil, err
		}
		it := &fixedIter{p: p, st: st, fr: fr, pool: pool, path: path, size: recordBytes,
			end: fi.Size() - int64(opt.FooterBytes)}
		if opt.HeaderBytes > 0 {
			skip := make([]byte, min(opt.HeaderBytes, 1<<16))
			for left := opt.HeaderBytes; left > 0; left -= len(skip[:min(left, len(skip))]) {
				if _, err := fr.readFull(skip[:min(left, len(skip))]); err != nil {
					fr.close()
					return nil, formatErr("records", path, fr.off, err, "file shorter than its %d-byte header", opt.HeaderBytes)
				}
			}
		}
		return it, nil
	})
}

type fixedIter struct {
	p    *pipeline
	st   *stage
	fr   *fileReader
	pool *pool
	path string
	size int
	end  int64
	done bool
}

func (it *fixedIter) next(ctx context.Context) (Record, error) {
	if it.done || it.fr.off >= it.end {
		return Record{}, io.EOF
	}
	off := it.fr.off
	if it.end-off < int64(it.size) {
		it.done = true
		err := formatErr("records", it.path, off, io.ErrUnexpectedEOF, "partial record of %d bytes, records are %d", it.end-off, it.size)
		if it.p.skip(it.st, err) {
			return Record{}, io.EOF
		}
		return Record{}, err
	}
	b, err := it.pool.get(ctx, it.size)
	if err != nil {
		return Record{}, err
	}
	if _, err := it.fr.readFull(b.Bytes()); err != nil {
		b.Release()
		it.done = true
		ferr := formatErr("records", it.path, off, err, "truncated record")
		if it.p.skip(it.st, ferr) {
			return Record{}, io.EOF
		}
		return Record{}, ferr
	}
	return Record{Data: b.Bytes(), File: it.path, Offset: off, mem: b}, nil
}

func (it *fixedIter) close() { it.fr.close() }
