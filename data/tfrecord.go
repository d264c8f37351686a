package data

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// TFRecord framing (tensorflow/core/lib/io/record_writer.cc): each record is
//
//	uint64 length (little endian)
//	uint32 masked crc32c of the 8 length bytes
//	byte   data[length]
//	uint32 masked crc32c of data
//
// where mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 and crc32c is CRC-32
// with the Castagnoli polynomial.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC returns the masked crc32c of b, as TFRecord stores it.
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// AppendTFRecord appends data framed as one TFRecord to dst.
func AppendTFRecord(dst, data []byte) []byte {
	var h [12]byte
	binary.LittleEndian.PutUint64(h[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(h[8:], MaskedCRC(h[:8]))
	dst = append(dst, h[:]...)
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, MaskedCRC(data))
}

// TFRecordOptions configure TFRecords.
type TFRecordOptions struct {
	// MaxRecordBytes bounds a record's length (a larger length is treated
	// as corruption); <= 0: 64 MiB.
	MaxRecordBytes int64
	BufferSize     int // read buffer; <= 0: DefaultBufferSize
	// Gzip accepts a gzip-compressed file (detected by its magic bytes);
	// offsets then count decompressed bytes.
	Gzip bool
}

// TFRecords returns the payloads of the records of a TFRecord file
// (tf.data's TFRecordDataset), each checked against both checksums. A bad
// checksum or a truncated record is a *FormatError at the record's offset;
// under the Skip policy a record whose data checksum fails is skipped, and
// a bad length (after which no record boundary can be trusted) skips the
// rest of the file. Parse payloads with ParseExample.
func TFRecords(path string, opt TFRecordOptions) Dataset[Record] {
	name := fmt.Sprintf("tfrecord(%s)", baseName(path))
	return newDataset(name, kindSource, func(p *pipeline, st *stage) (iterator[Record], error) {
		pool := p.arena.pool(name)
		fr, err := openFile(p.ctx, pool, path, opt.BufferSize, opt.Gzip, true)
		if err != nil {
			return nil, err
		}
		return &tfrecordIter{p: p, st: st, fr: fr, pool: pool, path: path, max: opt.MaxRecordBytes}, nil
	})
}

type tfrecordIter struct {
	p    *pipeline
	st   *stage
	fr   *fileReader
	pool *pool
	path string
	max  int64
	done bool
}

func (it *tfrecordIter) next(ctx context.Context) (Record, error) {
	for !it.done {
		rec, resync, err := readTFRecord(ctx, it.fr, it.pool, it.path, it.max)
		if err == nil || err == io.EOF || !isFormat(err) {
			it.done = err != nil
			return rec, err
		}
		if !resync {
			it.done = true
		}
		if !it.p.skip(it.st, err) {
			it.done = true
			return Record{}, err
		}
	}
	return Record{}, io.EOF
}

func (it *tfrecordIter) close() { it.fr.close() }

// readTFRecord reads one record. resync reports whether the next record's
// start is still known after a format error.
func readTFRecord(ctx context.Context, fr *fileReader, pool *pool, path string, max int64) (rec Record, resync bool, err error) {
	if max <= 0 {
		max = 64 << 20
	}
	off := fr.off
	var h [12]byte
	if _, err := fr.readFull(h[:]); err != nil {
		if err == io.EOF {
			return Record{}, false, io.EOF
		}
		return Record{}, false, formatErr("tfrecord", path, off, err, "truncated record header")
	}
	if got, want := MaskedCRC(h[:8]), binary.LittleEndian.Uint32(h[8:]); got != want {
		return Record{}, false, formatErr("tfrecord", path, off, nil, "length checksum %#08x, want %#08x", want, got)
	}
	n := binary.LittleEndian.Uint64(h[:8])
	if n > uint64(max) {
		return Record{}, false, formatErr("tfrecord", path, off, nil, "record length %d exceeds the %d-byte limit", n, max)
	}
	b, err := pool.get(ctx, int(n)+4)
	if err != nil {
		return Record{}, false, err
	}
	buf := b.Bytes()
	if _, err := fr.readFull(buf); err != nil {
		b.Release()
		return Record{}, false, formatErr("tfrecord", path, off, err, "truncated record of %d bytes", n)
	}
	data := buf[:n:n]
	if got, want := MaskedCRC(data), binary.LittleEndian.Uint32(buf[n:]); got != want {
		b.Release()
		return Record{}, true, formatErr("tfrecord", path, off, nil, "data checksum %#08x, want %#08x", want, got)
	}
	return Record{Data: data, File: path, Offset: off, mem: b}, true, nil
}
