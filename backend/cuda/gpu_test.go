//go:build cuda

package cuda_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/backend/cuda"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// These tests need an NVIDIA GPU, its driver (libcuda.so.1) and cuBLAS
// (libcublas.so.13, .12 or .11 on the library path). Building with -tags
// cuda asks for them: without a usable GPU every test fails, saying what
// is missing, rather than skipping. On a machine without Go, build the
// binary elsewhere with
// `CGO_ENABLED=0 go test -c -tags cuda ./backend/cuda` and run
// ./cuda.test -test.v there. They use device 0 (CUDA_VISIBLE_DEVICES picks
// it) and assume no other process allocates on it meanwhile.

var (
	gpuOnce sync.Once
	theGPU  *cuda.GPU
	gpuErr  error
)

// gpu returns device 0, opened once for the whole test binary.
func gpu(t *testing.T) *cuda.GPU {
	t.Helper()
	gpuOnce.Do(func() { theGPU, gpuErr = cuda.Open(0) })
	if gpuErr != nil {
		t.Fatalf("no usable CUDA GPU (these tests were built with -tags cuda, which asks for one): %v", gpuErr)
	}
	return theGPU
}

func TestDeviceInfo(t *testing.T) {
	g := gpu(t)
	n, err := cuda.DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("DeviceCount: got %d, %v; want >= 1", n, err)
	}
	free, total, err := g.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if g.Name() != "cuda:0" || g.Host() || g.Capacity() != total || free <= 0 || free > total {
		t.Errorf("device: Name %q Host %v Capacity %d, MemInfo free %d total %d: want cuda:0, false, Capacity == total, 0 < free <= total",
			g.Name(), g.Host(), g.Capacity(), free, total)
	}
	v, err := cuda.DriverVersion()
	if err != nil || v < 11000 {
		t.Errorf("DriverVersion: got %d, %v; want CUDA 11.0 (11000) or later", v, err)
	}
	maj, min := g.ComputeCapability()
	t.Logf("%s: %s, compute capability %d.%d, driver for CUDA %d.%d, %s total, %s free", g.Name(), g.Model(), maj, min, v/1000, v%1000/10, mem.FormatBytes(total), mem.FormatBytes(free))
	var _ mem.Device = g
	var _ mem.Zeroer = g
	var _ mem.Device = g.Pinned()
}

