package hdf5

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
)

// DType names a datatype as numpy does: "float16", "bfloat16",
// "float32", "float64", "int8" to "int64", "uint8" to "uint64", "string",
// or "opaque" (bytes the file does not describe further).
type DType string

// datatype is a decoded datatype message.
type datatype struct {
	class  int
	size   int
	signed bool
	name   DType
	vlen   bool // a variable-length string
	space  bool // a space-padded string
}

const (
	classInt    = 0
	classFloat  = 1
	classString = 3
	classOpaque = 5
	classVlen   = 9
)

func (f *File) datatype(b []byte, off int64) (datatype, int, error) {
	c := f.cursorOver(b, off)
	cv := c.u8()
	bf := c.take(3)
	size := int(c.u32())
	if c.err != nil {
		return datatype{}, 0, c.err
	}
	dt := datatype{class: int(cv & 0x0f), size: size}
	if size <= 0 || size > 1<<20 {
		return dt, 0, f.errf(off, "a datatype of %d bytes", size)
	}
	switch dt.class {
	case classInt:
		c.skip(4)
		if bf[0]&1 != 0 {
			return dt, 0, f.unsupportedf(off, "a big-endian integer")
		}
		dt.signed = bf[0]&0x08 != 0
		switch size {
		case 1, 2, 4, 8:
		default:
			return dt, 0, f.unsupportedf(off, "a %d-byte integer", size)
		}
		if dt.signed {
			dt.name = DType("int" + itoa(8*size))
		} else {
			dt.name = DType("uint" + itoa(8*size))
		}
	case classFloat:
		c.skip(4) // bit offset, precision
		c.u8()    // exponent location
		expSize := c.u8()
		c.u8() // mantissa location
		mantSize := c.u8()
		c.skip(4) // exponent bias
		if bf[0]&1 != 0 || bf[0]&0x40 != 0 {
			return dt, 0, f.unsupportedf(off, "a big-endian or VAX float")
		}
		switch {
		case size == 2 && expSize == 5 && mantSize == 10:
			dt.name = "float16"
		case size == 2 && expSize == 8 && mantSize == 7:
			dt.name = "bfloat16"
		case size == 4 && expSize == 8 && mantSize == 23:
			dt.name = "float32"
		case size == 8 && expSize == 11 && mantSize == 52:
			dt.name = "float64"
		default:
			return dt, 0, f.unsupportedf(off, "a %d-byte float with %d exponent and %d mantissa bits", size, expSize, mantSize)
		}
	case classString:
		dt.name = "string"
		dt.space = bf[0]&0x0f == 2
	case classOpaque:
		dt.name = "opaque"
		n := int(bf[0]) // tag length, padded to 8
		c.skip(n)
	case classVlen:
		if bf[0]&0x0f != 1 {
			return dt, 0, f.unsupportedf(off, "a variable-length sequence (variable-length strings are read)")
		}
		dt.name, dt.vlen = "string", true
		_, n, err := f.datatype(c.buf[c.at:], c.pos())
		if err != nil {
			return dt, 0, err
		}
		c.skip(n)
		if size != 4+f.offSize+4 {
			return dt, 0, f.errf(off, "a variable-length string of %d bytes: want %d", size, 8+f.offSize)
		}
	default:
		return dt, 0, f.unsupportedf(off, "datatype class %d (integers, floats, strings and opaque data are read)", dt.class)
	}
	if c.err != nil {
		return dt, 0, c.err
	}
	return dt, c.at, nil
}

func itoa(n int) string {
	return string(appendInt(nil, n))
}

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

// maxRank bounds a dataspace's rank (HDF5's H5S_MAX_RANK).
const maxRank = 32

// dataspace decodes a dataspace message: the dimensions (nil for a
// scalar), whether it is null (no elements), and the bytes it took.
func (f *File) dataspace(b []byte, off int64) ([]int64, bool, int, error) {
	c := f.cursorOver(b, off)
	v := c.u8()
	rank := int(c.u8())
	flags := c.u8()
	null := false
	switch v {
	case 1:
		c.skip(5)
	case 2:
		null = c.u8() == 2
	default:
		if c.err == nil {
			return nil, false, 0, f.errf(off, "dataspace version %d: want 1 or 2", v)
		}
	}
	if rank > maxRank {
		return nil, false, 0, f.errf(off, "a dataspace of rank %d (at most %d)", rank, maxRank)
	}
	var dims []int64
	for i := 0; i < rank; i++ {
		d := c.length()
		if d > 1<<53 {
			return nil, false, 0, f.errf(off, "dimension %d of %d elements", i, d)
		}
		dims = append(dims, int64(d))
	}
	if flags&1 != 0 {
		for i := 0; i < rank; i++ {
			c.length()
		}
	}
	if v == 1 && flags&2 != 0 {
		for i := 0; i < rank; i++ {
			c.length()
		}
	}
	if c.err != nil {
		return nil, false, 0, c.err
	}
	if rank > 0 && dims == nil {
		dims = []int64{}
	}
	return dims, null, c.at, nil
}

