package data

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// Cache replays the elements of the first complete pass through d on later
// repetitions (tf.data's cache). With path "" it keeps them in memory: they
// stay charged to the stages that made them, and a dataset that would leave
// less than the pipeline's reserve free fails with an error wrapping
// *mem.OOMError instead of growing (use a file). With a path it writes
// the elements (Record, Sample or Batch) to path as checksummed TFRecord
// frames, renamed into place only when the pass completes, and any later
// pass (of this or another program) reads the file instead of d. A pass
// abandoned part way keeps no cache, as in tf.data.
func (d Dataset[T]) Cache(path string) Dataset[T] {
	n := &node{name: "cache(memory)", kind: kindSync}
	if path != "" {
		n.name = fmt.Sprintf("cache(%s)", baseName(path))
	}
	return Dataset[T]{n: n, open: func(p *pipeline, st *stage) (iterator[T], error) {
		if path != "" {
			return openFileCache(d, p, st, n, path)
		}
		return openMemCache(d, p, st, n)
	}}
}

// memCache is the in-memory cache of one pass, shared by its repetitions.
type memCache[T any] struct {
	mu       sync.Mutex
	elems    []T
	complete bool
	ops      elemOps[T]
}

func openMemCache[T any](d Dataset[T], p *pipeline, st *stage, n *node) (iterator[T], error) {
	p.mu.Lock()
	if p.caches == nil {
		p.caches = make(map[*node]any)
	}
	c, _ := p.caches[n].(*memCache[T])
	if c == nil {
		c = &memCache[T]{ops: opsOf[T]()}
		p.caches[n] = c
		p.atEnd = append(p.atEnd, c.drop)
	}
	p.mu.Unlock()
	c.mu.Lock()
	complete := c.complete
	c.mu.Unlock()
	if complete {
		return &memReplay[T]{c: c}, nil
	}
	c.drop() // a partial fill from an abandoned repetition
	up, ust, err := d.openIn(p)
	if err != nil {
		return nil, err
	}
	st.up = ust
	return &memFill[T]{c: c, up: up, p: p, name: n.name}, nil
}

func (c *memCache[T]) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.elems {
		c.ops.release(x)
	}
	c.elems, c.complete = nil, false
}

type memFill[T any] struct {
	c    *memCache[T]
	up   iterator[T]
	p    *pipeline
	name string
}

func (f *memFill[T]) next(ctx context.Context) (T, error) {
	x, err := f.up.next(ctx)
	if err == io.EOF {
		f.c.mu.Lock()
		f.c.complete = true
		f.c.mu.Unlock()
	}
	if err != nil {
		return x, err
	}
	if a := f.p.arena; a.budget > 0 && a.available() < a.reserve()+f.c.ops.size(x) {
		f.c.ops.release(x)
		return x, fmt.Errorf("data: %s: %d elements fill the budget: %w", f.name, len(f.c.elems),
			&mem.OOMError{Ledger: f.p.ledger.Name(), Category: mem.Input, Owner: f.name,
				Request: f.c.ops.size(x), Budget: a.budget, Live: f.p.ledger.Live(), LargestFree: -1,
				Remedies: []string{"cache to a file: Cache(path)"}})
	}
	f.c.ops.retain(x) // one reference for the cache, one for the consumer
	f.c.mu.Lock()
	f.c.elems = append(f.c.elems, x)
	f.c.mu.Unlock()
	return x, nil
}

func (f *memFill[T]) close() { f.up.close() }

type memReplay[T any] struct {
	c *memCache[T]
	i int
}

func (r *memReplay[T]) next(ctx context.Context) (T, error) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if r.i >= len(r.c.elems) {
		var zero T
		return zero, io.EOF
	}
	x := r.c.elems[r.i]
	r.i++
	r.c.ops.retain(x)
	return x, nil
}

func (r *memReplay[T]) close() {}

func openFileCache[T any](d Dataset[T], p *pipeline, st *stage, n *node, path string) (iterator[T], error) {
	var z T
	switch any(z).(type) {
	case Record, Sample, Batch:
	default:
		return nil, fmt.Errorf("data: %s: a file cache holds Record, Sample or Batch elements, not %T", n.name, z)
	}
	pool := p.arena.pool(n.name)
	if _, err := os.Stat(path); err == nil {
		fr, err := openFile(p.ctx, pool, path, 0, false, true)
		if err != nil {
			return nil, err
		}
		return &fileReplay[T]{p: p, st: st, fr: fr, pool: pool, path: path}, nil
	}
	up, ust, err := d.openIn(p)
	if err != nil {
		return nil, err
	}
	st.up = ust
	// The cache file appears at path only once complete (package
	// atomicfile), so a later run never replays half of it.
	f, err := atomicfile.Create(atomicfile.OS, path, 0o666)
	if err != nil {
		up.close()
		return nil, fmt.Errorf("data: %s: %w", n.name, err)
	}
	const bufSize = 256 << 10
	if err := p.ledger.Charge(mem.Input, n.name, bufSize); err != nil {
		f.Abort()
		up.close()
		return nil, fmt.Errorf("data: %s: %w", n.name, err)
	}
	return &fileFill[T]{p: p, up: up, f: f, w: bufio.NewWriterSize(f, bufSize), bufSize: bufSize,
		path: path, name: n.name}, nil
}