// Bytes written to the device come back unchanged, through synchronous
// copies, device-to-device copies, and async copies via pinned memory; a
// memset clears exactly its range.
func TestRoundTrip(t *testing.T) {
	g := gpu(t)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, size := range []int64{mem.PageSize, 5 * mem.PageSize, 3 << 20} {
		r, err := g.Map(size)
		if err != nil {
			t.Fatal(err)
		}
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		if err := g.CopyHtoD(r.Ptr, src); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, size)
		if err := g.CopyDtoH(got, r.Ptr); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(src) {
			t.Errorf("%d bytes: HtoD then DtoH differs", size)
		}
		half := size / 2
		if err := g.CopyDtoD(r.Ptr, r.Ptr+uintptr(half), half); err != nil {
			t.Fatal(err)
		}
		if err := g.Zero(r, 10, 20); err != nil {
			t.Fatal(err)
		}
		if err := g.CopyDtoH(got, r.Ptr); err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < size; i++ {
			want := src[i]
			switch {
			case i >= 10 && i < 30:
				want = 0
			case i < half:
				want = src[half+i]
			}
			if got[i] != want {
				t.Fatalf("%d bytes after DtoD and Zero: byte %d got %d, want %d", size, i, got[i], want)
			}
		}
		if err := g.Unmap(r); err != nil {
			t.Fatal(err)
		}
	}

	// Async, through pinned host memory on the host ledger.
	host := mem.NewLedger("cpu", 0)
	pa := mem.NewAllocator(g.Pinned(), host, mem.AllocatorOptions{ChunkSize: 1 << 20})
	up, err := pa.Alloc(100_000, mem.Input, "staging")
	if err != nil {
		t.Fatal(err)
	}
	down, err := pa.Alloc(100_000, mem.Input, "readback")
	if err != nil {
		t.Fatal(err)
	}
	for i := range up.Bytes() {
		up.Bytes()[i] = byte(rng.Uint32())
	}
	d := mem.NewAllocator(g, nil, mem.AllocatorOptions{})
	buf, err := d.Alloc(100_000, mem.Input, "batch")
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CopyHtoDAsync(buf.Ptr(), up.Bytes(), s); err != nil {
		t.Fatal(err)
	}
	if err := g.CopyDtoHAsync(down.Bytes(), buf.Ptr(), s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if string(down.Bytes()) != string(up.Bytes()) {
		t.Error("async round trip through pinned memory differs")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d.Free(buf)
	pa.Free(up)
	pa.Free(down)
	if g.Mapped() != 0 || g.Pinned().Mapped() != 0 {
		t.Errorf("after freeing: mapped %d B on the device, %d B pinned; want 0, 0", g.Mapped(), g.Pinned().Mapped())
	}
}

// The driver's free memory drops by what Map asked, rounded up to the
// driver's allocation granularity of 2 MiB (cuMemAlloc serves requests
// from 2 MiB pages on current GPUs), and comes back after Unmap.
func TestMemGetInfoShowsAllocation(t *testing.T) {
	g := gpu(t)
	const granularity = 2 << 20
	// A first allocation may make the driver set up its own state; measure
	// after one.
	warm, err := g.Map(mem.PageSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Unmap(warm); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{64 << 20, 64<<20 + mem.PageSize, 2 << 20, 256 << 20} {
		free0, _, err := g.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		r, err := g.Map(n)
		if err != nil {
			t.Fatal(err)
		}
		free1, _, err := g.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Unmap(r); err != nil {
			t.Fatal(err)
		}
		free2, _, err := g.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		want := (n + granularity - 1) / granularity * granularity
		if got := free0 - free1; got != want {
			t.Errorf("Map(%d): driver free memory fell by %d B, want %d B (the request rounded up to 2 MiB)", n, got, want)
		}
		if free2 != free0 {
			t.Errorf("Map(%d) then Unmap: driver free memory %d B, want %d B as before", n, free2, free0)
		}
	}
}

// Asking for more than the device has left is an *mem.OOMError naming the
// device, from Map and from an Allocator over the GPU.
func TestOOM(t *testing.T) {
	g := gpu(t)
	free, _, err := g.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	n := mem.RoundPage(free + 1<<30)
	_, err = g.Map(n)
	var oom *mem.OOMError
	if !errors.As(err, &oom) || oom.Ledger != "cuda:0" || oom.Request != n {
		t.Fatalf("Map(%d) with %d free: got %v, want *mem.OOMError on cuda:0 for %d B", n, free, err, n)
	}
	if !strings.Contains(err.Error(), "out of memory on cuda:0") {
		t.Errorf("message %q: want it to name cuda:0", err)
	}
	ledger := mem.NewLedger("cuda:0", 0)
	a := mem.NewAllocator(g, ledger, mem.AllocatorOptions{})
	_, err = a.Alloc(n, mem.Activation, "too big")
	if !errors.As(err, &oom) || oom.Ledger != "cuda:0" || oom.Owner != "too big" {
		t.Errorf("Alloc(%d): got %v, want *mem.OOMError on cuda:0 for \"too big\"", n, err)
	}
	if g.Mapped() != 0 || ledger.Live() != 0 {
		t.Errorf("after the refusals: mapped %d B, ledger live %d B; want 0, 0", g.Mapped(), ledger.Live())
	}
	// The device still works.
	r, err := g.Map(mem.PageSize)
	if err != nil {
		t.Fatalf("Map after an OOM: %v", err)
	}
	g.Unmap(r)
}

// cuBLAS GEMM matches kernels.MatMul: float32 within 1e-4 relative to the
// sum of the absolute values of the terms (Σ_p |a·b|, + |dst| when
// accumulating: the scale of a float32 dot product's rounding error), for
// every transpose and accumulate; float16 and bfloat16 operands with
// float32 accumulation against the same product of the rounded values.
func TestMatMulMatchesKernels(t *testing.T) {
	g := gpu(t)
	b, err := g.NewBLAS()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ledger := mem.NewLedger("cuda:0", 0)
	a := mem.NewAllocator(g, ledger, mem.AllocatorOptions{})
	ws, err := a.Alloc(g.BLASWorkspaceBytes(), mem.Workspace, "cublas")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free(ws)
	if err := b.SetWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	t.Logf("cuBLAS %d, workspace %s on the ledger", b.Version(), mem.FormatBytes(ws.Size()))
	rng := rand.New(rand.NewPCG(5, 6))
	sizes := [][3]int{{1, 1, 1}, {7, 33, 5}, {128, 256, 64}, {1023, 33, 257}, {64, 1024, 784}, {3, 5, 0}}
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16} {
		for _, sz := range sizes {
			for _, mode := range []struct{ ta, tb, acc bool }{{false, false, false}, {true, false, false}, {false, true, false}, {true, true, true}, {false, false, true}} {
				m, n, k := sz[0], sz[1], sz[2]
				name := strings.Join([]string{dt.String(), dims(m, n, k), flag("transA", mode.ta), flag("transB", mode.tb), flag("accumulate", mode.acc)}, "/")
				t.Run(name, func(t *testing.T) {
					av, bv, dv := values(rng, m*k, dt), values(rng, k*n, dt), values(rng, m*n, tensor.Float32)
					want := kernels.MatMul(append([]float32(nil), dv...), av, bv, m, n, k, mode.ta, mode.tb, mode.acc)
					// scale[i]: Σ_p |op(a)[i,p]·op(b)[p,j]| (+ |dst| when accumulating)
					absA, absB := abs(av), abs(bv)
					scale := kernels.MatMulRef(make([]float32, m*n), absA, absB, m, n, k, mode.ta, mode.tb, false)
					if mode.acc {
						for i := range scale {
							scale[i] += float32(math.Abs(float64(dv[i])))
						}
					}
					ab, bb, db := upload(t, g, a, av, dt), upload(t, g, a, bv, dt), upload(t, g, a, dv, tensor.Float32)
					defer func() { a.Free(ab); a.Free(bb); a.Free(db) }()
					var err error
					if dt == tensor.Float32 {
						err = b.MatMul(db.Ptr(), ab.Ptr(), bb.Ptr(), m, n, k, mode.ta, mode.tb, mode.acc)
					} else {
						err = b.MatMulEx(dt, db.Ptr(), ab.Ptr(), bb.Ptr(), m, n, k, mode.ta, mode.tb, mode.acc)
					}
					if err != nil {
						t.Fatal(err)
					}
					if err := g.Synchronize(); err != nil {
						t.Fatal(err)
					}
					got := make([]float32, m*n)
					if err := g.CopyDtoH(tensor.AsBytes(got), db.Ptr()); err != nil {
						t.Fatal(err)
					}
					for i := range got {
						if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-4*math.Max(1, float64(scale[i]))) {
							t.Fatalf("dst[%d] (row %d, col %d): got %v, want %v (scale %v)", i, i/max(n, 1), i%max(n, 1), got[i], want[i], scale[i])
						}
					}
				})
			}
		}
	}
}

