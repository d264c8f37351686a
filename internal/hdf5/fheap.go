package hdf5

import "math/bits"

// fheap is a fractal heap (HDF5 file format 3.0, III.G): objects in
// direct blocks of a doubling table, found by heap IDs. Dense groups keep
// their link messages in one, dense attribute storage its attributes.
type fheap struct {
	f             *File
	addr          int64
	idLen         int
	filtered      bool
	maxManaged    uint32
	tableWidth    int
	startBlock    uint64
	maxDirect     uint64
	maxHeapBits   int
	root          uint64
	rootRows      int
	checksummed   bool // direct blocks carry a checksum
	offBytes      int  // bytes of a heap offset
	lenBytes      int  // bytes of an object length in a managed ID
	maxDirectRows int
	hugeTree      uint64 // v2 B-tree of huge objects
}

func (f *File) fractalHeap(addr int64) (*fheap, error) {
	n := 22 + 12*int64(f.lenSize) + 3*int64(f.offSize) // without the checksum
	c := f.cursorAt(addr, n)
	c.signature("FRHP")
	if v := c.u8(); c.err == nil && v != 0 {
		return nil, f.errf(addr+4, "fractal heap version %d: want 0", v)
	}
	h := &fheap{f: f, addr: addr}
	h.idLen = int(c.u16())
	filterLen := int(c.u16())
	flags := c.u8()
	h.maxManaged = c.u32()
	c.length() // next huge object ID
	h.hugeTree = c.address()
	c.length()  // free space in managed blocks
	c.address() // free space manager
	c.length()  // managed space
	c.length()  // allocated managed space
	c.length()  // direct block allocation iterator
	c.length()  // managed objects
	c.length()  // huge objects size
	c.length()  // huge objects count
	c.length()  // tiny objects size
	c.length()  // tiny objects count
	h.tableWidth = int(c.u16())
	h.startBlock = c.length()
	h.maxDirect = c.length()
	h.maxHeapBits = int(c.u16())
	c.u16() // starting rows of the root indirect block
	h.root = c.address()
	h.rootRows = int(c.u16())
	if c.err != nil {
		return nil, c.err
	}
	h.filtered = filterLen > 0
	h.checksummed = flags&0x02 != 0
	total := n + 4
	if h.filtered {
		total += int64(f.lenSize) + 4 + int64(filterLen)
	}
	if err := f.checksum(addr, total); err != nil {
		return nil, err
	}
	if h.filtered {
		return nil, f.unsupportedf(addr, "a fractal heap with I/O filters")
	}
	if h.tableWidth <= 0 || h.tableWidth > 1<<16 || h.startBlock == 0 || h.startBlock&(h.startBlock-1) != 0 ||
		h.maxDirect < h.startBlock || h.maxDirect&(h.maxDirect-1) != 0 || h.maxHeapBits <= 0 || h.maxHeapBits > 64 {
		return nil, f.errf(addr, "a fractal heap with a table width of %d, blocks of %d to %d bytes, %d bits of address: not a valid doubling table",
			h.tableWidth, h.startBlock, h.maxDirect, h.maxHeapBits)
	}
	h.offBytes = (h.maxHeapBits + 7) / 8
	// as H5HF__hdr_finish_init_phase1: the bytes of the largest direct
	// block offset, or of the largest managed object, whichever is fewer
	h.lenBytes = min((bits.Len64(h.maxDirect)-1+7)/8, (bits.Len64(uint64(h.maxManaged))-1)/8+1)
	h.maxDirectRows = bits.Len64(h.maxDirect) - bits.Len64(h.startBlock) + 2
	return h, nil
}

// object returns the bytes of the object a heap ID names.
func (h *fheap) object(id []byte, off int64) ([]byte, int64, error) {
	f := h.f
	if len(id) < 1 {
		return nil, 0, f.errf(off, "an empty heap ID")
	}
	switch (id[0] >> 4) & 3 {
	case 0: // managed
		c := f.cursorOver(id, off)
		c.skip(1)
		o := c.uint(h.offBytes)
		n := c.uint(h.lenBytes)
		if c.err != nil {
			return nil, 0, c.err
		}
		return h.managed(o, n, off)
	case 2: // tiny: the object is in the ID
		n := int(id[0]&0x0f) + 1
		if n > len(id)-1 {
			return nil, 0, f.errf(off, "a tiny heap object of %d bytes in an ID of %d", n, len(id))
		}
		return id[1 : 1+n], off + 1, nil
	case 1: // huge: in the file, found directly or through a B-tree
		return h.huge(id, off)
	default:
		return nil, 0, f.errf(off, "a heap ID of type 3")
	}
}

