package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// These tests run the package on emuDriver and emuBLAS (fake_test.go):
// everything but the purego calls of load_cuda.go, in the default build.

func openFake(t *testing.T, total uint64) (*GPU, *emuDriver) {
	t.Helper()
	f := newEmuDriver(total)
	g, err := open(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	return g, f
}

func TestOpen(t *testing.T) {
	f := newEmuDriver(1 << 30)
	f.devices = 2
	g, err := open(f, 1)
	if err != nil {
		t.Fatal(err)
	}
	maj, min := g.ComputeCapability()
	for _, c := range []struct{ what, got, want any }{
		{"Name", g.Name(), "cuda:1"}, {"Model", g.Model(), "emulated GPU (PTX interpreter)"}, {"Capacity", g.Capacity(), int64(1 << 30)},
		{"Host", g.Host(), false}, {"compute capability", [2]int{maj, min}, [2]int{9, 0}}, {"retained contexts", f.retained, 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
	for _, ord := range []int{2, -1} {
		_, err := open(f, ord)
		if err == nil || !strings.Contains(err.Error(), "the driver sees 2 CUDA device(s)") {
			t.Errorf("open(%d): got %v, want an error saying the driver sees 2 devices", ord, err)
		}
	}
}

func TestParseDevice(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{{"cuda", 0, true}, {"cuda:0", 0, true}, {"cuda:3", 3, true}, {"cuda:", 0, false}, {"cuda:-1", 0, false},
		{"cuda:01", 0, false}, {"cuda:x", 0, false}, {"gpu", 0, false}, {"cpu", 0, false}} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseDevice(c.in)
			if (err == nil) != c.ok || got != c.want {
				t.Errorf("ParseDevice(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
			}
		})
	}
}

// FuzzParseDevice: ParseDevice never panics, accepts only non-negative
// ordinals, and what it accepts is "cuda" or the canonical "cuda:N".
func FuzzParseDevice(f *testing.F) {
	for _, s := range []string{"cuda", "cuda:0", "cuda:7", "cuda:", "cuda:-1", "cuda:01", "cuda:+1", "cuda:99999999999999999999", "gpu:0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseDevice(s)
		if err != nil {
			if !strings.Contains(err.Error(), "bad device") {
				t.Errorf("ParseDevice(%q): error %q does not say bad device", s, err)
			}
			return
		}
		if n < 0 || (s != "cuda" && s != fmt.Sprintf("cuda:%d", n)) || (s == "cuda" && n != 0) {
			t.Errorf("ParseDevice(%q) = %d: not the device the name says", s, n)
		}
	})
}

