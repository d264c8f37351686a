package hdf5

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"io"
	"math"
)

// Dataset is an n-dimensional array of one datatype.
type Dataset struct {
	Object
	Shape  []int64 // nil for a scalar
	DType  DType
	dt     datatype
	null   bool
	layout *message
	pipe   []filter
}

// filter is one stage of a dataset's filter pipeline.
type filter struct {
	id       uint16
	optional bool
	params   []uint32
}

const (
	filterDeflate    = 1
	filterShuffle    = 2
	filterFletcher32 = 3
)

func (o *Object) dataset() (*Dataset, error) {
	f := o.f
	d := &Dataset{Object: *o}
	ds, dt, lay := o.h.find(msgDataspace), o.h.find(msgDatatype), o.h.find(msgLayout)
	if ds == nil || dt == nil || lay == nil {
		return nil, f.errf(o.addr, "dataset %s lacks a dataspace, datatype or layout message", o.path)
	}
	for _, m := range []*message{ds, dt, lay} {
		if err := f.shared(m); err != nil {
			return nil, err
		}
	}
	var err error
	if d.Shape, d.null, _, err = f.dataspace(ds.body, ds.off); err != nil {
		return nil, err
	}
	if d.dt, _, err = f.datatype(dt.body, dt.off); err != nil {
		return nil, err
	}
	d.DType = d.dt.name
	if d.dt.vlen {
		return nil, f.unsupportedf(dt.off, "dataset %s holds variable-length strings", o.path)
	}
	d.layout = lay
	if m := o.h.find(msgFilters); m != nil {
		if d.pipe, err = f.filters(m); err != nil {
			return nil, err
		}
	}
	// Keras 3 stores bfloat16 as 2-byte values tagged dtype="bfloat16"
	if d.dt.size == 2 && d.DType != "float16" {
		if a, _ := o.Attr("dtype"); a != nil {
			if v, err := a.Value(); err == nil && v == "bfloat16" {
				d.DType, d.dt.name = "bfloat16", "bfloat16"
			}
		}
	}
	return d, nil
}

// Elements returns the number of elements (0 for a null dataspace).
func (d *Dataset) Elements() int64 {
	if d.null {
		return 0
	}
	return elements(d.Shape)
}

// ElementSize returns the bytes of one element.
func (d *Dataset) ElementSize() int { return d.dt.size }

func (f *File) filters(m *message) ([]filter, error) {
	c := f.cursorOver(m.body, m.off)
	v := c.u8()
	n := int(c.u8())
	if v == 1 {
		c.skip(6)
	} else if v != 2 && c.err == nil {
		return nil, f.errf(m.off, "filter pipeline version %d: want 1 or 2", v)
	}
	var out []filter
	for i := 0; i < n && c.err == nil; i++ {
		id := c.u16()
		nameLen := 0
		if v == 1 || id >= 256 {
			nameLen = int(c.u16())
		}
		flags := c.u16()
		nv := int(c.u16())
		if v == 1 {
			nameLen = (nameLen + 7) &^ 7
		}
		c.skip(nameLen)
		fl := filter{id: id, optional: flags&1 != 0}
		for k := 0; k < nv; k++ {
			fl.params = append(fl.params, c.u32())
		}
		if v == 1 && nv%2 == 1 {
			c.skip(4)
		}
		switch id {
		case filterDeflate, filterShuffle, filterFletcher32:
		default:
			return nil, f.unsupportedf(m.off, "filter %d (deflate, shuffle and fletcher32 are read)", id)
		}
		out = append(out, fl)
	}
	return out, c.err
}

