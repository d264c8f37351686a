package data

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/headroom-ml/headroom/tensor"
)

// elemFormat is how an array file stores one element.
type elemFormat struct {
	kind byte // 'f' float, 'i' signed, 'u' unsigned, 'b' bool
	size int  // bytes
	big  bool // big endian
}

// outDType is the tensor dtype an element format is read as: the same when
// headroom has it, else the narrowest wider integer type.
func (f elemFormat) outDType() (tensor.DType, error) {
	switch {
	case f.kind == 'f' && f.size == 2:
		return tensor.Float16, nil
	case f.kind == 'f' && f.size == 4:
		return tensor.Float32, nil
	case f.kind == 'f' && f.size == 8:
		return tensor.Float64, nil
	case f.kind == 'i' && f.size <= 4 && f.size > 0 && f.size != 3:
		return tensor.Int32, nil
	case f.kind == 'i' && f.size == 8:
		return tensor.Int64, nil
	case f.kind == 'u' && f.size == 1:
		return tensor.Uint8, nil
	case f.kind == 'u' && f.size == 2:
		return tensor.Int32, nil
	case f.kind == 'u' && f.size == 4:
		return tensor.Int64, nil
	case f.kind == 'b' && f.size == 1:
		return tensor.Bool, nil
	}
	return tensor.Invalid, fmt.Errorf("unsupported element type %c%d", f.kind, f.size)
}

// maxEmptyRows bounds the rows of an array whose rows hold no element.
const maxEmptyRows = 1 << 16

// arrayStream reads the rows (slices along axis 0) of one array stored
// row-major after a header: an .npy file, an .npz entry or an IDX file.
type arrayStream struct {
	format   string // "npy" or "idx", for errors
	fr       *fileReader
	pool     *pool
	name     string
	elem     elemFormat
	dtype    tensor.DType
	rowShape tensor.Shape
	rows     int64
	rowElems int
	i        int64
	convert  bool // the stored format differs from dtype: read, then widen or swap
}

func newArrayStream(format string, fr *fileReader, pool *pool, name string, elem elemFormat, shape []int64) (*arrayStream, error) {
	dt, err := elem.outDType()
	if err != nil {
		return nil, formatErr(format, name, fr.off, nil, "%v", err)
	}
	s := &arrayStream{format: format, fr: fr, pool: pool, name: name, elem: elem, dtype: dt, rows: 1, rowElems: 1}
	dims := shape
	if len(shape) > 0 {
		s.rows, dims = shape[0], shape[1:]
	}
	if len(dims) > tensor.MaxRank {
		return nil, formatErr(format, name, fr.off, nil, "rank %d exceeds %d", len(shape), tensor.MaxRank)
	}
	const maxRow = 1 << 30
	for _, d := range dims {
		if d < 0 || d > maxRow || int64(s.rowElems)*d > maxRow {
			return nil, formatErr(format, name, fr.off, nil, "row of shape %v is too large", dims)
		}
		s.rowElems *= int(d)
		s.rowShape = append(s.rowShape, int(d))
	}
	if s.rows < 0 {
		return nil, formatErr(format, name, fr.off, nil, "negative dimension %d", s.rows)
	}
	if s.rowElems == 0 && s.rows > maxEmptyRows {
		// valid in principle, but no real data set is millions of empty rows
		return nil, formatErr(format, name, fr.off, nil, "%d rows of zero elements", s.rows)
	}
	s.convert = elem.size != dt.Size() || elem.big
	return s, nil
}

