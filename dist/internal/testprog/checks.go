package main

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/headroom-ml/headroom/dist"
	"github.com/headroom-ml/headroom/tensor"
)

// checker runs every collective on every rank in the same order and
// compares the results with values computed locally. The values are small
// integers, so float32 sums are exact and comparisons are ==.
type checker struct {
	c          dist.Comm
	rank, size int
	checks     int
}

// sizes are element counts: empty, tiny, odd, and 4 MiB of float32 (large
// enough for Open MPI's rendezvous protocol).
var sizes = []int{0, 1, 7, 1000, 1 << 20}

// value is rank r's element i; the sum over ranks is sumOf(i).
func value(r, i int) float64 { return float64((r + 1) * (i%31 + 1)) }

func (k *checker) sumOf(i int) float64 { return float64(k.size*(k.size+1)/2) * float64(i%31+1) }

func (k *checker) fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testprog: rank %d: %s\n", k.rank, fmt.Sprintf(format, args...))
	os.Exit(1)
}

func (k *checker) must(what string, err error) {
	if err != nil {
		k.fatalf("%s: %v", what, err)
	}
}

// floats is a buffer of n elements of dtype with its float64 accessors.
type floats struct {
	b     []byte
	dtype tensor.DType
}

func newFloats(dtype tensor.DType, n int) floats {
	return floats{make([]byte, n*dtype.Size()), dtype}
}

func (f floats) len() int { return len(f.b) / f.dtype.Size() }

func (f floats) at(i int) float64 {
	if f.dtype == tensor.Float32 {
		return float64(tensor.As[float32](f.b)[i])
	}
	return tensor.As[float64](f.b)[i]
}

func (f floats) set(i int, v float64) {
	if f.dtype == tensor.Float32 {
		tensor.As[float32](f.b)[i] = float32(v)
	} else {
		tensor.As[float64](f.b)[i] = v
	}
}

// expect compares f[i] with want(i) for every i.
func (k *checker) expect(what string, f floats, want func(i int) float64) {
	k.checks++
	for i := range f.len() {
		if g, w := f.at(i), want(i); g != w {
			k.fatalf("%s: element %d of %d: got %v, want %v", what, i, f.len(), g, w)
		}
	}
}

func (k *checker) run() {
	k.allReduce()
	k.start()
	k.startBlocks()
	k.reduceScatter()
	k.allGather()
	k.broadcast()
	k.argumentErrors()
	k.allocations()
	k.must("Barrier", k.c.Barrier())
	k.must("Close", k.c.Close())
	k.checks++
	if err := k.c.Barrier(); !errors.Is(err, dist.ErrClosed) {
		k.fatalf("Barrier after Close: got %v, want ErrClosed", err)
	}
}

func (k *checker) filled(dtype tensor.DType, n int) floats {
	f := newFloats(dtype, n)
	for i := range n {
		f.set(i, value(k.rank, i))
	}
	return f
}

func (k *checker) allReduce() {
	for _, dtype := range []tensor.DType{tensor.Float32, tensor.Float64} {
		for _, n := range sizes {
			f := k.filled(dtype, n)
			k.must("AllReduceSum", k.c.AllReduceSum(f.b, dtype))
			k.expect(fmt.Sprintf("AllReduceSum %v[%d]", dtype, n), f, k.sumOf)
		}
	}
}

// start keeps several non-blocking all-reduces in flight, with a blocking
// one among them, and waits for them out of order.
func (k *checker) start() {
	type started struct {
		f   floats
		req dist.Request
	}
	var reqs []started
	for i, n := range []int{5, 1000, 1 << 18, 0} {
		dtype := []tensor.DType{tensor.Float32, tensor.Float64}[i%2]
		f := k.filled(dtype, n)
		req, err := k.c.Start(f.b, dtype)
		k.must("Start", err)
		reqs = append(reqs, started{f, req})
	}
	mid := k.filled(tensor.Float32, 33)
	k.must("AllReduceSum while others are in flight", k.c.AllReduceSum(mid.b, tensor.Float32))
	k.expect("AllReduceSum while others are in flight", mid, k.sumOf)
	for _, i := range []int{2, 0, 3, 1} {
		k.must("Wait", reqs[i].req.Wait())
		k.expect(fmt.Sprintf("Start %v[%d]", reqs[i].f.dtype, reqs[i].f.len()), reqs[i].f, k.sumOf)
	}
}

// startBlocks keeps non-blocking reduce-scatters and all-gathers in flight
// together with an all-reduce and a blocking collective, and waits for
// them out of order (ZeRO-2 and ZeRO-3 overlap them so).
func (k *checker) startBlocks() {
	const m = 1000
	rsSend := k.filled(tensor.Float32, k.size*m)
	rsRecv := newFloats(tensor.Float32, m)
	rs, err := k.c.StartReduceScatter(rsSend.b, rsRecv.b, tensor.Float32)
	k.must("StartReduceScatter", err)
	agSend := make([]byte, 4*m+3)
	for i := range agSend {
		agSend[i] = pattern(k.rank, i)
	}
	agRecv := make([]byte, k.size*len(agSend))
	ag, err := k.c.StartAllGather(agSend, agRecv)
	k.must("StartAllGather", err)
	ar := k.filled(tensor.Float64, 77)
	arReq, err := k.c.Start(ar.b, tensor.Float64)
	k.must("Start", err)
	mid := k.filled(tensor.Float32, 9)
	k.must("AllReduceSum while others are in flight", k.c.AllReduceSum(mid.b, tensor.Float32))
	k.expect("AllReduceSum while a reduce-scatter and an all-gather are in flight", mid, k.sumOf)
	k.must("Wait (all-gather)", ag.Wait())
	k.expectBytes("StartAllGather", agRecv, func(i int) byte { return pattern(i/len(agSend), i%len(agSend)) })
	k.must("Wait (all-reduce)", arReq.Wait())
	k.expect("Start among a reduce-scatter and an all-gather", ar, k.sumOf)
	k.must("Wait (reduce-scatter)", rs.Wait())
	k.expect("StartReduceScatter", rsRecv, func(i int) float64 { return k.sumOf(k.rank*m + i) })
	if _, err := k.c.StartReduceScatter(rsSend.b[:8], rsRecv.b, tensor.Float32); err == nil {
		k.fatalf("StartReduceScatter with a short send buffer: got no error, want one")
	}
	if _, err := k.c.StartAllGather(agSend, agRecv[:3]); err == nil {
		k.fatalf("StartAllGather with a short recv buffer: got no error, want one")
	}
	k.checks += 2
}

