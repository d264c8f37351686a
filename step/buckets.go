package step

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
)

// buckets groups the gradients of a data-parallel step, in the order
// backward produces them, into buckets of about limit bytes, and starts
// each bucket's all-reduce as soon as it is full: the rest of backward runs
// while the processes exchange it (as PyTorch DDP's Reducer and Horovod's
// tensor fusion). A bucket of several gradients is one flat vector, their
// concatenation, planned in the arena like any other buffer.
type buckets struct {
	g     *graph.Graph
	limit int64
	open  bucket   // filling
	done  []bucket // started, in start order
}

type bucket struct {
	members []int         // indices of the trainable parameters
	parts   []*graph.Node // their share-weighted gradients
	bytes   int64
	scope   string      // owner scope of its nodes: allreduce/bucketN
	start   *graph.Node // the all_reduce_start
}

// add puts gradient gr of parameter i in the open bucket, starting the
// bucket's all-reduce first if gr would overflow it and once it is full.
func (b *buckets) add(i int, gr *graph.Node) {
	if n := gr.Bytes(); b.open.bytes > 0 && b.open.bytes+n > b.limit {
		b.flush()
	}
	b.open.members = append(b.open.members, i)
	b.open.parts = append(b.open.parts, gr)
	b.open.bytes += gr.Bytes()
	if b.open.bytes >= b.limit {
		b.flush()
	}
}

// flush starts the open bucket's all-reduce, if it holds anything.
func (b *buckets) flush() {
	k := b.open
	if len(k.parts) == 0 {
		return
	}
	b.open = bucket{}
	k.scope = fmt.Sprintf("allreduce/bucket%d", len(b.done))
	b.g.PushScope(k.scope)
	x := k.parts[0]
	if len(k.parts) > 1 {
		flat := make([]*graph.Node, len(k.parts))
		for j, p := range k.parts {
			flat[j] = graph.Reshape(p, p.Shape().Size())
		}
		x = graph.Concat(0, flat...)
	}
	k.start = graph.AllReduceStart(x)
	b.g.PopScope()
	b.done = append(b.done, k)
}

// waitAll starts the open bucket, then, for every bucket in the order they
// started, builds the wait for its all-reduce and calls f with its members
// (indices of the trainable parameters) and their summed gradients.
func (b *buckets) waitAll(f func(members []int, sums []*graph.Node)) {
	b.flush()
	for _, k := range b.done {
		f(k.members, b.wait(k))
	}
}

// wait builds the wait for bucket k's all-reduce and returns the summed
// gradients of its members, in their shapes.
func (b *buckets) wait(k bucket) []*graph.Node {
	b.g.PushScope(k.scope)
	defer b.g.PopScope()
	sum := graph.AllReduceWait(k.start)
	if len(k.parts) == 1 {
		return []*graph.Node{sum}
	}
	out := make([]*graph.Node, len(k.parts))
	at := 0
	for j, p := range k.parts {
		n := p.Shape().Size()
		out[j] = graph.Reshape(graph.Slice(sum, []int{at}, []int{at + n}), p.Shape()...)
		at += n
	}
	return out
}