// elements returns the number of elements of dims, or -1 past 2^53.
func elements(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		if d != 0 && n > (1<<53)/d {
			return -1
		}
		n *= d
	}
	return n
}

// Attribute is a named value of a group or dataset.
type Attribute struct {
	Name  string
	Shape []int64 // nil for a scalar
	DType DType
	f     *File
	dt    datatype
	raw   []byte
	off   int64
	null  bool
	err   error // why the value cannot be read
}

// attribute decodes an attribute message.
func (f *File) attribute(m *message) (*Attribute, error) {
	c := f.cursorOver(m.body, m.off)
	v := c.u8()
	flags := c.u8()
	nameLen, dtLen, dsLen := int(c.u16()), int(c.u16()), int(c.u16())
	if c.err != nil {
		return nil, c.err
	}
	pad := func(n int) int { return n }
	switch v {
	case 1:
		pad = func(n int) int { return (n + 7) &^ 7 }
	case 2:
	case 3:
		c.u8() // name encoding
	default:
		return nil, f.errf(m.off, "attribute message version %d: want 1, 2 or 3", v)
	}
	if flags&3 != 0 {
		return nil, f.unsupportedf(m.off, "an attribute with a shared datatype or dataspace")
	}
	name := c.take(pad(nameLen))
	if c.err != nil {
		return nil, c.err
	}
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	} else if nameLen > 0 {
		name = name[:nameLen]
	}
	a := &Attribute{Name: string(name), f: f}
	dtOff := c.pos()
	dtb := c.take(pad(dtLen))
	dsOff := c.pos()
	dsb := c.take(pad(dsLen))
	if c.err != nil {
		return nil, c.err
	}
	var err error
	if a.dt, _, err = f.datatype(dtb, dtOff); err != nil {
		return a, err
	}
	a.DType = a.dt.name
	if a.Shape, a.null, _, err = f.dataspace(dsb, dsOff); err != nil {
		return a, err
	}
	n := elements(a.Shape)
	if a.null {
		n = 0
	}
	if n < 0 || n > int64(len(m.body)) {
		return a, f.errf(m.off, "attribute %q holds %d elements in a message of %d bytes", a.Name, n, len(m.body))
	}
	a.off = c.pos()
	a.raw = c.take(int(n) * a.dt.size)
	if c.err != nil {
		return a, f.errf(m.off, "attribute %q: its %d elements of %d bytes run past its message", a.Name, n, a.dt.size)
	}
	return a, nil
}

// Value returns the attribute's value: a string or []string for strings,
// float64 or []float64 for floats, int64 or []int64 for integers (a
// scalar for a scalar dataspace).
func (a *Attribute) Value() (any, error) {
	if a.err != nil {
		return nil, a.err
	}
	f := a.f
	n := len(a.raw) / max(a.dt.size, 1)
	switch a.dt.class {
	case classString, classVlen:
		out := make([]string, n)
		for i := range out {
			b := a.raw[i*a.dt.size : (i+1)*a.dt.size]
			if a.dt.vlen {
				s, err := f.vlenString(b, a.off+int64(i*a.dt.size))
				if err != nil {
					return nil, err
				}
				out[i] = s
				continue
			}
			if j := bytes.IndexByte(b, 0); j >= 0 {
				b = b[:j]
			}
			s := string(b)
			if a.dt.space {
				s = strings.TrimRight(s, " ")
			}
			out[i] = s
		}
		if a.Shape == nil && !a.null && len(out) == 1 {
			return out[0], nil
		}
		return out, nil
	case classFloat, classInt:
		if a.dt.class == classFloat {
			out, err := floats(a.dt, a.raw)
			if err != nil {
				return nil, f.errf(a.off, "attribute %q: %v", a.Name, err)
			}
			if a.Shape == nil && len(out) == 1 {
				return out[0], nil
			}
			return out, nil
		}
		out := ints(a.dt, a.raw)
		if a.Shape == nil && len(out) == 1 {
			return out[0], nil
		}
		return out, nil
	}
	return nil, f.unsupportedf(a.off, "attribute %q of datatype %s", a.Name, a.DType)
}

// Strings returns a string attribute as a list (a scalar as one string).
func (a *Attribute) Strings() ([]string, error) {
	v, err := a.Value()
	if err != nil {
		return nil, err
	}
	switch s := v.(type) {
	case string:
		return []string{s}, nil
	case []string:
		return s, nil
	case []float64:
		if len(s) == 0 { // h5py writes an empty list as an empty float array
			return nil, nil
		}
	}
	return nil, a.f.errf(a.off, "attribute %q is %s, not a string", a.Name, a.DType)
}