// Bytes returns the dataset's elements as stored: row-major, little-endian,
// ElementSize() bytes each.
func (d *Dataset) Bytes() ([]byte, error) {
	f := d.f
	n := d.Elements()
	if n < 0 {
		return nil, f.errf(d.addr, "dataset %s has more than 2^53 elements", d.path)
	}
	total := n * int64(d.dt.size)
	if total/int64(d.dt.size) != n || total > 1<<46 {
		return nil, f.errf(d.addr, "dataset %s of %d elements is too large", d.path, n)
	}
	m := d.layout
	c := f.cursorOver(m.body, m.off)
	v := c.u8()
	class := c.u8()
	if c.err != nil {
		return nil, c.err
	}
	if v != 3 && v != 4 {
		return nil, f.unsupportedf(m.off, "data layout version %d (3 and 4 are read)", v)
	}
	switch class {
	case 0: // compact
		size := int64(c.u16())
		raw := c.take(int(size))
		if c.err != nil {
			return nil, c.err
		}
		if size != total {
			return nil, f.errf(m.off, "dataset %s: compact data of %d bytes for %d elements of %d bytes", d.path, size, n, d.dt.size)
		}
		return append([]byte(nil), raw...), nil
	case 1: // contiguous
		a, size := c.address(), c.length()
		if c.err != nil {
			return nil, c.err
		}
		if total == 0 {
			return []byte{}, nil
		}
		if f.undefined(a) { // never written: the fill value, zeros
			if err := f.charge(m.off, total); err != nil {
				return nil, err
			}
			return make([]byte, total), nil
		}
		if size < uint64(total) {
			return nil, f.errf(m.off, "dataset %s: contiguous storage of %d bytes for %d elements of %d bytes", d.path, size, n, d.dt.size)
		}
		at := f.addr(a)
		raw, err := f.bytesAt(at, total)
		if err != nil {
			return nil, f.errf(at, "dataset %s of %d bytes runs past the end of the file (%d bytes)", d.path, total, len(f.data))
		}
		return append([]byte(nil), raw...), nil
	case 2:
		if err := f.charge(m.off, total); err != nil {
			return nil, f.errf(m.off, "dataset %s of %d bytes: more than this file can hold even compressed", d.path, total)
		}
		return d.chunked(c, v, total)
	}
	return nil, f.unsupportedf(m.off, "data layout class %d", class)
}

// chunks describes a chunked dataset's grid.
type chunks struct {
	dims  []int64 // chunk dimensions in elements (rank of the dataset)
	bytes int64   // bytes of a whole chunk
}

func (d *Dataset) chunked(c *cursor, v uint8, total int64) ([]byte, error) {
	f := d.f
	m := d.layout
	rank := len(d.Shape)
	var ch chunks
	out := make([]byte, total)
	if v == 3 {
		nd := int(c.u8())
		a := c.address()
		dims := make([]int64, nd)
		for i := range dims {
			dims[i] = int64(c.u32())
		}
		if c.err != nil {
			return nil, c.err
		}
		if err := d.grid(&ch, dims, nd); err != nil {
			return nil, err
		}
		if f.undefined(a) {
			return out, nil
		}
		keySize := 8 + 8*(rank+1)
		err := f.btree1Keys(f.addr(a), 1, keySize, func(child int64, key []byte) error {
			kc := f.cursorOver(key, child)
			size := kc.u32()
			mask := kc.u32()
			offs := make([]int64, rank)
			for i := range offs {
				offs[i] = int64(kc.u64())
			}
			if kc.err != nil {
				return kc.err
			}
			return d.chunk(out, ch, offs, child, int64(size), mask)
		})
		return out, err
	}
	// version 4
	flags := c.u8()
	nd := int(c.u8())
	enc := int(c.u8())
	if enc < 1 || enc > 8 {
		return nil, f.errf(m.off, "chunk dimensions encoded in %d bytes", enc)
	}
	dims := make([]int64, nd)
	for i := range dims {
		dims[i] = int64(c.uint(enc))
	}
	index := c.u8()
	if c.err != nil {
		return nil, c.err
	}
	if err := d.grid(&ch, dims, nd); err != nil {
		return nil, err
	}
	switch index {
	case 1: // single chunk
		size, mask := ch.bytes, uint32(0)
		if flags&2 != 0 {
			size = int64(c.length())
			mask = c.u32()
		}
		a := c.address()
		if c.err != nil {
			return nil, c.err
		}
		if f.undefined(a) {
			return out, nil
		}
		return out, d.chunk(out, ch, make([]int64, rank), f.addr(a), size, mask)
	case 2: // implicit: whole chunks one after another
		a := c.address()
		if c.err != nil {
			return nil, c.err
		}
		if f.undefined(a) {
			return out, nil
		}
		i := int64(0)
		return out, d.eachChunk(ch, func(offs []int64) error {
			at := f.addr(a) + i*ch.bytes
			i++
			return d.chunk(out, ch, offs, at, ch.bytes, 0)
		})
	case 3: // fixed array
		c.u8() // page bits
		a := c.address()
		if c.err != nil {
			return nil, c.err
		}
		if f.undefined(a) {
			return out, nil
		}
		return out, d.fixedArray(out, ch, f.addr(a))
	}
	return nil, f.unsupportedf(m.off, "chunk index type %d (single chunk, implicit and fixed array are read; extensible arrays and v2 B-trees are for resizable datasets)", index)
}

// grid checks the chunk dimensions (the last is the element size).
func (d *Dataset) grid(ch *chunks, dims []int64, nd int) error {
	f := d.f
	if nd != len(d.Shape)+1 {
		return f.errf(d.layout.off, "dataset %s of rank %d has chunks of rank %d", d.path, len(d.Shape), nd-1)
	}
	ch.dims = dims[:nd-1]
	ch.bytes = int64(d.dt.size)
	for _, x := range ch.dims {
		if x <= 0 || x > 1<<32 || ch.bytes*x > int64(len(f.data))*1024+1<<26 {
			return f.errf(d.layout.off, "dataset %s: chunks of %v elements", d.path, ch.dims)
		}
		ch.bytes *= x
	}
	return nil
}

