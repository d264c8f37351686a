package data

import (
	"github.com/headroom-ml/headroom/tensor"
)

// Releaser is implemented by elements that hold pipeline memory. Stages
// that drop an element (Filter, Skip, Take, Shard, and every buffering stage
// on Close) release it; Map releases its input after the function returns.
// Record, Sample and Batch implement it; a user element type may too.
type Releaser interface{ Release() }

// Record is one raw record read from a file: the bytes of a fixed-length
// record, a TFRecord's payload, or a cached element. Data lives in a pooled
// Block and is valid until the record is released.
type Record struct {
	Data   []byte
	File   string // the file it came from
	Offset int64  // byte offset of the record (its header, for TFRecord) in File
	mem    *Block
}

// Release returns the record's memory to its pool.
func (r Record) Release() { r.mem.Release() }

// Retain keeps the record's memory past the next Release.
func (r Record) Retain() { r.mem.Retain() }

// Block returns the block holding Data (nil for records not made by a
// pipeline), for building a Sample that views Data without copying.
func (r Record) Block() *Block { return r.mem }

// Sample is one training example: features X and a target Y (Y is the zero
// Tensor when there is none). The tensors usually view pooled Blocks that
// the Sample holds a reference to.
type Sample struct {
	X, Y tensor.Tensor
	mem  [2]*Block
}

// NewSample returns a sample of x and y that holds a reference to each of
// blocks (at most two; nil entries are ignored): the memory x and y view.
// The caller keeps its own references.
func NewSample(x, y tensor.Tensor, blocks ...*Block) Sample {
	s := Sample{X: x, Y: y}
	if len(blocks) > len(s.mem) {
		panic("data: NewSample holds at most two blocks")
	}
	for i, b := range blocks {
		b.Retain()
		s.mem[i] = b
	}
	return s
}

// Release drops the sample's references to its memory.
func (s Sample) Release() { s.mem[0].Release(); s.mem[1].Release() }

// Retain adds a reference to the sample's memory.
func (s Sample) Retain() { s.mem[0].Retain(); s.mem[1].Retain() }

// Batch is what a trainer consumes: Size samples stacked on a new leading
// axis. X is [Size, x...] and Y is [Size, y...] (Y is the zero Tensor when the
// samples had no target). A batch handed out by an Iterator is valid until
// the next call to Next; call Retain to keep it longer, then Release.
type Batch struct {
	X, Y tensor.Tensor
	Size int
	mem  [2]*Block
}

// Release drops the batch's references to its memory.
func (b Batch) Release() { b.mem[0].Release(); b.mem[1].Release() }

// Retain adds a reference to the batch's memory.
func (b Batch) Retain() { b.mem[0].Retain(); b.mem[1].Retain() }

// Bytes returns the bytes of X and Y.
func (b Batch) Bytes() int64 { return int64(len(b.X.Bytes()) + len(b.Y.Bytes())) }

// elemOps are the per-type operations stages need on elements, chosen once
// per stage so that calling them does not box the element.
type elemOps[T any] struct {
	release func(T)
	retain  func(T)
	size    func(T) int64
	// held is the memory an element holds: its blocks' whole size classes
	// (a 4-byte label takes a 64-byte block), or size for elements
	// without blocks. Stages that gather elements bound it, not size.
	held func(T) int64
}

// blockBytes returns the bytes b holds, or n when b is nil (memory that is
// not the pipeline's).
func blockBytes(b *Block, n int) int64 {
	if b == nil {
		return int64(n)
	}
	return int64(len(b.buf))
}

func opsOf[T any]() elemOps[T] {
	var z T
	var o elemOps[T]
	switch any(z).(type) {
	case Record:
		o.release = any(Record.Release).(func(T))
		o.retain = any(Record.Retain).(func(T))
		o.size = any(func(r Record) int64 { return int64(len(r.Data)) }).(func(T) int64)
		o.held = any(func(r Record) int64 { return blockBytes(r.mem, len(r.Data)) }).(func(T) int64)
	case Sample:
		o.release = any(Sample.Release).(func(T))
		o.retain = any(Sample.Retain).(func(T))
		o.size = any(func(s Sample) int64 { return int64(len(s.X.Bytes()) + len(s.Y.Bytes())) }).(func(T) int64)
		o.held = any(func(s Sample) int64 {
			return blockBytes(s.mem[0], len(s.X.Bytes())) + blockBytes(s.mem[1], len(s.Y.Bytes()))
		}).(func(T) int64)
	case Batch:
		o.release = any(Batch.Release).(func(T))
		o.retain = any(Batch.Retain).(func(T))
		o.size = any(Batch.Bytes).(func(T) int64)
		o.held = any(func(b Batch) int64 {
			return blockBytes(b.mem[0], len(b.X.Bytes())) + blockBytes(b.mem[1], len(b.Y.Bytes()))
		}).(func(T) int64)
	case tensor.Tensor:
		o.size = any(func(t tensor.Tensor) int64 { return int64(len(t.Bytes())) }).(func(T) int64)
	case []byte:
		o.size = any(func(b []byte) int64 { return int64(len(b)) }).(func(T) int64)
	case string:
		o.size = any(func(s string) int64 { return int64(len(s)) }).(func(T) int64)
	default:
		if _, ok := any(&z).(Releaser); ok {
			o.release = func(x T) { any(&x).(Releaser).Release() }
		}
		if _, ok := any(&z).(interface{ Retain() }); ok {
			o.retain = func(x T) { any(&x).(interface{ Retain() }).Retain() }
		}
		if _, ok := any(&z).(interface{ Bytes() int64 }); ok {
			o.size = func(x T) int64 { return any(&x).(interface{ Bytes() int64 }).Bytes() }
		}
	}
	if o.release == nil {
		o.release = func(T) {}
	}
	if o.retain == nil {
		o.retain = func(T) {}
	}
	if o.size == nil {
		o.size = func(T) int64 { return 0 }
	}
	if o.held == nil {
		o.held = o.size
	}
	return o
}