// next reads the next row into a pooled block: io.EOF after the last.
func (s *arrayStream) next(ctx context.Context) (tensor.Tensor, *Block, error) {
	if s.i >= s.rows {
		return tensor.Tensor{}, nil, io.EOF
	}
	off := s.fr.off
	if n := int64(s.rowElems * s.elem.size); s.fr.size >= 0 && n > s.fr.size-off {
		// the file ends inside this row: say so before reserving the row
		// (a damaged header can declare rows far larger than the budget)
		return tensor.Tensor{}, nil, formatErr(s.format, s.name, off, io.ErrUnexpectedEOF,
			"truncated at row %d of %d: a row is %d bytes, the file has %d left", s.i, s.rows, n, max(0, s.fr.size-off))
	}
	b, err := s.pool.get(ctx, s.rowElems*s.dtype.Size())
	if err != nil {
		return tensor.Tensor{}, nil, err
	}
	dst := b.Bytes()
	src := dst
	var scratch *Block
	if s.convert {
		// The stored row is read into a pooled block of its own, so the
		// scratch is on the ledger and under the budget like the row: a
		// header that declares a huge row fails with *mem.OOMError instead
		// of growing the Go heap.
		if scratch, err = s.pool.get(ctx, s.rowElems*s.elem.size); err != nil {
			b.Release()
			return tensor.Tensor{}, nil, err
		}
		src = scratch.Bytes()
	}
	_, err = s.fr.readFull(src)
	if err == nil && scratch != nil {
		convert(dst, src, s.elem, s.dtype)
	}
	if scratch != nil {
		scratch.Release()
	}
	if err != nil {
		b.Release()
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return tensor.Tensor{}, nil, formatErr(s.format, s.name, off, err, "truncated at row %d of %d", s.i, s.rows)
	}
	s.i++
	t, err := tensor.FromBytes(s.dtype, s.rowShape, dst)
	if err != nil {
		b.Release()
		return tensor.Tensor{}, nil, err
	}
	return t, b, nil
}

// convert widens or byte-swaps src (stored as f) into dst (of dtype dt).
func convert(dst, src []byte, f elemFormat, dt tensor.DType) {
	var order binary.ByteOrder = binary.LittleEndian
	if f.big {
		order = binary.BigEndian
	}
	n := len(src) / f.size
	for i := range n {
		e := src[i*f.size : (i+1)*f.size]
		var u uint64
		switch f.size {
		case 1:
			u = uint64(e[0])
		case 2:
			u = uint64(order.Uint16(e))
		case 4:
			u = uint64(order.Uint32(e))
		case 8:
			u = order.Uint64(e)
		}
		if f.kind == 'i' { // sign-extend
			shift := 64 - 8*uint(f.size)
			u = uint64(int64(u<<shift) >> shift)
		}
		switch dt {
		case tensor.Float16:
			binary.LittleEndian.PutUint16(dst[2*i:], uint16(u))
		case tensor.Float32:
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(u))
		case tensor.Float64:
			binary.LittleEndian.PutUint64(dst[8*i:], u)
		case tensor.Int32:
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(u))
		case tensor.Int64:
			binary.LittleEndian.PutUint64(dst[8*i:], u)
		case tensor.Uint8, tensor.Bool:
			dst[i] = byte(u)
		}
	}
}

// pairIter zips an x stream with an optional y stream into Samples.
type pairIter struct {
	p      *pipeline
	st     *stage
	x, y   *arrayStream
	closer []func()
}

func newPairIter(p *pipeline, st *stage, x, y *arrayStream, closers ...func()) (*pairIter, error) {
	if y != nil && y.rows != x.rows {
		return nil, fmt.Errorf("data: %s has %d rows but %s has %d", x.name, x.rows, y.name, y.rows)
	}
	return &pairIter{p: p, st: st, x: x, y: y, closer: closers}, nil
}

func (it *pairIter) next(ctx context.Context) (Sample, error) {
	s, err := it.read(ctx)
	if err != nil && it.p.skip(it.st, err) {
		return Sample{}, io.EOF // no row boundary can be trusted after damage
	}
	return s, err
}

func (it *pairIter) read(ctx context.Context) (Sample, error) {
	x, xb, err := it.x.next(ctx)
	if err != nil {
		return Sample{}, err
	}
	s := Sample{X: x, mem: [2]*Block{xb}}
	if it.y != nil {
		y, yb, err := it.y.next(ctx)
		if err != nil {
			xb.Release()
			if err == io.EOF {
				err = formatErr(it.y.format, it.y.name, it.y.fr.off, io.ErrUnexpectedEOF, "fewer rows than %s", it.x.name)
			}
			return Sample{}, err
		}
		s.Y, s.mem[1] = y, yb
	}
	return s, nil
}

func (it *pairIter) close() {
	for i := len(it.closer) - 1; i >= 0; i-- {
		it.closer[i]()
	}
}