func dims(m, n, k int) string {
	return strconv.Itoa(m) + "x" + strconv.Itoa(n) + "x" + strconv.Itoa(k)
}

func flag(name string, on bool) string {
	if on {
		return name
	}
	return "no" + name
}

func abs(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(math.Abs(float64(v)))
	}
	return out
}

// values returns n values in [-1, 1), rounded to dt's precision.
func values(rng *rand.Rand, n int, dt tensor.DType) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.Float64()*2 - 1)
		switch dt {
		case tensor.Float16:
			x[i] = tensor.ToFloat16(x[i]).Float32()
		case tensor.BFloat16:
			x[i] = tensor.ToBFloat16(x[i]).Float32()
		}
	}
	return x
}

// upload copies x, in dt, to a new device buffer.
func upload(t *testing.T, g *cuda.GPU, a *mem.Allocator, x []float32, dt tensor.DType) *mem.Buffer {
	t.Helper()
	var raw []byte
	switch dt {
	case tensor.Float16:
		h := make([]tensor.F16, len(x))
		for i, v := range x {
			h[i] = tensor.ToFloat16(v)
		}
		raw = tensor.AsBytes(h)
	case tensor.BFloat16:
		h := make([]tensor.BF16, len(x))
		for i, v := range x {
			h[i] = tensor.ToBFloat16(v)
		}
		raw = tensor.AsBytes(h)
	default:
		raw = tensor.AsBytes(append([]float32(nil), x...))
	}
	buf, err := a.Alloc(int64(len(raw)), mem.Workspace, "operand")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CopyHtoD(buf.Ptr(), raw); err != nil {
		t.Fatal(err)
	}
	return buf
}