// Map is one cuMemAlloc of exactly the size asked; Unmap frees it.
func TestMapExactSize(t *testing.T) {
	g, f := openFake(t, 1<<30)
	sizes := []int64{mem.PageSize, 3 * mem.PageSize, 5 << 20}
	var regions []mem.Region
	var total int64
	for _, n := range sizes {
		r, err := g.Map(n)
		if err != nil {
			t.Fatal(err)
		}
		if r.Size != n || r.Bytes != nil || r.Ptr == 0 {
			t.Errorf("Map(%d): got Size %d, Bytes %v, Ptr %#x; want Size %d, Bytes nil, a device address", n, r.Size, r.Bytes != nil, r.Ptr, n)
		}
		total += n
		regions = append(regions, r)
	}
	if got, want := f.sizes, []uint64{mem.PageSize, 3 * mem.PageSize, 5 << 20}; !equal(got, want) {
		t.Errorf("cuMemAlloc sizes: got %v, want %v", got, want)
	}
	if got := g.Mapped(); got != total {
		t.Errorf("Mapped: got %d, want %d", got, total)
	}
	for _, r := range regions {
		if err := g.Unmap(r); err != nil {
			t.Fatal(err)
		}
	}
	if got := g.Mapped(); got != 0 || len(f.allocs) != 0 {
		t.Errorf("after Unmap: Mapped %d, driver allocations %d; want 0, 0", got, len(f.allocs))
	}
	if err := g.Unmap(regions[0]); err == nil {
		t.Error("second Unmap of a region: got nil error")
	}
	for _, n := range []int64{0, -mem.PageSize, 100} {
		if _, err := g.Map(n); err == nil {
			t.Errorf("Map(%d): got nil error, want one (not a positive multiple of %d)", n, mem.PageSize)
		}
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMapOOM(t *testing.T) {
	g, f := openFake(t, 8<<20)
	r, err := g.Map(6 << 20)
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Map(4 << 20)
	var oom *mem.OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("Map past the device's memory: got %v, want *mem.OOMError", err)
	}
	if oom.Ledger != "cuda:0" || oom.Request != 4<<20 || oom.Live != 6<<20 || oom.Budget != 8<<20 {
		t.Errorf("OOMError: got Ledger %q Request %d Live %d Budget %d; want cuda:0, %d, %d, %d", oom.Ledger, oom.Request, oom.Live, oom.Budget, 4<<20, 6<<20, 8<<20)
	}
	if !strings.Contains(err.Error(), "out of memory on cuda:0") || !strings.Contains(err.Error(), "the driver reports 2.00 MiB free") {
		t.Errorf("OOM message %q: want it to name cuda:0 and the driver's free memory", err)
	}
	if g.Mapped() != 6<<20 {
		t.Errorf("Mapped after a refused Map: got %d, want %d", g.Mapped(), 6<<20)
	}
	// Another driver failure is an *Error, not an OOM.
	f.failAlloc = cudaErrorInvalidVal
	_, err = g.Map(mem.PageSize)
	var ce *Error
	if !errors.As(err, &ce) || ce.Op != "cuMemAlloc_v2" || ce.Name != "CUDA_ERROR_INVALID_VALUE" || ce.Device != "cuda:0" || errors.As(err, &oom) {
		t.Errorf("Map with the driver failing: got %v, want *cuda.Error for cuMemAlloc_v2, CUDA_ERROR_INVALID_VALUE on cuda:0", err)
	}
	f.failAlloc = cudaSuccess
	if err := g.Unmap(r); err != nil {
		t.Fatal(err)
	}
}

// An Allocator over a GPU charges its ledger, maps chunks with cuMemAlloc,
// clears reused memory with cuMemsetD8, and reports the device's OOM.
func TestAllocatorOnGPU(t *testing.T) {
	g, f := openFake(t, 64<<20)
	ledger := mem.NewLedger("cuda:0", 0)
	a := mem.NewAllocator(g, ledger, mem.AllocatorOptions{ChunkSize: 1 << 20})
	b1, err := a.Alloc(1000, mem.Param, "w")
	if err != nil {
		t.Fatal(err)
	}
	if b1.Bytes() != nil || b1.Ptr() == 0 || b1.Size() != mem.Align(1000) {
		t.Fatalf("buffer: got Bytes %v Ptr %#x Size %d; want nil, a device address, %d", b1.Bytes() != nil, b1.Ptr(), b1.Size(), mem.Align(1000))
	}
	junk := make([]byte, b1.Size())
	for i := range junk {
		junk[i] = 0xab
	}
	if err := g.CopyHtoD(b1.Ptr(), junk); err != nil {
		t.Fatal(err)
	}
	a.Free(b1) // the chunk is unmapped: memory goes back to the driver
	if g.Mapped() != 0 {
		t.Errorf("Mapped after freeing every buffer: got %d, want 0", g.Mapped())
	}
	keep, err := a.Alloc(64, mem.Param, "keep") // keeps the next chunk mapped
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := a.Alloc(1000, mem.Grad, "g")
	if err := g.CopyHtoD(b2.Ptr(), junk); err != nil {
		t.Fatal(err)
	}
	a.Free(b2)
	memsets := f.memsets
	b3, err := a.AllocZeroed(1000, mem.OptState, "m")
	if err != nil {
		t.Fatal(err)
	}
	if f.memsets != memsets+1 {
		t.Errorf("AllocZeroed of reused memory: got %d cuMemsetD8 calls, want 1", f.memsets-memsets)
	}
	got := make([]byte, b3.Size())
	if err := g.CopyDtoH(got, b3.Ptr()); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 0 {
			t.Fatalf("AllocZeroed byte %d: got %#x, want 0", i, v)
		}
	}
	if got, want := ledger.Live(), mem.Align(64)+mem.Align(1000); got != want {
		t.Errorf("ledger live: got %d, want %d", got, want)
	}
	// Past the device: an *mem.OOMError naming the device.
	_, err = a.Alloc(100<<20, mem.Activation, "big")
	var oom *mem.OOMError
	if !errors.As(err, &oom) || oom.Ledger != "cuda:0" || oom.Owner != "big" {
		t.Errorf("Alloc past the device: got %v, want *mem.OOMError on cuda:0 for big", err)
	}
	if got, want := ledger.Live(), mem.Align(64)+mem.Align(1000); got != want {
		t.Errorf("ledger live after a refused Alloc: got %d, want %d", got, want)
	}
	a.Free(b3)
	a.Free(keep)
	if g.Mapped() != 0 || len(f.allocs) != 0 {
		t.Errorf("after freeing everything: Mapped %d, driver allocations %d; want 0, 0", g.Mapped(), len(f.allocs))
	}
}