// huge returns a huge object: its address and length are in the ID when
// the ID is long enough, else in the huge objects' v2 B-tree (type 1).
func (h *fheap) huge(id []byte, off int64) ([]byte, int64, error) {
	f := h.f
	c := f.cursorOver(id, off)
	c.skip(1)
	var addr, n uint64
	if h.idLen >= 1+f.offSize+f.lenSize {
		addr, n = c.address(), c.length()
		if c.err != nil {
			return nil, 0, c.err
		}
	} else {
		key := c.uint(min(h.idLen-1, 8))
		if c.err != nil {
			return nil, 0, c.err
		}
		found := false
		err := f.btree2(f.addr(h.hugeTree), 1, func(r []byte, roff int64) error {
			rc := f.cursorOver(r, roff)
			a, l, k := rc.address(), rc.length(), rc.length()
			if rc.err == nil && k == key && !found {
				addr, n, found = a, l, true
			}
			return rc.err
		})
		if err != nil {
			return nil, 0, err
		}
		if !found {
			return nil, 0, f.errf(off, "huge heap object %d is not in the heap's B-tree", key)
		}
	}
	at := f.addr(addr)
	b, err := f.bytesAt(at, int64(min(n, uint64(len(f.data))+1)))
	return b, at, err
}

// rowSize is the size of the blocks of row r of the doubling table.
func (h *fheap) rowSize(r int) uint64 {
	if r <= 1 {
		return h.startBlock
	}
	return h.startBlock << uint(r-1)
}

// managed finds n bytes at heap offset o.
func (h *fheap) managed(o, n uint64, off int64) ([]byte, int64, error) {
	f := h.f
	if h.rootRows == 0 { // the root is one direct block
		return h.direct(f.addr(h.root), h.startBlock, 0, o, n)
	}
	block, rows := f.addr(h.root), h.rootRows
	base := uint64(0)
	for depth := 0; depth < 64; depth++ {
		// find the row and column holding o, below base
		rel := o - base
		var r int
		var rowStart uint64
		for r = 0; r < rows; r++ {
			size := h.rowSize(r) * uint64(h.tableWidth)
			if rel < rowStart+size {
				break
			}
			rowStart += size
		}
		if r == rows {
			return nil, 0, f.errf(off, "heap offset %d lies outside the heap's blocks", o)
		}
		col := int((rel - rowStart) / h.rowSize(r))
		childBase := base + rowStart + uint64(col)*h.rowSize(r)
		// read the child's address from the indirect block
		direct := min(rows, h.maxDirectRows)
		hdr := int64(5 + f.offSize + h.offBytes)
		entry := int64(0)
		if r < direct {
			entry = int64(r*h.tableWidth + col)
		} else {
			entry = int64(direct*h.tableWidth) + int64((r-direct)*h.tableWidth+col)
		}
		c := f.cursorAt(block, hdr+(entry+1)*int64(f.offSize))
		c.signature("FHIB")
		c.skip(int(hdr) - 4 + int(entry)*f.offSize)
		child := c.address()
		if c.err != nil {
			return nil, 0, c.err
		}
		if f.undefined(child) {
			return nil, 0, f.errf(off, "heap offset %d is in a block never written", o)
		}
		if r < h.maxDirectRows {
			return h.direct(f.addr(child), h.rowSize(r), childBase, o, n)
		}
		// an indirect block of rowSize(r) bytes' worth of rows
		block, base = f.addr(child), childBase
		rows = bits.Len64(h.rowSize(r)) - bits.Len64(h.startBlock*uint64(h.tableWidth)) + 1
		if rows <= 0 {
			return nil, 0, f.errf(block, "an indirect block with %d rows", rows)
		}
	}
	return nil, 0, f.errf(off, "fractal heap blocks nested too deep")
}

// direct returns n bytes at heap offset o of the direct block at addr,
// which holds heap offsets [base, base+size).
func (h *fheap) direct(addr int64, size, base, o, n uint64) ([]byte, int64, error) {
	f := h.f
	if size > uint64(len(f.data)) {
		return nil, 0, f.errf(addr, "a direct block of %d bytes in a file of %d", size, len(f.data))
	}
	c := f.cursorAt(addr, 4)
	c.signature("FHDB")
	if c.err != nil {
		return nil, 0, c.err
	}
	if h.checksummed {
		// the checksum covers the block with its checksum field zeroed
		b, err := f.bytesAt(addr, int64(size))
		if err != nil {
			return nil, 0, err
		}
		at := 5 + f.offSize + h.offBytes
		if len(b) < at+4 {
			return nil, 0, f.errf(addr, "a direct block of %d bytes", size)
		}
		tmp := append([]byte(nil), b...)
		stored := uint32(tmp[at]) | uint32(tmp[at+1])<<8 | uint32(tmp[at+2])<<16 | uint32(tmp[at+3])<<24
		tmp[at], tmp[at+1], tmp[at+2], tmp[at+3] = 0, 0, 0, 0
		if got := lookup3(tmp, 0); got != stored {
			return nil, 0, f.errf(addr, "direct block checksum %08x, stored %08x: the block is corrupt", got, stored)
		}
	}
	if o < base || n > size || o-base > size-n {
		return nil, 0, f.errf(addr, "a heap object of %d bytes at offset %d outside its direct block [%d, %d)", n, o, base, base+size)
	}
	at := addr + int64(o-base)
	b, err := f.bytesAt(at, int64(n))
	return b, at, err
}