type fileFill[T any] struct {
	p        *pipeline
	up       iterator[T]
	f        *atomicfile.Pending
	w        *bufio.Writer
	bufSize  int64
	path     string
	name     string
	scratch  []byte
	err      error
	complete bool
}

func (f *fileFill[T]) next(ctx context.Context) (T, error) {
	x, err := f.up.next(ctx)
	if err == io.EOF && f.err == nil {
		f.complete = true
	}
	if err != nil {
		return x, err
	}
	if f.err == nil {
		f.scratch = encodeElem(f.scratch[:0], x)
		var h [12]byte
		frame := AppendTFRecord(h[:0:0], f.scratch)
		if _, f.err = f.w.Write(frame); f.err != nil {
			return x, fmt.Errorf("data: %s: %w", f.name, f.err)
		}
	}
	return x, nil
}

func (f *fileFill[T]) close() {
	f.up.close()
	// A cache that cannot be completed is dropped: the next run fills it
	// again.
	if f.complete && f.w.Flush() == nil {
		f.f.Commit()
	} else {
		f.f.Abort()
	}
	f.p.ledger.Release(mem.Input, f.name, f.bufSize)
}

type fileReplay[T any] struct {
	p    *pipeline
	st   *stage
	fr   *fileReader
	pool *pool
	path string
}

func (r *fileReplay[T]) next(ctx context.Context) (T, error) {
	var zero T
	rec, _, err := readTFRecord(ctx, r.fr, r.pool, r.path, 0)
	if err != nil {
		return zero, err
	}
	x, err := decodeElem[T](rec)
	rec.Release()
	return x, err
}

func (r *fileReplay[T]) close() { r.fr.close() }

// A cached Sample or Batch is a header, then X's bytes and Y's bytes, each
// starting at a multiple of 8 so that decoding can view them in place:
//
//	u8 kind (1 sample, 2 batch) | u8 x dtype | u8 x rank | u8 y dtype | u8 y rank | 3 pad
//	u32 x dims... | u32 y dims... | pad to 8 | x bytes | pad to 8 | y bytes
func encodeElem[T any](dst []byte, x T) []byte {
	var xt, yt tensor.Tensor
	var kind byte
	switch v := any(x).(type) {
	case Record:
		return append(dst, v.Data...)
	case Sample:
		xt, yt, kind = v.X, v.Y, 1
	case Batch:
		xt, yt, kind = v.X, v.Y, 2
	}
	dst = append(dst, kind, byte(xt.DType()), byte(xt.Shape().Rank()), byte(yt.DType()), byte(yt.Shape().Rank()), 0, 0, 0)
	for _, t := range []tensor.Tensor{xt, yt} {
		for _, d := range t.Shape() {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(d))
		}
	}
	for _, t := range []tensor.Tensor{xt, yt} {
		for len(dst)%8 != 0 {
			dst = append(dst, 0)
		}
		dst = append(dst, t.Bytes()...)
	}
	return dst
}

func decodeElem[T any](rec Record) (T, error) {
	var zero T
	if _, ok := any(zero).(Record); ok {
		rec.Retain()
		return any(rec).(T), nil
	}
	b := rec.Data
	bad := func(msg string) (T, error) {
		return zero, formatErr("cache", rec.File, rec.Offset, nil, "%s", msg)
	}
	if len(b) < 8 {
		return bad("short element header")
	}
	kind, ranks := b[0], [2]int{int(b[2]), int(b[4])}
	dts := [2]tensor.DType{tensor.DType(b[1]), tensor.DType(b[3])}
	off := 8
	var shapes [2]tensor.Shape
	for i := range 2 {
		if ranks[i] > tensor.MaxRank || off+4*ranks[i] > len(b) {
			return bad("bad shape")
		}
		shapes[i] = make(tensor.Shape, ranks[i])
		for j := range shapes[i] {
			shapes[i][j] = int(binary.LittleEndian.Uint32(b[off:]))
			off += 4
		}
	}
	var ts [2]tensor.Tensor
	for i := range 2 {
		off = (off + 7) &^ 7
		if !dts[i].Valid() {
			continue
		}
		n := shapes[i].Size() * dts[i].Size()
		if n < 0 || off+n > len(b) {
			return bad("element bytes past the record")
		}
		t, err := tensor.FromBytes(dts[i], shapes[i], b[off:off+n:off+n])
		if err != nil {
			return bad(err.Error())
		}
		ts[i] = t
		off += n
	}
	switch any(zero).(type) {
	case Sample:
		if kind == 1 {
			return any(NewSample(ts[0], ts[1], rec.mem)).(T), nil
		}
	case Batch:
		if kind == 2 && ts[0].Shape().Rank() > 0 {
			rec.Retain()
			return any(Batch{X: ts[0], Y: ts[1], Size: ts[0].Shape()[0], mem: [2]*Block{rec.mem}}).(T), nil
		}
	}
	return bad("element of another kind")
}