// reduceScatter: rank r's send block b element i is value(r, b*m+i), so
// rank r's result is sumOf(r*m+i). In place, recv is this rank's block of
// send.
func (k *checker) reduceScatter() {
	for _, dtype := range []tensor.DType{tensor.Float32, tensor.Float64} {
		for _, m := range sizes {
			for _, inPlace := range []bool{false, true} {
				send := k.filled(dtype, k.size*m)
				recv := newFloats(dtype, m)
				if inPlace {
					es := dtype.Size()
					recv = floats{send.b[k.rank*m*es : (k.rank+1)*m*es], dtype}
				}
				k.must("ReduceScatterSum", k.c.ReduceScatterSum(send.b, recv.b, dtype))
				k.expect(fmt.Sprintf("ReduceScatterSum %v[%d] in place %v", dtype, m, inPlace), recv,
					func(i int) float64 { return k.sumOf(k.rank*m + i) })
			}
		}
	}
}

func pattern(r, i int) byte { return byte(r*37 + i*7 + 1) }

func (k *checker) expectBytes(what string, got []byte, want func(i int) byte) {
	k.checks++
	for i, g := range got {
		if w := want(i); g != w {
			k.fatalf("%s: byte %d of %d: got %d, want %d", what, i, len(got), g, w)
		}
	}
}

func (k *checker) allGather() {
	for _, m := range []int{0, 1, 13, 4 << 20} {
		for _, inPlace := range []bool{false, true} {
			recv := make([]byte, k.size*m)
			for i := range recv {
				recv[i] = 0xEE
			}
			send := make([]byte, m)
			if inPlace {
				send = recv[k.rank*m : (k.rank+1)*m]
			}
			for i := range send {
				send[i] = pattern(k.rank, i)
			}
			k.must("AllGather", k.c.AllGather(send, recv))
			k.expectBytes(fmt.Sprintf("AllGather %d bytes in place %v", m, inPlace), recv,
				func(i int) byte { return pattern(i/max(m, 1), i%max(m, 1)) })
		}
	}
}

func (k *checker) broadcast() {
	for root := range k.size {
		for _, n := range []int{0, 3, 1<<20 + 3} {
			buf := make([]byte, n)
			for i := range buf {
				buf[i] = 0xEE
				if k.rank == root {
					buf[i] = pattern(root, i)
				}
			}
			k.must("Broadcast", k.c.Broadcast(buf, root))
			k.expectBytes(fmt.Sprintf("Broadcast %d bytes from root %d", n, root), buf,
				func(i int) byte { return pattern(root, i) })
		}
	}
}

// argumentErrors are checked before any communication, on every rank alike.
func (k *checker) argumentErrors() {
	b := make([]byte, 8*k.size+8)[:8*k.size]
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"AllReduceSum int32", k.c.AllReduceSum(b, tensor.Int32)},
		{"AllReduceSum odd bytes", k.c.AllReduceSum(b[:3], tensor.Float32)},
		{"Start bfloat16", func() error { _, err := k.c.Start(b, tensor.BFloat16); return err }()},
		{"ReduceScatterSum short send", k.c.ReduceScatterSum(b[:4], make([]byte, 8), tensor.Float32)},
		{"ReduceScatterSum overlapping", k.c.ReduceScatterSum(b, b[1:9:9], tensor.Float32)},
		{"AllGather short recv", k.c.AllGather(make([]byte, 8), b[:4])},
		{"Broadcast root = size", k.c.Broadcast(b, k.size)},
		{"Broadcast root -1", k.c.Broadcast(b, -1)},
	} {
		k.checks++
		if tc.err == nil {
			k.fatalf("%s: got no error, want one", tc.name)
		}
	}
}

// allocations: a steady-state collective allocates nothing (the engine
// recycles its ops and request table).
func (k *checker) allocations() {
	buf := k.filled(tensor.Float32, 64)
	gathered := make([]byte, 16*k.size)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"AllReduceSum", func() { k.must("AllReduceSum", k.c.AllReduceSum(buf.b, tensor.Float32)) }},
		{"Start+Wait", func() {
			req, err := k.c.Start(buf.b, tensor.Float32)
			k.must("Start", err)
			k.must("Wait", req.Wait())
		}},
		{"Broadcast", func() { k.must("Broadcast", k.c.Broadcast(buf.b, 0)) }},
		{"StartAllGather+Wait", func() {
			req, err := k.c.StartAllGather(buf.b[:16], gathered)
			k.must("StartAllGather", err)
			k.must("Wait", req.Wait())
		}},
	} {
		k.checks++
		if got := testing.AllocsPerRun(100, tc.f); got != 0 {
			k.fatalf("allocations per %s: got %v, want 0", tc.name, got)
		}
	}
}
