package hdf5

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Writer builds an HDF5 file in memory: groups, datasets and attributes,
// written by Bytes as a superblock version 2 file whose groups keep their
// links in version 2 object headers (what h5py writes with
// libver="v108"), datasets contiguous.
type Writer struct {
	root *WGroup
}

// WGroup is a group being written.
type WGroup struct {
	name   string
	groups map[string]*WGroup
	sets   map[string]*wdataset
	attrs  []wattr
}

type wdataset struct {
	dtype DType
	shape []int64
	data  []byte
	attrs []wattr
}

type wattr struct {
	name  string
	value any
}

// NewWriter returns a Writer holding an empty root group.
func NewWriter() *Writer { return &Writer{root: newWGroup("/")} }

func newWGroup(name string) *WGroup {
	return &WGroup{name: name, groups: map[string]*WGroup{}, sets: map[string]*wdataset{}}
}

// Root returns the root group.
func (w *Writer) Root() *WGroup { return w.root }

// Group returns the member group called name ("a/b" makes both), making
// it if it is not there yet.
func (g *WGroup) Group(name string) *WGroup {
	cur := g
	for _, part := range strings.Split(strings.Trim(name, "/"), "/") {
		sub, ok := cur.groups[part]
		if !ok {
			sub = newWGroup(part)
			cur.groups[part] = sub
		}
		cur = sub
	}
	return cur
}

// SetAttr sets an attribute of the group: a string, []string, float64,
// []float64, int64 or []int64.
func (g *WGroup) SetAttr(name string, value any) { g.attrs = setAttr(g.attrs, name, value) }

func setAttr(as []wattr, name string, value any) []wattr {
	for i := range as {
		if as[i].name == name {
			as[i].value = value
			return as
		}
	}
	return append(as, wattr{name, value})
}

// Dataset adds the dataset name to g: shape (nil for a scalar) elements
// of dtype ("float16", "float32", "float64" or "int64"), data row-major
// and little-endian. attrs are set on it (name, value pairs as SetAttr
// takes them).
func (g *WGroup) Dataset(name string, dtype DType, shape []int64, data []byte, attrs ...any) error {
	size := map[DType]int{"float16": 2, "float32": 4, "float64": 8, "int64": 8}[dtype]
	if size == 0 {
		return fmt.Errorf("hdf5: dataset %s: dtype %q is not written (float16, float32, float64, int64)", name, dtype)
	}
	if n := elements(shape); n < 0 || n*int64(size) != int64(len(data)) {
		return fmt.Errorf("hdf5: dataset %s: %d bytes for shape %v of %s", name, len(data), shape, dtype)
	}
	if strings.Contains(name, "/") || name == "" {
		return fmt.Errorf("hdf5: dataset name %q: want one path component", name)
	}
	if _, dup := g.groups[name]; dup {
		return fmt.Errorf("hdf5: %s is already a group", name)
	}
	d := &wdataset{dtype: dtype, shape: shape, data: data}
	for i := 0; i+1 < len(attrs); i += 2 {
		n, _ := attrs[i].(string)
		d.attrs = setAttr(d.attrs, n, attrs[i+1])
	}
	g.sets[name] = d
	return nil
}

// Bytes returns the file.
func (w *Writer) Bytes() ([]byte, error) {
	e := &encoder{buf: make([]byte, superblockV2Size)}
	root, err := e.group(w.root)
	if err != nil {
		return nil, err
	}
	// the superblock, version 2
	sb := e.buf[:0:superblockV2Size]
	sb = append(sb, signature...)
	sb = append(sb, 2, 8, 8, 0)
	sb = binary.LittleEndian.AppendUint64(sb, 0)          // base address
	sb = binary.LittleEndian.AppendUint64(sb, ^uint64(0)) // no superblock extension
	sb = binary.LittleEndian.AppendUint64(sb, uint64(len(e.buf)))
	sb = binary.LittleEndian.AppendUint64(sb, uint64(root))
	binary.LittleEndian.AppendUint32(sb, lookup3(sb, 0))
	return e.buf, nil
}