// btree2 walks the version 2 B-tree at addr (records of type typ) and
// calls rec for every record.
func (f *File) btree2(addr int64, typ uint8, rec func(r []byte, off int64) error) error {
	n := int64(4+1+1+4+2+2+1+1) + int64(f.offSize) + 2 + int64(f.lenSize)
	c := f.cursorAt(addr, n)
	c.signature("BTHD")
	if v := c.u8(); c.err == nil && v != 0 {
		return f.errf(addr+4, "v2 B-tree version %d: want 0", v)
	}
	if t := c.u8(); c.err == nil && t != typ {
		return f.errf(addr+5, "v2 B-tree of type %d: want %d", t, typ)
	}
	nodeSize := int64(c.u32())
	recSize := int64(c.u16())
	depth := int(c.u16())
	c.skip(2)
	root := c.address()
	rootN := int64(c.u16())
	c.length()
	if c.err != nil {
		return c.err
	}
	if err := f.checksum(addr, n+4); err != nil {
		return err
	}
	if f.undefined(root) {
		return nil
	}
	if recSize <= 0 || nodeSize <= 10+recSize || nodeSize > int64(len(f.data)) || depth > 64 {
		return f.errf(addr, "a v2 B-tree with nodes of %d bytes, records of %d, depth %d", nodeSize, recSize, depth)
	}
	// field sizes, as H5B2__hdr_init computes them
	encSize := func(v uint64) int { return bits.Len64(v)/8 + 1 }
	maxRec := make([]uint64, depth+1)
	cumMax := make([]uint64, depth+1)
	cumSize := make([]int, depth+1)
	maxRec[0] = uint64((nodeSize - 10) / recSize)
	cumMax[0] = maxRec[0]
	maxRecSize := encSize(maxRec[0])
	ptrSize := func(d int) int64 {
		p := int64(f.offSize + maxRecSize)
		if d > 1 {
			p += int64(cumSize[d-1])
		}
		return p
	}
	for d := 1; d <= depth; d++ {
		m := (nodeSize - (10 + ptrSize(d))) / (recSize + ptrSize(d))
		if m <= 0 {
			return f.errf(addr, "a v2 B-tree whose internal nodes hold no records")
		}
		maxRec[d] = uint64(m)
		cumMax[d] = (maxRec[d]+1)*cumMax[d-1] + maxRec[d]
		cumSize[d] = encSize(cumMax[d])
	}
	seen := map[int64]bool{}
	var walk func(at int64, d int, nrec int64) error
	walk = func(at int64, d int, nrec int64) error {
		if seen[at] {
			return f.errf(at, "a v2 B-tree node reached twice: a loop")
		}
		seen[at] = true
		if nrec < 0 || uint64(nrec) > maxRec[d] {
			return f.errf(at, "a v2 B-tree node of %d records (at most %d fit)", nrec, maxRec[d])
		}
		sig := "BTLF"
		if d > 0 {
			sig = "BTIN"
		}
		size := 6 + nrec*recSize
		if d > 0 {
			size += (nrec + 1) * ptrSize(d)
		}
		c := f.cursorAt(at, size+4)
		c.signature(sig)
		c.skip(2)
		if c.err != nil {
			return c.err
		}
		if err := f.checksum(at, size+4); err != nil {
			return err
		}
		recs := make([][]byte, nrec)
		offs := make([]int64, nrec)
		for i := range recs {
			offs[i] = c.pos()
			recs[i] = c.take(int(recSize))
		}
		type child struct {
			addr int64
			n    int64
		}
		var children []child
		if d > 0 {
			for i := int64(0); i <= nrec; i++ {
				a := c.address()
				cn := c.uint(maxRecSize)
				if d > 1 {
					c.uint(cumSize[d-1])
				}
				children = append(children, child{f.addr(a), int64(min(cn, 1<<40))})
			}
		}
		if c.err != nil {
			return c.err
		}
		for i := range recs {
			if d > 0 {
				if err := walk(children[i].addr, d-1, children[i].n); err != nil {
					return err
				}
			}
			if err := rec(recs[i], offs[i]); err != nil {
				return err
			}
		}
		if d > 0 {
			return walk(children[nrec].addr, d-1, children[nrec].n)
		}
		return nil
	}
	return walk(f.addr(root), depth, rootN)
}