// eachChunk calls fn with the offset of every chunk of the grid, in
// row-major order.
func (d *Dataset) eachChunk(ch chunks, fn func(offs []int64) error) error {
	rank := len(d.Shape)
	offs := make([]int64, rank)
	for _, s := range d.Shape {
		if s == 0 {
			return nil
		}
	}
	for {
		if err := fn(append([]int64(nil), offs...)); err != nil {
			return err
		}
		i := rank - 1
		for ; i >= 0; i-- {
			offs[i] += ch.dims[i]
			if offs[i] < d.Shape[i] {
				break
			}
			offs[i] = 0
		}
		if i < 0 {
			return nil
		}
	}
}

func (d *Dataset) fixedArray(out []byte, ch chunks, addr int64) error {
	f := d.f
	n := int64(8 + f.lenSize + f.offSize)
	c := f.cursorAt(addr, n+4)
	c.signature("FAHD")
	c.skip(1)
	client := c.u8()
	entry := int64(c.u8())
	pageBits := c.u8()
	count := c.length()
	block := c.address()
	if c.err != nil {
		return c.err
	}
	if err := f.checksum(addr, n+4); err != nil {
		return err
	}
	if pageBits < 64 && count > 1<<pageBits {
		return f.unsupportedf(addr, "a paged fixed array of %d chunks", count)
	}
	if count > uint64(len(f.data)) || entry < int64(f.offSize) {
		return f.errf(addr, "a fixed array of %d entries of %d bytes", count, entry)
	}
	bn := int64(6+f.offSize) + int64(count)*entry
	c = f.cursorAt(f.addr(block), bn+4)
	c.signature("FADB")
	c.skip(2 + f.offSize)
	if c.err != nil {
		return c.err
	}
	if err := f.checksum(f.addr(block), bn+4); err != nil {
		return err
	}
	i := uint64(0)
	return d.eachChunk(ch, func(offs []int64) error {
		if i >= count {
			return f.errf(addr, "a fixed array of %d chunks for a larger grid", count)
		}
		i++
		a := c.address()
		size, mask := ch.bytes, uint32(0)
		if client == 1 {
			size = int64(c.uint(int(entry) - f.offSize - 4))
			mask = c.u32()
		}
		if c.err != nil {
			return c.err
		}
		if f.undefined(a) {
			return nil
		}
		return d.chunk(out, ch, offs, f.addr(a), size, mask)
	})
}

// chunk reads the chunk of size bytes at addr (filters skipped where mask
// says so) and copies the part of it inside the dataset to out.
func (d *Dataset) chunk(out []byte, ch chunks, offs []int64, addr, size int64, mask uint32) error {
	f := d.f
	rank := len(d.Shape)
	for i, o := range offs {
		if o < 0 || o >= d.Shape[i] || o%ch.dims[i] != 0 {
			return f.errf(addr, "dataset %s: a chunk at %v outside its shape %v", d.path, offs, d.Shape)
		}
	}
	raw, err := f.bytesAt(addr, size)
	if err != nil {
		return f.errf(addr, "dataset %s: a chunk of %d bytes runs past the end of the file (%d bytes)", d.path, size, len(f.data))
	}
	data, err := d.unfilter(raw, addr, mask, ch.bytes)
	if err != nil {
		return err
	}
	if int64(len(data)) != ch.bytes {
		return f.errf(addr, "dataset %s: a chunk of %d bytes, want %d", d.path, len(data), ch.bytes)
	}
	// copy rows of the chunk's last dimension
	es := int64(d.dt.size)
	if rank == 0 {
		copy(out, data)
		return nil
	}
	strides := make([]int64, rank) // of the dataset, in elements
	cstrides := make([]int64, rank)
	strides[rank-1], cstrides[rank-1] = 1, 1
	for i := rank - 2; i >= 0; i-- {
		strides[i] = strides[i+1] * d.Shape[i+1]
		cstrides[i] = cstrides[i+1] * ch.dims[i+1]
	}
	row := min(ch.dims[rank-1], d.Shape[rank-1]-offs[rank-1])
	idx := make([]int64, rank) // position inside the chunk
	for {
		src, dst := int64(0), int64(0)
		for i := 0; i < rank; i++ {
			src += idx[i] * cstrides[i]
			dst += (offs[i] + idx[i]) * strides[i]
		}
		copy(out[dst*es:(dst+row)*es], data[src*es:(src+row)*es])
		i := rank - 2
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < ch.dims[i] && offs[i]+idx[i] < d.Shape[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return nil
		}
	}
}