func floats(dt datatype, raw []byte) ([]float64, error) {
	n := len(raw) / dt.size
	out := make([]float64, n)
	for i := range out {
		b := raw[i*dt.size:]
		switch dt.name {
		case "float16":
			out[i] = float64(half(binary.LittleEndian.Uint16(b)))
		case "bfloat16":
			out[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
		case "float32":
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		case "float64":
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		}
	}
	return out, nil
}

func ints(dt datatype, raw []byte) []int64 {
	n := len(raw) / dt.size
	out := make([]int64, n)
	for i := range out {
		b := raw[i*dt.size:]
		var u uint64
		for k := dt.size - 1; k >= 0; k-- {
			u = u<<8 | uint64(b[k])
		}
		if dt.signed && dt.size < 8 && u>>(8*uint(dt.size)-1) != 0 {
			u |= ^uint64(0) << (8 * uint(dt.size))
		}
		out[i] = int64(u)
	}
	return out
}

// half converts an IEEE binary16 value to float32.
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := int(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: mant · 2^-24
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | uint32(exp-15+127)<<23 | mant<<13)
}

// vlenString reads a variable-length string element: its length, then
// the global heap collection and index holding it.
func (f *File) vlenString(b []byte, off int64) (string, error) {
	c := f.cursorOver(b, off)
	n := c.u32()
	coll := c.address()
	idx := c.u32()
	if c.err != nil {
		return "", c.err
	}
	if n == 0 && (coll == 0 || f.undefined(coll)) {
		return "", nil
	}
	obj, err := f.globalHeapObject(f.addr(coll), idx)
	if err != nil {
		return "", err
	}
	if uint64(n) > uint64(len(obj)) {
		return "", f.errf(off, "a string of %d bytes in a heap object of %d", n, len(obj))
	}
	return string(obj[:n]), nil
}

// globalHeapObject returns object idx of the global heap collection at
// addr.
func (f *File) globalHeapObject(addr int64, idx uint32) ([]byte, error) {
	c := f.cursorAt(addr, int64(8+f.lenSize))
	c.signature("GCOL")
	if v := c.u8(); c.err == nil && v != 1 {
		return nil, f.errf(addr+4, "global heap version %d: want 1", v)
	}
	c.skip(3)
	size := c.length()
	if c.err != nil {
		return nil, c.err
	}
	if size < uint64(8+f.lenSize) || size > uint64(len(f.data)) {
		return nil, f.errf(addr, "a global heap collection of %d bytes", size)
	}
	c = f.cursorAt(addr, int64(size))
	c.skip(8 + f.lenSize)
	for c.err == nil && len(c.buf)-c.at >= 8+f.lenSize {
		at := c.pos()
		i := c.u16()
		c.skip(6) // reference count, reserved
		n := c.length()
		if i == 0 { // free space: the rest of the collection
			break
		}
		if n > uint64(len(c.buf)-c.at) {
			return nil, f.errf(at, "a global heap object of %d bytes in a collection of %d", n, size)
		}
		data := c.take(int(n))
		c.skip(min(int((n+7)&^7-n), len(c.buf)-c.at))
		if uint32(i) == idx {
			return data, nil
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	return nil, f.errf(addr, "no object %d in the global heap collection", idx)
}

// Attrs returns the object's attributes, in the order the file keeps
// them (dense attribute storage in its name index's order).
func (o *Object) Attrs() ([]*Attribute, error) {
	var out []*Attribute
	for i := range o.h.msgs {
		m := &o.h.msgs[i]
		switch m.typ {
		case msgAttribute:
			a, err := o.f.attribute(m)
			if err != nil && a == nil {
				return nil, err
			}
			a.err = err // listed; Attr reports it
			out = append(out, a)
		case msgAttrInfo:
			dense, err := o.denseAttrs(m)
			if err != nil {
				return nil, err
			}
			out = append(out, dense...)
		}
	}
	return out, nil
}

// Attr returns the attribute called name, or nil when there is none.
func (o *Object) Attr(name string) (*Attribute, error) {
	as, err := o.Attrs()
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if a.Name == name {
			if a.err != nil {
				return nil, a.err
			}
			return a, nil
		}
	}
	return nil, nil
}

func (o *Object) denseAttrs(m *message) ([]*Attribute, error) {
	f := o.f
	c := f.cursorOver(m.body, m.off)
	if v := c.u8(); c.err == nil && v != 0 {
		return nil, f.errf(m.off, "attribute info message version %d: want 0", v)
	}
	flags := c.u8()
	if flags&1 != 0 {
		c.u16()
	}
	heapAddr, index := c.address(), c.address()
	if c.err != nil {
		return nil, c.err
	}
	if f.undefined(heapAddr) {
		return nil, nil
	}
	heap, err := f.fractalHeap(f.addr(heapAddr))
	if err != nil {
		return nil, err
	}
	var out []*Attribute
	err = f.btree2(f.addr(index), 8, func(rec []byte, off int64) error {
		if len(rec) < 8 {
			return f.errf(off, "an attribute name record of %d bytes", len(rec))
		}
		obj, objOff, err := heap.object(rec[:8], off)
		if err != nil {
			return err
		}
		a, err := f.attribute(&message{typ: msgAttribute, body: obj, off: objOff})
		if err != nil {
			return err
		}
		out = append(out, a)
		return nil
	})
	return out, err
}
