package hdf5

// Object header message types read here (HDF5 file format specification
// 3.0, section IV.A.2).
const (
	msgNil          = 0x00
	msgDataspace    = 0x01
	msgLinkInfo     = 0x02
	msgDatatype     = 0x03
	msgFillOld      = 0x04
	msgFill         = 0x05
	msgLink         = 0x06
	msgLayout       = 0x08
	msgGroupInfo    = 0x0A
	msgFilters      = 0x0B
	msgAttribute    = 0x0C
	msgContinuation = 0x10
	msgSymbolTable  = 0x11
	msgAttrInfo     = 0x15
)

// message is one object header message: its type, flags, body and the
// file offset of the body.
type message struct {
	typ   uint16
	flags uint8
	body  []byte
	off   int64
}

// header is an object's header: its messages, continuation blocks
// followed.
type header struct {
	addr int64
	msgs []message
}

// maxMessages bounds the messages of one object header.
const maxMessages = 1 << 16

// header reads the object header at absolute offset addr (cached).
func (f *File) header(addr int64) (*header, error) {
	if h, ok := f.headers[addr]; ok {
		return h, nil
	}
	b, err := f.bytesAt(addr, 4)
	if err != nil {
		return nil, err
	}
	h := &header{addr: addr}
	if string(b) == "OHDR" {
		err = f.headerV2(h)
	} else {
		err = f.headerV1(h)
	}
	if err != nil {
		return nil, err
	}
	f.headers[addr] = h
	return h, nil
}

func (f *File) headerV1(h *header) error {
	c := f.cursorAt(h.addr, 16)
	if v := c.u8(); c.err == nil && v != 1 {
		return f.errf(h.addr, "object header version %d: want 1, or an \"OHDR\" signature (version 2)", v)
	}
	c.skip(1)
	n := int(c.u16())
	c.u32() // reference count
	size := int64(c.u32())
	if c.err != nil {
		return c.err
	}
	type block struct{ off, n int64 }
	blocks := []block{{h.addr + 16, size}}
	seen := map[int64]bool{}
	for len(blocks) > 0 && len(h.msgs) < n {
		bl := blocks[0]
		blocks = blocks[1:]
		if seen[bl.off] {
			return f.errf(bl.off, "an object header continuation block read twice: a loop")
		}
		seen[bl.off] = true
		c := f.cursorAt(bl.off, bl.n)
		for c.err == nil && len(c.buf)-c.at >= 8 && len(h.msgs) < n {
			typ := c.u16()
			sz := int(c.u16())
			flags := c.u8()
			c.skip(3)
			off := c.pos()
			body := c.take(sz)
			if c.err != nil {
				return c.err
			}
			if typ == msgContinuation {
				cc := f.cursorOver(body, off)
				a, l := cc.address(), cc.length()
				if cc.err != nil {
					return cc.err
				}
				blocks = append(blocks, block{f.addr(a), int64(min(l, uint64(len(f.data))))})
			}
			h.msgs = append(h.msgs, message{typ: typ, flags: flags, body: body, off: off})
			if len(h.msgs) > maxMessages {
				return f.errf(off, "more than %d messages in one object header", maxMessages)
			}
		}
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

func (f *File) headerV2(h *header) error {
	c := f.cursorAt(h.addr, 6)
	c.skip(4)
	if v := c.u8(); c.err == nil && v != 2 {
		return f.unsupportedf(h.addr+4, "object header version %d after \"OHDR\" (2 is read)", v)
	}
	flags := c.u8()
	if c.err != nil {
		return c.err
	}
	pre := int64(6)
	if flags&0x20 != 0 {
		pre += 16 // access, modification, change, birth times
	}
	if flags&0x10 != 0 {
		pre += 4 // attribute phase change values
	}
	sizeBytes := int64(1) << (flags & 3)
	c = f.cursorAt(h.addr, pre+sizeBytes)
	c.skip(int(pre))
	size := int64(c.uint(int(sizeBytes)))
	if c.err != nil {
		return c.err
	}
	if size > int64(len(f.data)) {
		return f.errf(h.addr, "an object header of %d bytes in a file of %d", size, len(f.data))
	}
	start := h.addr + pre + sizeBytes
	if err := f.checksum(h.addr, pre+sizeBytes+size+4); err != nil {
		return err
	}
	type block struct{ off, n int64 }
	blocks := []block{{start, size}}
	seen := map[int64]bool{}
	creationOrder := flags&0x04 != 0
	for len(blocks) > 0 {
		bl := blocks[0]
		blocks = blocks[1:]
		if seen[bl.off] {
			return f.errf(bl.off, "an object header continuation block read twice: a loop")
		}
		seen[bl.off] = true
		c := f.cursorAt(bl.off, bl.n)
		hdr := 4
		if creationOrder {
			hdr = 6
		}
		for c.err == nil && len(c.buf)-c.at >= hdr {
			typ := uint16(c.u8())
			sz := int(c.u16())
			mflags := c.u8()
			if creationOrder {
				c.u16()
			}
			off := c.pos()
			body := c.take(sz)
			if c.err != nil {
				return c.err
			}
			if typ == msgContinuation {
				cc := f.cursorOver(body, off)
				a, l := cc.address(), cc.length()
				if cc.err != nil {
					return cc.err
				}
				at := f.addr(a)
				if l < 8 || l > uint64(len(f.data)) {
					return f.errf(off, "a continuation block of %d bytes", l)
				}
				// "OCHK" + messages + checksum
				if err := f.checksum(at, int64(l)); err != nil {
					return err
				}
				if b, err := f.bytesAt(at, 4); err != nil || string(b) != "OCHK" {
					return f.errf(at, "want an \"OCHK\" continuation block")
				}
				blocks = append(blocks, block{at + 4, int64(l) - 8})
			}
			h.msgs = append(h.msgs, message{typ: typ, flags: mflags, body: body, off: off})
			if len(h.msgs) > maxMessages {
				return f.errf(off, "more than %d messages in one object header", maxMessages)
			}
		}
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

// find returns the first message of type typ, or nil.
func (h *header) find(typ uint16) *message {
	for i := range h.msgs {
		if h.msgs[i].typ == typ {
			return &h.msgs[i]
		}
	}
	return nil
}

// shared refuses a shared message (stored once, elsewhere, in the file):
// Keras' files do not use them.
func (f *File) shared(m *message) error {
	if m.flags&0x02 != 0 {
		return f.unsupportedf(m.off, "a shared object header message (type %d)", m.typ)
	}
	return nil
}
