package data

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// IDX returns samples from IDX files (the MNIST and Fashion-MNIST format):
// X = images[i] and, with labelsPath set, Y = labels[i]. Gzip-compressed
// files (magic 1f 8b) are decompressed on the fly; offsets in errors then
// count decompressed bytes. The format (yann.lecun.com/exdb/mnist): magic
// bytes 0, 0, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
// 0x0D float32, 0x0E float64) and the rank, then each dimension as a
// big-endian uint32, then the data, big endian, row-major. int8 and int16
// are widened to int32.
func IDX(imagesPath, labelsPath string) Dataset[Sample] {
	name := fmt.Sprintf("idx(%s)", baseName(imagesPath))
	return arrayPairs(name, imagesPath, labelsPath, openIDX)
}

func openIDX(ctx context.Context, pool *pool, path string) (*arrayStream, error) {
	fr, err := openFile(ctx, pool, path, 0, true, true)
	if err != nil {
		return nil, err
	}
	s, err := readIDXHeader(fr, pool, path)
	if err != nil {
		fr.close()
		return nil, err
	}
	return s, nil
}

func readIDXHeader(fr *fileReader, pool *pool, name string) (*arrayStream, error) {
	var m [4]byte
	if _, err := fr.readFull(m[:]); err != nil {
		return nil, formatErr("idx", name, 0, err, "no magic number")
	}
	if m[0] != 0 || m[1] != 0 {
		return nil, formatErr("idx", name, 0, nil, "bad magic %x", m)
	}
	var elem elemFormat
	switch m[2] {
	case 0x08:
		elem = elemFormat{kind: 'u', size: 1}
	case 0x09:
		elem = elemFormat{kind: 'i', size: 1}
	case 0x0B:
		elem = elemFormat{kind: 'i', size: 2, big: true}
	case 0x0C:
		elem = elemFormat{kind: 'i', size: 4, big: true}
	case 0x0D:
		elem = elemFormat{kind: 'f', size: 4, big: true}
	case 0x0E:
		elem = elemFormat{kind: 'f', size: 8, big: true}
	default:
		return nil, formatErr("idx", name, 2, nil, "unknown type code %#02x", m[2])
	}
	rank := int(m[3])
	if rank == 0 || rank > 9 {
		return nil, formatErr("idx", name, 3, nil, "rank %d", rank)
	}
	shape := make([]int64, rank)
	for i := range shape {
		var d [4]byte
		off := fr.off
		if _, err := fr.readFull(d[:]); err != nil {
			return nil, formatErr("idx", name, off, err, "truncated dimension %d", i)
		}
		shape[i] = int64(binary.BigEndian.Uint32(d[:]))
	}
	return newArrayStream("idx", fr, pool, name, elem, shape)
}

// IDXShape returns the dimensions an IDX file's header declares (gzipped
// or not), reading nothing past the header: a loader sizes its buffer
// once from it instead of growing one.
func IDXShape(path string) ([]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 512)
	var r io.Reader = br
	if m, _ := br.Peek(2); len(m) == 2 && m[0] == 0x1f && m[1] == 0x8b {
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, formatErr("gzip", path, 0, err, "bad gzip header")
		}
		defer z.Close()
		r = z
	}
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil || head[0] != 0 || head[1] != 0 {
		return nil, formatErr("idx", path, 0, err, "no IDX magic number")
	}
	rank := int(head[3])
	if rank == 0 || rank > 9 {
		return nil, formatErr("idx", path, 3, nil, "rank %d", rank)
	}
	shape := make([]int64, rank)
	for i := range shape {
		var d [4]byte
		if _, err := io.ReadFull(r, d[:]); err != nil {
			return nil, formatErr("idx", path, int64(4+4*i), err, "truncated dimension %d", i)
		}
		shape[i] = int64(binary.BigEndian.Uint32(d[:]))
	}
	return shape, nil
}
