package dist

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

func f32bytes(v ...float32) []byte { return bytes.Clone(tensor.AsBytes(v)) }

func TestSingleCollectives(t *testing.T) {
	c := Single()
	if c.Rank() != 0 || c.Size() != 1 {
		t.Fatalf("Rank, Size: got %d, %d, want 0, 1", c.Rank(), c.Size())
	}
	for _, tc := range []struct {
		name string
		run  func(buf []byte) ([]byte, error) // returns the result to compare with want
		want []byte
	}{
		{"AllReduceSum float32", func(b []byte) ([]byte, error) { return b, c.AllReduceSum(b, tensor.Float32) }, f32bytes(1, -2, 3.5)},
		{"AllReduceSum float64", func(b []byte) ([]byte, error) { return b, c.AllReduceSum(b, tensor.Float64) }, tensor.AsBytes([]float64{1, -2})},
		{"AllReduceSum empty", func(b []byte) ([]byte, error) { return nil, c.AllReduceSum(nil, tensor.Float32) }, nil},
		{"Start+Wait", func(b []byte) ([]byte, error) {
			req, err := c.Start(b, tensor.Float32)
			if err != nil {
				return nil, err
			}
			return b, req.Wait()
		}, f32bytes(1, 2, 3)},
		{"ReduceScatterSum", func(b []byte) ([]byte, error) {
			recv := make([]byte, len(b))
			return recv, c.ReduceScatterSum(b, recv, tensor.Float32)
		}, f32bytes(4, 5)},
		{"ReduceScatterSum in place", func(b []byte) ([]byte, error) { return b, c.ReduceScatterSum(b, b, tensor.Float32) }, f32bytes(6)},
		{"AllGather", func(b []byte) ([]byte, error) {
			recv := make([]byte, len(b))
			return recv, c.AllGather(b, recv)
		}, []byte{7, 8, 9}},
		{"AllGather in place", func(b []byte) ([]byte, error) { return b, c.AllGather(b, b) }, []byte{1}},
		{"StartReduceScatter+Wait", func(b []byte) ([]byte, error) {
			recv := make([]byte, len(b))
			req, err := c.StartReduceScatter(b, recv, tensor.Float32)
			if err != nil {
				return nil, err
			}
			return recv, req.Wait()
		}, f32bytes(2, 7)},
		{"StartAllGather+Wait", func(b []byte) ([]byte, error) {
			recv := make([]byte, len(b))
			req, err := c.StartAllGather(b, recv)
			if err != nil {
				return nil, err
			}
			return recv, req.Wait()
		}, []byte{5, 6}},
		{"Broadcast", func(b []byte) ([]byte, error) { return b, c.Broadcast(b, 0) }, []byte{3, 1, 4}},
		{"Barrier", func(b []byte) ([]byte, error) { return nil, c.Barrier() }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.run(bytes.Clone(tc.want))
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestArgumentErrors: Single checks arguments as the MPI communicator does.
func TestArgumentErrors(t *testing.T) {
	c := Single()
	b := make([]byte, 20)[:16]
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"AllReduceSum int32", c.AllReduceSum(b, tensor.Int32)},
		{"AllReduceSum float16", c.AllReduceSum(b, tensor.Float16)},
		{"AllReduceSum 3 bytes of float32", c.AllReduceSum(b[:3], tensor.Float32)},
		{"AllReduceSum 12 bytes of float64", c.AllReduceSum(b[:12], tensor.Float64)},
		{"Start bfloat16", func() error { _, err := c.Start(b, tensor.BFloat16); return err }()},
		{"ReduceScatterSum lengths", c.ReduceScatterSum(b, make([]byte, 8), tensor.Float32)},
		{"ReduceScatterSum partial overlap", c.ReduceScatterSum(b, b[4:20], tensor.Float32)},
		{"AllGather partial overlap", c.AllGather(b[4:20], b)},
		{"ReduceScatterSum uint8", c.ReduceScatterSum(b, make([]byte, 16), tensor.Uint8)},
		{"AllGather lengths", c.AllGather(make([]byte, 4), b)},
		{"Broadcast root 1", c.Broadcast(b, 1)},
		{"Broadcast root -1", c.Broadcast(b, -1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("got no error, want one")
			}
			if errors.Is(tc.err, ErrClosed) {
				t.Errorf("got %v, want an argument error", tc.err)
			}
		})
	}
}

func TestSingleClose(t *testing.T) {
	c := Single()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: got %v, want nil", err)
	}
	b := make([]byte, 8)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"AllReduceSum", c.AllReduceSum(b, tensor.Float32)},
		{"Start", func() error { _, err := c.Start(b, tensor.Float32); return err }()},
		{"ReduceScatterSum", c.ReduceScatterSum(b, b, tensor.Float32)},
		{"AllGather", c.AllGather(b, b)},
		{"Broadcast", c.Broadcast(b, 0)},
		{"Barrier", c.Barrier()},
		{"Close", c.Close()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrClosed) {
				t.Errorf("after Close: got %v, want ErrClosed", tc.err)
			}
		})
	}
}

func TestSingleAllocatesNothing(t *testing.T) {
	c := Single()
	b := f32bytes(1, 2, 3, 4)
	recv := make([]byte, len(b))
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"AllReduceSum", func() { _ = c.AllReduceSum(b, tensor.Float32) }},
		{"Start+Wait", func() {
			req, _ := c.Start(b, tensor.Float32)
			_ = req.Wait()
		}},
		{"ReduceScatterSum", func() { _ = c.ReduceScatterSum(b, recv, tensor.Float32) }},
		{"AllGather", func() { _ = c.AllGather(b, recv) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(100, tc.f); got != 0 {
				t.Errorf("allocations per call: got %v, want 0", got)
			}
		})
	}
}

// TestSingleConcurrent runs collectives from several goroutines and closes
// the communicator among them (for -race).
func TestSingleConcurrent(t *testing.T) {
	c := Single()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			b := f32bytes(float32(g), 1)
			for range 200 {
				if err := c.AllReduceSum(b, tensor.Float32); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("AllReduceSum: got %v, want nil or ErrClosed", err)
					return
				}
			}
		})
	}
	wg.Go(func() { _ = c.Close() })
	wg.Wait()
}