func TestCopies(t *testing.T) {
	g, f := openFake(t, 64<<20)
	r, err := g.Map(2 * mem.PageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Unmap(r)
	src := make([]byte, 3000)
	for i := range src {
		src[i] = byte(i * 7)
	}
	if err := g.CopyHtoD(r.Ptr+100, src); err != nil {
		t.Fatal(err)
	}
	if err := g.CopyDtoD(r.Ptr+5000, r.Ptr+100, 3000); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 3000)
	if err := g.CopyDtoH(got, r.Ptr+5000); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(src) {
		t.Error("HtoD, DtoD, DtoH round trip: bytes differ")
	}
	if err := g.Zero(r, 100, 10); err != nil {
		t.Fatal(err)
	}
	g.CopyDtoH(got[:20], r.Ptr+100)
	for i, v := range got[:20] {
		if want := map[bool]byte{true: 0, false: src[i]}[i < 10]; v != want {
			t.Errorf("after Zero(100, 10): byte %d got %d, want %d", 100+i, v, want)
		}
	}
	before := string(f.allocs[uint64(r.Ptr)])
	for _, c := range []struct {
		name string
		err  error
	}{
		{"HtoD past the end", g.CopyHtoD(r.Ptr+2*mem.PageSize-10, src[:11])},
		{"HtoD before the start", g.CopyHtoD(r.Ptr-1, src[:1])},
		{"DtoH past the end", g.CopyDtoH(got[:11], r.Ptr+2*mem.PageSize-10)},
		{"DtoD past the end", g.CopyDtoD(r.Ptr, r.Ptr+mem.PageSize, mem.PageSize+1)},
		{"Zero past the region", g.Zero(r, 2*mem.PageSize-1, 2)},
		{"Zero of a foreign region", g.Zero(mem.Region{Ptr: 64, Size: mem.PageSize}, 0, 1)},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), "cuda:0") {
			t.Errorf("%s: got %v, want an error naming cuda:0", c.name, c.err)
		}
	}
	if string(f.allocs[uint64(r.Ptr)]) != before {
		t.Error("a refused copy wrote device memory")
	}
}

