package hdf5

import (
	"sort"
	"strings"
)

// Object is a group or a dataset of a file.
type Object struct {
	f    *File
	path string // "/" for the root, "/a/b" below it
	addr int64  // absolute offset of the object header
	h    *header
}

// Group is an object that names other objects.
type Group struct{ Object }

// Path returns the object's path in the file ("/" for the root group).
func (o *Object) Path() string { return o.path }

// Offset returns the file offset of the object's header.
func (o *Object) Offset() int64 { return o.addr }

// Root returns the root group.
func (f *File) Root() (*Group, error) {
	h, err := f.header(f.root)
	if err != nil {
		return nil, err
	}
	g := &Group{Object{f: f, path: "/", addr: f.root, h: h}}
	if !g.isGroup() {
		return nil, f.errf(f.root, "the root object is not a group")
	}
	return g, nil
}

func (o *Object) isGroup() bool {
	return o.h.find(msgSymbolTable) != nil || o.h.find(msgLinkInfo) != nil || o.h.find(msgLink) != nil
}

func (o *Object) isDataset() bool { return o.h.find(msgLayout) != nil }

// Link is one member of a group: a name and the object it links to.
type Link struct {
	Name string
	addr int64 // absolute offset of the object header
}

// maxLinks bounds the members of one group.
const maxLinks = 1 << 22