// unfilter undoes the filter pipeline, last filter first.
func (d *Dataset) unfilter(b []byte, addr int64, mask uint32, want int64) ([]byte, error) {
	f := d.f
	for i := len(d.pipe) - 1; i >= 0; i-- {
		if mask&(1<<uint(i)) != 0 {
			continue
		}
		switch fl := d.pipe[i]; fl.id {
		case filterDeflate:
			r, err := zlib.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, f.errf(addr, "dataset %s: a deflate chunk that does not start as zlib data: %v", d.path, err)
			}
			out, err := io.ReadAll(io.LimitReader(r, want+1))
			if err != nil {
				return nil, f.errf(addr, "dataset %s: a deflate chunk that does not inflate: %v", d.path, err)
			}
			if int64(len(out)) > want {
				return nil, f.errf(addr, "dataset %s: a chunk that inflates past its %d bytes", d.path, want)
			}
			b = out
		case filterShuffle:
			es := d.dt.size
			if len(fl.params) > 0 {
				es = int(fl.params[0])
			}
			if es > 1 && len(b)%es == 0 {
				n := len(b) / es
				out := make([]byte, len(b))
				for k := 0; k < es; k++ {
					for j := 0; j < n; j++ {
						out[j*es+k] = b[k*n+j]
					}
				}
				b = out
			}
		case filterFletcher32:
			if len(b) < 4 {
				return nil, f.errf(addr, "dataset %s: a chunk too short for its Fletcher-32 checksum", d.path)
			}
			data := b[:len(b)-4]
			if got, want := fletcher32(data), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want && bytesSwapped(got) != want {
				return nil, f.errf(addr, "dataset %s: Fletcher-32 checksum %08x, stored %08x: the chunk is corrupt", d.path, got, want)
			}
			b = data
		}
	}
	return b, nil
}

// bytesSwapped is v with the bytes of each 16-bit half swapped: what
// HDF5 before 1.6.3 stored on little-endian machines.
func bytesSwapped(v uint32) uint32 { return (v&0x00ff00ff)<<8 | (v>>8)&0x00ff00ff }

// fletcher32 is HDF5's H5_checksum_fletcher32: Fletcher's checksum over
// 16-bit big-endian words.
func fletcher32(b []byte) uint32 {
	var s1, s2 uint32
	for len(b) > 1 {
		n := min(len(b)/2, 360)
		for i := 0; i < n; i++ {
			s1 += uint32(b[0])<<8 | uint32(b[1])
			s2 += s1
			b = b[2:]
		}
		s1 = (s1 & 0xffff) + (s1 >> 16)
		s2 = (s2 & 0xffff) + (s2 >> 16)
	}
	if len(b) == 1 {
		s1 += uint32(b[0]) << 8
		s2 += s1
		s1 = (s1 & 0xffff) + (s1 >> 16)
		s2 = (s2 & 0xffff) + (s2 >> 16)
	}
	s1 = (s1 & 0xffff) + (s1 >> 16)
	s2 = (s2 & 0xffff) + (s2 >> 16)
	return s2<<16 | s1
}

// Float32s returns the dataset's values as float32: floats converted
// (float16, bfloat16 and float64 included), integers cast.
func (d *Dataset) Float32s() ([]float32, error) {
	raw, err := d.Bytes()
	if err != nil {
		return nil, err
	}
	n := len(raw) / d.dt.size
	out := make([]float32, n)
	switch d.dt.class {
	case classFloat:
		for i := range out {
			b := raw[i*d.dt.size:]
			switch d.DType {
			case "float16":
				out[i] = half(binary.LittleEndian.Uint16(b))
			case "bfloat16":
				out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16)
			case "float32":
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b))
			case "float64":
				out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b)))
			}
		}
	case classInt:
		for i, v := range ints(d.dt, raw) {
			out[i] = float32(v)
		}
	case classOpaque:
		if d.DType != "bfloat16" {
			return nil, d.f.unsupportedf(d.addr, "dataset %s holds opaque data, not numbers", d.path)
		}
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	default:
		return nil, d.f.unsupportedf(d.addr, "dataset %s holds %s, not numbers", d.path, d.DType)
	}
	return out, nil
}

// Int64s returns an integer dataset's values as int64 (an optimizer's
// iteration count, which float32 would round past 2^24).
func (d *Dataset) Int64s() ([]int64, error) {
	if d.dt.class != classInt {
		return nil, d.f.unsupportedf(d.addr, "dataset %s holds %s, not integers", d.path, d.DType)
	}
	raw, err := d.Bytes()
	if err != nil {
		return nil, err
	}
	return ints(d.dt, raw), nil
}