// Pinned memory is a host mem.Device whose allocator charges a host
// ledger; async copies take only pinned host memory.
func TestPinnedAndStreams(t *testing.T) {
	g, f := openFake(t, 64<<20)
	host := mem.NewLedger("cpu", 0)
	pa := mem.NewAllocator(g.Pinned(), host, mem.AllocatorOptions{ChunkSize: mem.PageSize})
	stage, err := pa.Alloc(3000, mem.Input, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if g.Pinned().Name() != "cuda:0/pinned" || !g.Pinned().Host() || len(stage.Bytes()) != int(stage.Size()) {
		t.Fatalf("pinned device %q Host %v, buffer of %d bytes: want cuda:0/pinned, true, %d bytes", g.Pinned().Name(), g.Pinned().Host(), len(stage.Bytes()), stage.Size())
	}
	if host.Totals()[mem.Input] != stage.Size() {
		t.Errorf("host ledger input: got %d, want %d", host.Totals()[mem.Input], stage.Size())
	}
	for i := range stage.Bytes() {
		stage.Bytes()[i] = byte(i)
	}
	r, _ := g.Map(mem.PageSize)
	s, err := g.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CopyHtoDAsync(r.Ptr, stage.Bytes(), s); err != nil {
		t.Fatal(err)
	}
	back, _ := pa.Alloc(3000, mem.Input, "back")
	if err := g.CopyDtoHAsync(back.Bytes(), r.Ptr, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if string(back.Bytes()[:3000]) != string(stage.Bytes()[:3000]) {
		t.Error("async round trip through pinned memory: bytes differ")
	}
	goMem := make([]byte, 100)
	if err := g.CopyHtoDAsync(r.Ptr, goMem, s); err == nil || !strings.Contains(err.Error(), "pinned") {
		t.Errorf("async copy from Go memory: got %v, want an error about pinned memory", err)
	}
	if err := g.CopyDtoHAsync(goMem, r.Ptr, s); err == nil {
		t.Error("async copy to Go memory: got nil error")
	}
	if err := g.Close(); err == nil {
		t.Error("Close with memory still mapped: got nil error")
	}
	pa.Free(stage)
	pa.Free(back)
	g.Unmap(r)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(f.host) != 0 || len(f.streams) != 0 {
		t.Errorf("after freeing: %d pinned allocations, %d streams in the driver; want 0, 0", len(f.host), len(f.streams))
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if f.retained != 0 {
		t.Errorf("primary context references after Close: got %d, want 0", f.retained)
	}
	if _, err := g.Map(mem.PageSize); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Errorf("Map after Close: got %v, want an error saying after Close", err)
	}
}

// fill returns n deterministic values in [-1, 1), rounded to dt's precision.
func fill(rng *rand.Rand, n int, dt tensor.DType) []float32 {
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

// encode returns x in dt's bytes.
func encode(x []float32, dt tensor.DType) []byte {
	switch dt {
	case tensor.Float16:
		h := make([]tensor.F16, len(x))
		for i, v := range x {
			h[i] = tensor.ToFloat16(v)
		}
		return tensor.AsBytes(h)
	case tensor.BFloat16:
		h := make([]tensor.BF16, len(x))
		for i, v := range x {
			h[i] = tensor.ToBFloat16(v)
		}
		return tensor.AsBytes(h)
	}
	return tensor.AsBytes(append([]float32(nil), x...))
}

// The row-major MatMul maps onto cuBLAS's column-major GEMM as documented:
// checked against kernels.MatMulRef for every transpose and accumulate,
// in float32 and, through MatMulEx, float16 and bfloat16 operands.
func TestMatMulLayout(t *testing.T) {
	g, f := openFake(t, 256<<20)
	lib := &emuBLAS{f: f}
	b, err := g.newBLAS(lib)
	if err != nil {
		t.Fatal(err)
	}
	ledger := mem.NewLedger("cuda:0", 0)
	a := mem.NewAllocator(g, ledger, mem.AllocatorOptions{})
	rng := rand.New(rand.NewPCG(9, 9))
	sizes := [][3]int{{1, 1, 1}, {7, 33, 5}, {33, 7, 64}, {16, 1, 9}, {3, 5, 0}, {0, 4, 3}}
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16} {
		for _, sz := range sizes {
			for _, mode := range []struct{ ta, tb, acc bool }{{false, false, false}, {true, false, false}, {false, true, true}, {true, true, false}, {true, true, true}} {
				m, n, k := sz[0], sz[1], sz[2]
				name := fmt.Sprintf("%s/%dx%dx%d/transA=%v/transB=%v/accumulate=%v", dt, m, n, k, mode.ta, mode.tb, mode.acc)
				t.Run(name, func(t *testing.T) {
					av, bv, dv := fill(rng, m*k, dt), fill(rng, k*n, dt), fill(rng, m*n, tensor.Float32)
					want := kernels.MatMulRef(append([]float32(nil), dv...), av, bv, m, n, k, mode.ta, mode.tb, mode.acc)
					upload := func(x []float32, dt tensor.DType) *mem.Buffer {
						buf, err := a.Alloc(int64(len(x)*dt.Size()), mem.Workspace, name)
						if err != nil {
							t.Fatal(err)
						}
						if err := g.CopyHtoD(buf.Ptr(), encode(x, dt)); err != nil {
							t.Fatal(err)
						}
						return buf
					}
					ab, bb, db := upload(av, dt), upload(bv, dt), upload(dv, tensor.Float32)
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
					got := make([]float32, m*n)
					if err := g.CopyDtoH(tensor.AsBytes(got), db.Ptr()); err != nil {
						t.Fatal(err)
					}
					for i := range got {
						if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*math.Max(1, math.Abs(float64(want[i]))) {
							t.Fatalf("dst[%d]: got %v, want %v", i, got[i], want[i])
						}
					}
				})
			}
		}
	}
	// Operands outside the GPU's memory are refused before cuBLAS runs.
	calls := lib.calls
	// (bounds are checked against the GPU's mappings, not single buffers)
	small, _ := g.Map(mem.PageSize)
	if err := b.MatMul(small.Ptr, small.Ptr, small.Ptr, 64, 64, 1, false, false, false); err == nil || !strings.Contains(err.Error(), "operand dst") {
		t.Errorf("MatMul with a %d-byte mapping as dst [64, 64]: got %v, want an error about operand dst", mem.PageSize, err)
	}
	if err := b.MatMul(small.Ptr, small.Ptr+mem.PageSize-4, small.Ptr, 1, 1, 2, false, false, false); err == nil || !strings.Contains(err.Error(), "operand a") {
		t.Errorf("MatMul with a past the mapping: got %v, want an error about operand a", err)
	}
	g.Unmap(small)
	if err := b.MatMul(0, 0, 0, -1, 2, 2, false, false, false); err == nil {
		t.Error("MatMul with m=-1: got nil error")
	}
	if err := b.MatMulEx(tensor.Int32, 0, 0, 0, 1, 1, 1, false, false, false); err == nil {
		t.Error("MatMulEx on int32: got nil error")
	}
	if lib.calls != calls {
		t.Errorf("refused MatMuls reached cuBLAS %d times", lib.calls-calls)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if lib.handles != 0 {
		t.Errorf("cuBLAS handles after GPU.Close: got %d, want 0", lib.handles)
	}
}

// The workspace cuBLAS gets is the 256-byte aligned part of a ledger buffer.
func TestSetWorkspace(t *testing.T) {
	g, f := openFake(t, 256<<20)
	lib := &emuBLAS{f: f}
	b, err := g.newBLAS(lib)
	if err != nil {
		t.Fatal(err)
	}
	ledger := mem.NewLedger("cuda:0", 0)
	a := mem.NewAllocator(g, ledger, mem.AllocatorOptions{})
	pad, _ := a.Alloc(64, mem.Workspace, "pad") // so the next buffer is not 256-aligned
	ws, err := a.Alloc(g.BLASWorkspaceBytes(), mem.Workspace, "cublas")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	if got, want := lib.workspace[1], uint64(32<<20); lib.workspace[0]%256 != 0 || got != want {
		t.Errorf("workspace: got %d bytes at %#x, want %d bytes, 256-aligned", got, lib.workspace[0], want)
	}
	if got := ledger.Totals()[mem.Workspace]; got != mem.Align(64)+mem.Align(32<<20+256) {
		t.Errorf("ledger workspace: got %d, want %d", got, mem.Align(64)+mem.Align(32<<20+256))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	a.Free(ws)
	a.Free(pad)
	if lib.handles != 0 {
		t.Errorf("handles after Close: got %d, want 0", lib.handles)
	}
}

// A GPU is safe for concurrent use: allocators on it map, copy and unmap
// from many goroutines (run with -race).
func TestGPUConcurrent(t *testing.T) {
	g, _ := openFake(t, 1<<30)
	a := mem.NewAllocator(g, nil, mem.AllocatorOptions{ChunkSize: 64 << 10})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := make([]byte, 5000)
			got := make([]byte, 5000)
			for i := range 50 {
				src[0], src[4999] = byte(w), byte(i)
				b, err := a.Alloc(int64(1000+97*i), mem.Activation, "act")
				if err == nil {
					n := min(int(b.Size()), len(src))
					if err = g.CopyHtoD(b.Ptr(), src[:n]); err == nil {
						err = g.CopyDtoH(got[:n], b.Ptr())
					}
					if err == nil && string(got[:n]) != string(src[:n]) {
						err = errors.New("round trip differs")
					}
					a.Free(b)
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
		t.Errorf("Mapped after every buffer is freed: got %d, want 0", g.Mapped())
	}
}