const superblockV2Size = 48

type encoder struct{ buf []byte }

func (e *encoder) align() {
	for len(e.buf)%8 != 0 {
		e.buf = append(e.buf, 0)
	}
}

// group writes g's members, then g's header; it returns the header's
// address.
func (e *encoder) group(g *WGroup) (int64, error) {
	type link struct {
		name string
		addr int64
	}
	var links []link
	names := make([]string, 0, len(g.groups)+len(g.sets))
	for n := range g.groups {
		names = append(names, n)
	}
	for n := range g.sets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var a int64
		var err error
		if sub, ok := g.groups[n]; ok {
			a, err = e.group(sub)
		} else {
			a, err = e.dataset(n, g.sets[n])
		}
		if err != nil {
			return 0, err
		}
		links = append(links, link{n, a})
	}
	var msgs []wmsg
	// link info: no creation order, no dense storage
	li := []byte{0, 0}
	li = binary.LittleEndian.AppendUint64(li, ^uint64(0))
	li = binary.LittleEndian.AppendUint64(li, ^uint64(0))
	msgs = append(msgs, wmsg{msgLinkInfo, li}, wmsg{msgGroupInfo, []byte{0, 0}})
	for _, l := range links {
		b := []byte{1, 0}
		if len(l.name) > 255 {
			b[1] = 1
			b = binary.LittleEndian.AppendUint16(b, uint16(len(l.name)))
		} else {
			b = append(b, byte(len(l.name)))
		}
		b = append(b, l.name...)
		b = binary.LittleEndian.AppendUint64(b, uint64(l.addr))
		msgs = append(msgs, wmsg{msgLink, b})
	}
	am, err := attrMessages(g.attrs)
	if err != nil {
		return 0, fmt.Errorf("hdf5: group %s: %w", g.name, err)
	}
	return e.header(append(msgs, am...))
}

func (e *encoder) dataset(name string, d *wdataset) (int64, error) {
	addr := ^uint64(0)
	if len(d.data) > 0 {
		e.align()
		addr = uint64(len(e.buf))
		e.buf = append(e.buf, d.data...)
	}
	dt, err := datatypeBytes(d.dtype)
	if err != nil {
		return 0, err
	}
	layout := []byte{3, 1}
	layout = binary.LittleEndian.AppendUint64(layout, addr)
	layout = binary.LittleEndian.AppendUint64(layout, uint64(len(d.data)))
	msgs := []wmsg{
		{msgDataspace, dataspaceBytes(d.shape)},
		{msgDatatype, dt},
		{msgFill, []byte{3, 0x0a}}, // fill value message v3: late allocation, fill if set, none set
		{msgLayout, layout},
	}
	am, err := attrMessages(d.attrs)
	if err != nil {
		return 0, fmt.Errorf("hdf5: dataset %s: %w", name, err)
	}
	return e.header(append(msgs, am...))
}

type wmsg struct {
	typ  uint16
	body []byte
}

// header writes a version 2 object header holding msgs.
func (e *encoder) header(msgs []wmsg) (int64, error) {
	var body []byte
	for _, m := range msgs {
		if len(m.body) > math.MaxUint16 {
			return 0, fmt.Errorf("hdf5: an object header message of %d bytes (at most 65535)", len(m.body))
		}
		body = append(body, byte(m.typ))
		body = binary.LittleEndian.AppendUint16(body, uint16(len(m.body)))
		body = append(body, 0)
		body = append(body, m.body...)
	}
	e.align()
	at := len(e.buf)
	h := append([]byte("OHDR"), 2, 0x02) // version 2; chunk size in 4 bytes
	h = binary.LittleEndian.AppendUint32(h, uint32(len(body)))
	h = append(h, body...)
	h = binary.LittleEndian.AppendUint32(h, lookup3(h, 0))
	e.buf = append(e.buf, h...)
	return int64(at), nil
}