// What cuBLAS takes from the driver beyond the ledger: a handle's own
// allocations (measured and logged here for the record), and nothing for
// workspace once SetWorkspace gives it a ledger buffer.
func TestBLASDeviceMemory(t *testing.T) {
	g := gpu(t)
	free0, _, err := g.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.NewBLAS()
	if err != nil {
		t.Fatal(err)
	}
	free1, _, _ := g.MemInfo()
	a := mem.NewAllocator(g, nil, mem.AllocatorOptions{})
	ws, err := a.Alloc(g.BLASWorkspaceBytes(), mem.Workspace, "cublas")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	x, err := a.Alloc(512*512*4, mem.Workspace, "x")
	if err != nil {
		t.Fatal(err)
	}
	y, _ := a.Alloc(512*512*4, mem.Workspace, "y")
	free2, _, _ := g.MemInfo()
	for range 3 {
		if err := b.MatMul(y.Ptr(), x.Ptr(), x.Ptr(), 512, 512, 512, false, true, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Synchronize(); err != nil {
		t.Fatal(err)
	}
	free3, _, _ := g.MemInfo()
	t.Logf("cublasCreate took %s from the driver; GEMMs with a ledger workspace took %s more", mem.FormatBytes(free0-free1), mem.FormatBytes(free2-free3))
	if free3 != free2 {
		t.Errorf("GEMMs with a workspace from the ledger: driver free memory fell by %d B, want 0", free2-free3)
	}
	a.Free(x)
	a.Free(y)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	a.Free(ws)
}

// The driver's current context is per OS thread and goroutines move
// between threads: many goroutines mapping, copying and unmapping at once
// must each find the context current (run with -race too).
func TestConcurrentUse(t *testing.T) {
	g := gpu(t)
	a := mem.NewAllocator(g, nil, mem.AllocatorOptions{ChunkSize: 1 << 20})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src, got := make([]byte, 70_000), make([]byte, 70_000)
			for i := range 40 {
				src[0], src[len(src)-1] = byte(w), byte(i)
				n := len(src) - 977*(i%50)
				b, err := a.Alloc(int64(n), mem.Activation, "act")
				if err != nil {
					errs <- err
					return
				}
				if err = g.CopyHtoD(b.Ptr(), src[:n]); err == nil {
					err = g.CopyDtoH(got[:n], b.Ptr())
				}
				a.Free(b)
				if err == nil && string(got[:n]) != string(src[:n]) {
					err = errors.New("a round trip differs")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if g.Mapped() != 0 {
		t.Errorf("mapped after every buffer is freed: got %d B, want 0", g.Mapped())
	}
}