// Links returns the group's members sorted by name (HDF5's and h5py's
// iteration order).
func (g *Group) Links() ([]Link, error) {
	var links []Link
	var err error
	switch {
	case g.h.find(msgSymbolTable) != nil:
		links, err = g.symbolTable(g.h.find(msgSymbolTable))
	case g.h.find(msgLinkInfo) != nil && g.denseLinks():
		links, err = g.dense(g.h.find(msgLinkInfo))
	default:
		for i := range g.h.msgs {
			m := &g.h.msgs[i]
			if m.typ != msgLink {
				continue
			}
			l, ok, err := g.f.link(m.body, m.off)
			if err != nil {
				return nil, err
			}
			if ok {
				links = append(links, l)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(links, func(i, j int) bool { return links[i].Name < links[j].Name })
	for i := 1; i < len(links); i++ {
		if links[i].Name == links[i-1].Name {
			return nil, g.f.errf(g.addr, "group %s names %q twice", g.path, links[i].Name)
		}
	}
	return links, nil
}

// denseLinks reports whether the link info message points at a fractal
// heap (dense storage).
func (g *Group) denseLinks() bool {
	m := g.h.find(msgLinkInfo)
	c := g.f.cursorOver(m.body, m.off)
	c.skip(1)
	flags := c.u8()
	if flags&1 != 0 {
		c.skip(8)
	}
	heap := c.address()
	return c.err == nil && !g.f.undefined(heap)
}

// link decodes a link message; ok is false for a link that is not hard
// (soft and external links are refused by the caller when followed).
func (f *File) link(b []byte, off int64) (Link, bool, error) {
	c := f.cursorOver(b, off)
	if v := c.u8(); c.err == nil && v != 1 {
		return Link{}, false, f.errf(off, "link message version %d: want 1", v)
	}
	flags := c.u8()
	typ := uint8(0)
	if flags&0x08 != 0 {
		typ = c.u8()
	}
	if flags&0x04 != 0 {
		c.u64() // creation order
	}
	if flags&0x10 != 0 {
		c.u8() // character set
	}
	n := int(c.uint(1 << (flags & 3)))
	name := string(c.take(n))
	if c.err != nil {
		return Link{}, false, c.err
	}
	if n == 0 {
		return Link{}, false, f.errf(off, "a link with an empty name")
	}
	if typ != 0 {
		return Link{Name: name, addr: -1}, true, nil // soft or external: refused when followed
	}
	a := c.address()
	if c.err != nil {
		return Link{}, false, c.err
	}
	return Link{Name: name, addr: f.addr(a)}, true, nil
}

// symbolTable reads a group stored as a version 1 B-tree of symbol table
// nodes whose names are in a local heap.
func (g *Group) symbolTable(m *message) ([]Link, error) {
	f := g.f
	if err := f.shared(m); err != nil {
		return nil, err
	}
	c := f.cursorOver(m.body, m.off)
	btree, heap := c.address(), c.address()
	if c.err != nil {
		return nil, c.err
	}
	names, namesOff, err := f.localHeap(f.addr(heap))
	if err != nil {
		return nil, err
	}
	var links []Link
	err = f.btree1(f.addr(btree), 0, func(child int64) error {
		return f.symbolNode(child, names, namesOff, &links)
	})
	return links, err
}

// localHeap returns the data segment of the local heap at addr.
func (f *File) localHeap(addr int64) ([]byte, int64, error) {
	c := f.cursorAt(addr, int64(8+2*f.lenSize+f.offSize))
	c.signature("HEAP")
	if v := c.u8(); c.err == nil && v != 0 {
		return nil, 0, f.errf(addr+4, "local heap version %d: want 0", v)
	}
	c.skip(3)
	size := c.length()
	c.length() // free list
	data := c.address()
	if c.err != nil {
		return nil, 0, c.err
	}
	at := f.addr(data)
	b, err := f.bytesAt(at, int64(min(size, uint64(len(f.data))+1)))
	return b, at, err
}

// symbolNode reads a symbol table node ("SNOD") into links.
func (f *File) symbolNode(addr int64, names []byte, namesOff int64, links *[]Link) error {
	c := f.cursorAt(addr, 8)
	c.signature("SNOD")
	if v := c.u8(); c.err == nil && v != 1 {
		return f.errf(addr+4, "symbol table node version %d: want 1", v)
	}
	c.skip(1)
	n := int64(c.u16())
	if c.err != nil {
		return c.err
	}
	entry := int64(2*f.offSize + 24)
	c = f.cursorAt(addr+8, n*entry)
	for i := int64(0); i < n && c.err == nil; i++ {
		nameOff := c.address()
		obj := c.address()
		c.skip(24) // cache type, reserved, scratch pad
		if c.err != nil {
			break
		}
		if nameOff >= uint64(len(names)) {
			return f.errf(c.pos()-entry, "a symbol's name at offset %d of a local heap of %d bytes", nameOff, len(names))
		}
		s := names[nameOff:]
		end := strings.IndexByte(string(s), 0)
		if end < 0 {
			return f.errf(namesOff+int64(nameOff), "a name without its terminating zero in the local heap")
		}
		if len(*links) >= maxLinks {
			return f.errf(addr, "more than %d links in one group", maxLinks)
		}
		*links = append(*links, Link{Name: string(s[:end]), addr: f.addr(obj)})
	}
	return c.err
}

// btree1 walks the version 1 B-tree at addr whose nodes are of type typ
// (0: group nodes, 1: raw data chunks), calling leaf for each child of a
// leaf node; for chunk trees, key holds each child's key.
func (f *File) btree1(addr int64, typ uint8, leaf func(child int64) error) error {
	return f.btree1Keys(addr, typ, 0, func(child int64, _ []byte) error { return leaf(child) })
}

// btree1Keys walks a version 1 B-tree, handing each leaf child with the
// key before it (keySize bytes; for group trees keys are not read).
func (f *File) btree1Keys(addr int64, typ uint8, keySize int, leaf func(child int64, key []byte) error) error {
	if typ == 0 {
		keySize = f.lenSize
	}
	seen := map[int64]bool{}
	var walk func(addr int64, depth int) error
	walk = func(addr int64, depth int) error {
		if seen[addr] {
			return f.errf(addr, "a B-tree node reached twice: a loop")
		}
		seen[addr] = true
		if depth > 64 {
			return f.errf(addr, "a B-tree deeper than 64 levels")
		}
		c := f.cursorAt(addr, int64(8+2*f.offSize))
		c.signature("TREE")
		if t := c.u8(); c.err == nil && t != typ {
			return f.errf(addr+4, "B-tree node type %d: want %d", t, typ)
		}
		level := c.u8()
		n := int64(c.u16())
		if c.err != nil {
			return c.err
		}
		body := int64(keySize)*(n+1) + int64(f.offSize)*n
		c = f.cursorAt(addr+int64(8+2*f.offSize), body)
		for i := int64(0); i < n && c.err == nil; i++ {
			key := c.take(keySize)
			child := c.address()
			if c.err != nil {
				break
			}
			var err error
			if level > 0 {
				err = walk(f.addr(child), depth+1)
			} else {
				err = leaf(f.addr(child), key)
			}
			if err != nil {
				return err
			}
		}
		return c.err
	}
	return walk(addr, 0)
}

// dense reads a group's links from its fractal heap, through the name
// index (a version 2 B-tree of type 5).
func (g *Group) dense(m *message) ([]Link, error) {
	f := g.f
	c := f.cursorOver(m.body, m.off)
	if v := c.u8(); c.err == nil && v != 0 {
		return nil, f.errf(m.off, "link info message version %d: want 0", v)
	}
	flags := c.u8()
	if flags&1 != 0 {
		c.u64()
	}
	heapAddr, index := c.address(), c.address()
	if c.err != nil {
		return nil, c.err
	}
	heap, err := f.fractalHeap(f.addr(heapAddr))
	if err != nil {
		return nil, err
	}
	var links []Link
	err = f.btree2(f.addr(index), 5, func(rec []byte, off int64) error {
		if len(rec) < 4 {
			return f.errf(off, "a link name record of %d bytes", len(rec))
		}
		obj, objOff, err := heap.object(rec[4:], off+4)
		if err != nil {
			return err
		}
		l, ok, err := f.link(obj, objOff)
		if err != nil {
			return err
		}
		if ok {
			if len(links) >= maxLinks {
				return f.errf(off, "more than %d links in one group", maxLinks)
			}
			links = append(links, l)
		}
		return nil
	})
	return links, err
}

// member returns the object a link of g names.
func (g *Group) member(l Link) (*Object, error) {
	if l.addr < 0 {
		return nil, g.f.unsupportedf(g.addr, "%s/%s is a soft or external link (hard links are read, as Keras reads them)", strings.TrimSuffix(g.path, "/"), l.Name)
	}
	h, err := g.f.header(l.addr)
	if err != nil {
		return nil, err
	}
	p := strings.TrimSuffix(g.path, "/") + "/" + l.Name
	return &Object{f: g.f, path: p, addr: l.addr, h: h}, nil
}

// Get returns the member called name (a path relative to g: "a/b"), as a
// *Group or a *Dataset.
func (g *Group) Get(name string) (any, error) {
	cur := g
	parts := strings.Split(strings.Trim(name, "/"), "/")
	for i, part := range parts {
		links, err := cur.Links()
		if err != nil {
			return nil, err
		}
		k := sort.Search(len(links), func(j int) bool { return links[j].Name >= part })
		if k == len(links) || links[k].Name != part {
			return nil, &NotFoundError{File: g.f.name, Path: strings.TrimSuffix(cur.path, "/") + "/" + part}
		}
		o, err := cur.member(links[k])
		if err != nil {
			return nil, err
		}
		if i == len(parts)-1 {
			return o.typed()
		}
		if !o.isGroup() {
			return nil, g.f.errf(o.addr, "%s is not a group", o.path)
		}
		cur = &Group{*o}
	}
	return cur, nil
}

// NotFoundError is a path that names nothing in the file.
type NotFoundError struct{ File, Path string }

func (e *NotFoundError) Error() string { return "hdf5: " + e.File + ": no object " + e.Path }

func (o *Object) typed() (any, error) {
	switch {
	case o.isGroup():
		return &Group{*o}, nil
	case o.isDataset():
		return o.dataset()
	}
	return nil, o.f.unsupportedf(o.addr, "%s is neither a group nor a dataset (a committed datatype?)", o.path)
}

// Group returns the member group called name.
func (g *Group) Group(name string) (*Group, error) {
	v, err := g.Get(name)
	if err != nil {
		return nil, err
	}
	sub, ok := v.(*Group)
	if !ok {
		return nil, g.f.errf(g.addr, "%s/%s is a dataset, not a group", strings.TrimSuffix(g.path, "/"), name)
	}
	return sub, nil
}

// Dataset returns the member dataset called name.
func (g *Group) Dataset(name string) (*Dataset, error) {
	v, err := g.Get(name)
	if err != nil {
		return nil, err
	}
	d, ok := v.(*Dataset)
	if !ok {
		return nil, g.f.errf(g.addr, "%s/%s is a group, not a dataset", strings.TrimSuffix(g.path, "/"), name)
	}
	return d, nil
}

// Members returns the group's members in name order, each a *Group or a
// *Dataset.
func (g *Group) Members() ([]any, error) {
	links, err := g.Links()
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(links))
	for _, l := range links {
		o, err := g.member(l)
		if err != nil {
			return nil, err
		}
		v, err := o.typed()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Walk calls fn for every dataset under g, depth first in name order. A
// group that contains itself (a loop of hard links) is an error.
func (g *Group) Walk(fn func(d *Dataset) error) error {
	return g.walk(fn, map[int64]bool{}, 0)
}

func (g *Group) walk(fn func(d *Dataset) error, above map[int64]bool, depth int) error {
	if above[g.addr] {
		return g.f.errf(g.addr, "group %s contains itself: a loop in the groups", g.path)
	}
	if depth > 256 {
		return g.f.errf(g.addr, "groups nested deeper than 256 at %s", g.path)
	}
	above[g.addr] = true
	defer delete(above, g.addr)
	members, err := g.Members()
	if err != nil {
		return err
	}
	for _, m := range members {
		switch v := m.(type) {
		case *Group:
			if err := v.walk(fn, above, depth+1); err != nil {
				return err
			}
		case *Dataset:
			if err := fn(v); err != nil {
				return err
			}
		}
	}
	return nil
}