func dataspaceBytes(shape []int64) []byte {
	typ := byte(1)
	if shape == nil {
		typ = 0
	}
	b := []byte{2, byte(len(shape)), 0, typ}
	for _, d := range shape {
		b = binary.LittleEndian.AppendUint64(b, uint64(d))
	}
	return b
}

func datatypeBytes(dt DType) ([]byte, error) {
	float := func(size, expLoc, expSize, mantSize, bias int) []byte {
		b := []byte{0x11, 0x20, byte(8*size - 1), 0}
		b = binary.LittleEndian.AppendUint32(b, uint32(size))
		b = binary.LittleEndian.AppendUint16(b, 0)
		b = binary.LittleEndian.AppendUint16(b, uint16(8*size))
		b = append(b, byte(expLoc), byte(expSize), 0, byte(mantSize))
		return binary.LittleEndian.AppendUint32(b, uint32(bias))
	}
	switch dt {
	case "float16":
		return float(2, 10, 5, 10, 15), nil
	case "float32":
		return float(4, 23, 8, 23, 127), nil
	case "float64":
		return float(8, 52, 11, 52, 1023), nil
	case "int64":
		b := []byte{0x10, 0x08, 0, 0}
		b = binary.LittleEndian.AppendUint32(b, 8)
		b = binary.LittleEndian.AppendUint16(b, 0)
		return binary.LittleEndian.AppendUint16(b, 64), nil
	}
	return nil, fmt.Errorf("dtype %q is not written", dt)
}

// attrMessages encodes attributes as version 3 attribute messages:
// strings as fixed-length UTF-8 (null padded), numbers as float64 or
// int64.
func attrMessages(as []wattr) ([]wmsg, error) {
	var out []wmsg
	for _, a := range as {
		var dt, data []byte
		var shape []int64
		switch v := a.value.(type) {
		case string:
			dt, data = stringType(len(v)), []byte(v)
			if len(v) == 0 {
				data = []byte{0}
			}
		case []string:
			n := 1
			for _, s := range v {
				n = max(n, len(s))
			}
			dt, shape = stringType(n), []int64{int64(len(v))}
			for _, s := range v {
				data = append(data, s...)
				data = append(data, make([]byte, n-len(s))...)
			}
		case float64:
			dt, _ = datatypeBytes("float64")
			data = binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
		case []float64:
			dt, _ = datatypeBytes("float64")
			shape = []int64{int64(len(v))}
			for _, x := range v {
				data = binary.LittleEndian.AppendUint64(data, math.Float64bits(x))
			}
		case int64:
			dt, _ = datatypeBytes("int64")
			data = binary.LittleEndian.AppendUint64(nil, uint64(v))
		case []int64:
			dt, _ = datatypeBytes("int64")
			shape = []int64{int64(len(v))}
			for _, x := range v {
				data = binary.LittleEndian.AppendUint64(data, uint64(x))
			}
		default:
			return nil, fmt.Errorf("attribute %s: a %T is not written", a.name, a.value)
		}
		ds := dataspaceBytes(shape)
		b := []byte{3, 0}
		b = binary.LittleEndian.AppendUint16(b, uint16(len(a.name)+1))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(dt)))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(ds)))
		b = append(b, 1) // UTF-8 name
		b = append(b, a.name...)
		b = append(b, 0)
		b = append(b, dt...)
		b = append(b, ds...)
		b = append(b, data...)
		out = append(out, wmsg{msgAttribute, b})
	}
	return out, nil
}

// stringType is a fixed-length, null-padded UTF-8 string of n bytes.
func stringType(n int) []byte {
	b := []byte{0x13, 0x11, 0, 0} // class 3 version 1; null pad, UTF-8
	return binary.LittleEndian.AppendUint32(b, uint32(max(n, 1)))
}
