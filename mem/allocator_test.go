package mem

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// recordingDevice wraps a Device and keeps its own list of live regions, so
// tests can check the allocator against the device rather than against the
// allocator's bookkeeping.
type recordingDevice struct {
	Device
	t *testing.T

	mu      sync.Mutex
	regions map[uintptr]int64
	maps    int
	unmaps  int
}

func newRecordingDevice(t *testing.T, dev Device) *recordingDevice {
	return &recordingDevice{Device: dev, t: t, regions: make(map[uintptr]int64)}
}

func (d *recordingDevice) Map(size int64) (Region, error) {
	r, err := d.Device.Map(size)
	if err != nil {
		return r, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.regions[r.Ptr] = r.Size
	d.maps++
	if c := d.Capacity(); c > 0 && d.Device.Mapped() > c {
		d.t.Errorf("device %s maps %d bytes, over its capacity %d", d.Name(), d.Device.Mapped(), c)
	}
	return r, nil
}

func (d *recordingDevice) Unmap(r Region) error {
	d.mu.Lock()
	if d.regions[r.Ptr] != r.Size {
		d.t.Errorf("unmap of %d bytes at %#x that the device did not map", r.Size, r.Ptr)
	}
	delete(d.regions, r.Ptr)
	d.unmaps++
	d.mu.Unlock()
	return d.Device.Unmap(r)
}

// regionOf returns the live region holding [p, p+n), or ok=false.
func (d *recordingDevice) regionOf(p uintptr, n int64) (base uintptr, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for base, size := range d.regions {
		if p >= base && p+uintptr(n) <= base+uintptr(size) {
			return base, true
		}
	}
	return 0, false
}

func mustAlloc(t *testing.T, a *Allocator, size int64, cat Category, owner string) *Buffer {
	t.Helper()
	b, err := a.Alloc(size, cat, owner)
	if err != nil {
		t.Fatalf("Alloc(%d, %s, %q): %v", size, cat, owner, err)
	}
	return b
}

func mustCheck(t *testing.T, a *Allocator) {
	t.Helper()
	if err := a.CheckInvariants(); err != nil {
		t.Fatalf("CheckInvariants: %v", err)
	}
}

func TestAllocBufferProperties(t *testing.T) {
	a := NewAllocator(NewSimulated("sim", 64<<20), nil, AllocatorOptions{ChunkSize: 1 << 20})
	for _, size := range []int64{1, 63, 64, 65, 1000, 4096, 1<<20 - 1, 1 << 20, 1<<20 + 1, 3<<20 + 17} {
		t.Run(FormatBytes(size), func(t *testing.T) {
			b := mustAlloc(t, a, size, Activation, "layer")
			if got, want := b.Size(), Align(size); got != want {
				t.Errorf("Size() = %d, want %d", got, want)
			}
			if got := int64(len(b.Bytes())); got != b.Size() {
				t.Errorf("len(Bytes()) = %d, want %d", got, b.Size())
			}
			if b.Ptr()%Alignment != 0 {
				t.Errorf("Ptr() = %#x, not %d-aligned", b.Ptr(), Alignment)
			}
			if b.Category() != Activation || b.Owner() != "layer" {
				t.Errorf("Category(), Owner() = %s, %q; want activation, \"layer\"", b.Category(), b.Owner())
			}
			if got, want := a.Ledger().Live(), b.Size(); got != want {
				t.Errorf("ledger Live = %d, want %d", got, want)
			}
			mustCheck(t, a)
			a.Free(b)
			mustCheck(t, a)
			if s := a.Stats(); s.Mapped != 0 || s.InUse != 0 || a.Ledger().Live() != 0 {
				t.Errorf("after Free: Mapped %d, InUse %d, ledger Live %d; want all 0", s.Mapped, s.InUse, a.Ledger().Live())
			}
		})
	}
}

func TestAllocZeroSize(t *testing.T) {
	a := NewAllocator(NewSimulated("sim", 1<<20), nil, AllocatorOptions{})
	b := mustAlloc(t, a, 0, Workspace, "empty")
	if b.Size() != 0 || len(b.Bytes()) != 0 || a.Stats().Mapped != 0 {
		t.Errorf("zero-size buffer: Size %d, len(Bytes) %d, Mapped %d; want 0, 0, 0", b.Size(), len(b.Bytes()), a.Stats().Mapped)
	}
	a.Free(b)
	mustCheck(t, a)
}

// TestCoalesceAndUnmap walks one chunk through splits and merges and checks
// the exact block layout after each step.
func TestCoalesceAndUnmap(t *testing.T) {
	dev := newRecordingDevice(t, NewSimulated("sim", 8<<20))
	a := NewAllocator(dev, nil, AllocatorOptions{ChunkSize: 1 << 20})
	x := mustAlloc(t, a, 1000, Param, "x") // 1024
	y := mustAlloc(t, a, 2048, Param, "y")
	z := mustAlloc(t, a, 4096, Param, "z")
	type want struct {
		chunks, blocks, freeBlocks int
		free, largest              int64
	}
	check := func(step string, w want) {
		t.Helper()
		mustCheck(t, a)
		s := a.Stats()
		got := want{s.Chunks, s.Blocks, s.FreeBlocks, s.Free, s.LargestFree}
		if got != w {
			t.Errorf("%s: got %+v, want %+v", step, got, w)
		}
		if s.Free > 0 && s.FreeBlocks == 1 && s.Fragmentation != 0 {
			t.Errorf("%s: Fragmentation = %v with one free block, want 0", step, s.Fragmentation)
		}
	}
	rest := int64(1<<20 - 1024 - 2048 - 4096)
	check("three live", want{1, 4, 1, rest, rest})
	if y.Ptr() != x.Ptr()+1024 || z.Ptr() != y.Ptr()+2048 {
		t.Errorf("buffers at %#x, %#x, %#x; want consecutive (best fit in one chunk)", x.Ptr(), y.Ptr(), z.Ptr())
	}
	a.Free(y)
	check("free y", want{1, 4, 2, rest + 2048, rest})
	a.Free(x)
	check("free x (merges with y's block)", want{1, 3, 2, rest + 3072, rest})
	// A request of 3072 bytes fits x+y's merged block exactly: best fit.
	w := mustAlloc(t, a, 3072, Param, "w")
	if w.Ptr() != x.Ptr() {
		t.Errorf("3072-byte request at %#x, want %#x (the exact fit)", w.Ptr(), x.Ptr())
	}
	check("alloc into merged block", want{1, 3, 1, rest, rest})
	a.Free(w)
	check("free w", want{1, 3, 2, rest + 3072, rest})
	if dev.unmaps != 0 {
		t.Errorf("chunk unmapped while z is live")
	}
	a.Free(z)
	check("free last", want{0, 0, 0, 0, 0})
	if dev.maps != 1 || dev.unmaps != 1 || dev.Mapped() != 0 {
		t.Errorf("device maps %d, unmaps %d, mapped %d; want 1, 1, 0", dev.maps, dev.unmaps, dev.Mapped())
	}
}

func TestDedicatedRegion(t *testing.T) {
	dev := newRecordingDevice(t, NewSimulated("sim", 64<<20))
	a := NewAllocator(dev, nil, AllocatorOptions{ChunkSize: 1 << 20})
	small := mustAlloc(t, a, 100, Input, "small")
	big := mustAlloc(t, a, 3<<20+100, Input, "big")
	s := a.Stats()
	if got, want := s.Mapped, int64(1<<20)+RoundPage(3<<20+100); got != want {
		t.Errorf("Mapped = %d, want %d (one chunk + the page-rounded request)", got, want)
	}
	if got, want := s.Mapped-s.InUse-s.Free, RoundPage(3<<20+100)-Align(3<<20+100); got != want {
		t.Errorf("dedicated slack = %d, want %d", got, want)
	}
	// The dedicated region's tail must not serve other requests.
	tiny := mustAlloc(t, a, 64, Input, "tiny")
	if base, _ := dev.regionOf(tiny.Ptr(), tiny.Size()); base == big.Ptr() {
		t.Errorf("a small request was placed in the tail of a dedicated region")
	}
	a.Free(big)
	mustCheck(t, a)
	if got, want := a.Stats().Mapped, int64(1<<20); got != want {
		t.Errorf("after freeing the large buffer Mapped = %d, want %d (its region unmapped)", got, want)
	}
	a.Free(small)
	a.Free(tiny)
	if got := a.Stats().Mapped; got != 0 {
		t.Errorf("Mapped = %d after freeing all, want 0", got)
	}
}

func TestAllocZeroed(t *testing.T) {
	a := NewAllocator(NewSimulated("sim", 8<<20), nil, AllocatorOptions{ChunkSize: 1 << 20})
	keep := mustAlloc(t, a, 64, Workspace, "keep") // keeps the chunk mapped
	dirty := mustAlloc(t, a, 8192, Workspace, "dirty")
	for i := range dirty.Bytes() {
		dirty.Bytes()[i] = 0xAB
	}
	p := dirty.Ptr()
	a.Free(dirty)
	z, err := a.AllocZeroed(10000, Workspace, "zeroed") // reuses dirty's bytes, then fresh ones
	if err != nil {
		t.Fatal(err)
	}
	if z.Ptr() != p {
		t.Fatalf("AllocZeroed at %#x, want the freed block at %#x", z.Ptr(), p)
	}
	for i, v := range z.Bytes() {
		if v != 0 {
			t.Fatalf("AllocZeroed byte %d = %#x, want 0", i, v)
		}
	}
	a.Free(z)
	a.Free(keep)
}

func TestFreeMisuse(t *testing.T) {
	a := NewAllocator(NewSimulated("sim", 8<<20), nil, AllocatorOptions{ChunkSize: 1 << 20})
	other := NewAllocator(NewSimulated("sim2", 8<<20), nil, AllocatorOptions{ChunkSize: 1 << 20})
	freed := mustAlloc(t, a, 128, Grad, "g")
	a.Free(freed)
	foreign := mustAlloc(t, other, 128, Grad, "h")
	defer other.Free(foreign)
	for _, tc := range []struct {
		name string
		b    *Buffer
		want string
	}{
		{"double free", freed, "mem: double free"},
		{"foreign", foreign, "mem: Free of a buffer"},
		{"zero value", &Buffer{}, "mem: Free of a buffer"},
		{"nil", nil, "mem: Free of a nil buffer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.HasPrefix(msg, tc.want) {
					t.Errorf("panic %v, want one starting %q", r, tc.want)
				}
			}()
			a.Free(tc.b)
		})
	}
	mustCheck(t, a)
	if got := a.Ledger().Live(); got != 0 {
		t.Errorf("ledger Live = %d after misuse, want 0", got)
	}
}

func TestAllocBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int64
		budget int64
		ok     bool
	}{
		{"one byte below", 1000, Align(1000) - 1, false},
		{"exact", 1000, Align(1000), true},
		{"exact aligned", 4096, 4096, true},
		{"below aligned", 4096, 4095, false},
		{"large exact", 5 << 20, 5 << 20, true},
		{"large below", 5<<20 + 1, 5 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := NewSimulated("sim", 64<<20)
			l := NewLedger("host", tc.budget)
			a := NewAllocator(dev, l, AllocatorOptions{ChunkSize: 1 << 20})
			b, err := a.Alloc(tc.size, Param, "w")
			if tc.ok {
				if err != nil {
					t.Fatalf("Alloc(%d) under budget %d: %v", tc.size, tc.budget, err)
				}
				if l.Live() != tc.budget || l.Peak() != tc.budget {
					t.Errorf("Live, Peak = %d, %d; want %d, %d", l.Live(), l.Peak(), tc.budget, tc.budget)
				}
				a.Free(b)
				return
			}
			var oom *OOMError
			if !errors.As(err, &oom) {
				t.Fatalf("Alloc(%d) under budget %d: got %v, want *OOMError", tc.size, tc.budget, err)
			}
			if oom.Request != Align(tc.size) || oom.Budget != tc.budget || oom.Ledger != "host" || oom.LargestFree < 0 {
				t.Errorf("OOMError{Request %d, Budget %d, Ledger %q, LargestFree %d}; want {%d, %d, \"host\", >= 0}",
					oom.Request, oom.Budget, oom.Ledger, oom.LargestFree, Align(tc.size), tc.budget)
			}
			if dev.Mapped() != 0 || l.Live() != 0 {
				t.Errorf("after refusal device Mapped %d, ledger Live %d; want 0, 0 (charge before map)", dev.Mapped(), l.Live())
			}
		})
	}
}

// TestLedgerPeakMatchesLiveBuffers checks that the ledger's measured peak is
// the largest sum of Align(size) over simultaneously live buffers.
func TestLedgerPeakMatchesLiveBuffers(t *testing.T) {
	l := NewLedger("sim", 0)
	a := NewAllocator(NewSimulated("sim", 256<<20), l, AllocatorOptions{ChunkSize: 1 << 20})
	rng := newRand(7)
	var live []*Buffer
	var sum, peak int64
	for i := 0; i < 3000; i++ {
		if len(live) > 0 && rng.IntN(5) < 2 {
			j := rng.IntN(len(live))
			sum -= Align(live[j].Size())
			a.Free(live[j])
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
			continue
		}
		size := randSize(rng, 2<<20)
		b := mustAlloc(t, a, size, Category(rng.IntN(int(NumCategories))), "op")
		live = append(live, b)
		sum += Align(size)
		peak = max(peak, sum)
		if l.Live() != sum {
			t.Fatalf("op %d: ledger Live %d, want %d", i, l.Live(), sum)
		}
	}
	if l.Peak() != peak {
		t.Errorf("ledger Peak = %d, want %d (sum of live aligned sizes)", l.Peak(), peak)
	}
	for _, b := range live {
		a.Free(b)
	}
	if l.Live() != 0 || l.Peak() != peak {
		t.Errorf("after freeing all: Live %d, Peak %d; want 0, %d", l.Live(), l.Peak(), peak)
	}
}

func TestSimulatedCapacity(t *testing.T) {
	const capacity = 4 << 20
	dev := newRecordingDevice(t, NewSimulated("gpu-sim", capacity))
	l := NewLedger("root", 0)
	a := NewAllocator(dev, l, AllocatorOptions{ChunkSize: 1 << 20})
	var live []*Buffer
	var err error
	for {
		var b *Buffer
		if b, err = a.Alloc(300<<10, Activation, "act"); err != nil {
			break
		}
		live = append(live, b)
		if len(live) > 100 {
			t.Fatal("capacity never refused a request")
		}
	}
	var oom *OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("got %v, want *OOMError", err)
	}
	if oom.Ledger != "gpu-sim" || oom.Budget != capacity || oom.Owner != "act" || oom.Request != 300<<10 {
		t.Errorf("OOMError{Ledger %q, Budget %d, Owner %q, Request %d}; want {\"gpu-sim\", %d, \"act\", %d}",
			oom.Ledger, oom.Budget, oom.Owner, oom.Request, capacity, 300<<10)
	}
	if oom.Totals[Activation] != int64(len(live))*(300<<10) || len(oom.Top) == 0 || oom.Top[0].Owner != "act" {
		t.Errorf("OOMError totals %v, top %v; want the %d live activation buffers", oom.Totals, oom.Top, len(live))
	}
	if !strings.Contains(oom.Error(), "gpu-sim") {
		t.Errorf("Error() = %q, want it to name the device", oom.Error())
	}
	if got, want := l.Live(), int64(len(live))*(300<<10); got != want {
		t.Errorf("ledger Live = %d after refusal, want %d (charge released)", got, want)
	}
	if dev.Mapped() > capacity {
		t.Errorf("device Mapped %d > capacity %d", dev.Mapped(), capacity)
	}
	for _, b := range live {
		a.Free(b)
	}
	mustCheck(t, a)
	if dev.Mapped() != 0 {
		t.Errorf("device Mapped %d after freeing all, want 0", dev.Mapped())
	}
}

// TestSmallDeviceFallback: a device smaller than one chunk still serves
// requests, mapping page-rounded regions.
func TestSmallDeviceFallback(t *testing.T) {
	dev := NewSimulated("tiny", 64<<10)
	a := NewAllocator(dev, nil, AllocatorOptions{}) // 64 MiB chunks
	b := mustAlloc(t, a, 1000, Param, "w")
	c := mustAlloc(t, a, 1000, Param, "v") // fits in the first region's tail
	if got := dev.Mapped(); got != PageSize {
		t.Errorf("device Mapped = %d, want %d", got, PageSize)
	}
	if _, err := a.Alloc(64<<10, Param, "too big"); !errors.As(err, new(*OOMError)) {
		t.Errorf("Alloc past capacity: got %v, want *OOMError", err)
	}
	a.Free(b)
	a.Free(c)
	mustCheck(t, a)
}

func TestCPUDevice(t *testing.T) {
	dev := CPU()
	if dev != CPU() || dev.Name() != "cpu" || !dev.Host() || dev.Capacity() != 0 {
		t.Fatalf("CPU() = %s host=%v capacity=%d; want one shared host device \"cpu\" with capacity 0", dev.Name(), dev.Host(), dev.Capacity())
	}
	before := dev.Mapped()
	a := NewAllocator(dev, NewLedger("host", 0), AllocatorOptions{ChunkSize: 1 << 20})
	b := mustAlloc(t, a, 5000, IO, "ckpt")
	for i := range b.Bytes() {
		b.Bytes()[i] = byte(i)
	}
	if got := dev.Mapped() - before; got != 1<<20 {
		t.Errorf("CPU Mapped grew by %d, want %d", got, 1<<20)
	}
	a.Free(b)
	if got := dev.Mapped(); got != before {
		t.Errorf("CPU Mapped = %d after Free, want %d (returned to the OS)", got, before)
	}
	if _, err := dev.Map(100); err == nil {
		t.Errorf("Map(100) succeeded, want an error (not a multiple of PageSize)")
	}
	if err := dev.Unmap(Region{Ptr: 4096, Size: 4096}); err == nil {
		t.Errorf("Unmap of a foreign region succeeded, want an error")
	}
}

func TestConcurrentAlloc(t *testing.T) {
	dev := NewSimulated("sim", 512<<20)
	l := NewLedger("sim", 0)
	a := NewAllocator(dev, l, AllocatorOptions{ChunkSize: 1 << 20})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := newRand(seed)
			var live []tagged
			for i := 0; i < 1500; i++ {
				if len(live) > 0 && rng.IntN(2) == 0 {
					j := rng.IntN(len(live))
					if err := live[j].check(); err != nil {
						t.Errorf("goroutine %d: %v", seed, err)
					}
					a.Free(live[j].b)
					live[j] = live[len(live)-1]
					live = live[:len(live)-1]
					continue
				}
				b, err := a.Alloc(randSize(rng, 1<<20), Workspace, "worker")
				if err != nil {
					t.Errorf("goroutine %d: %v", seed, err)
					return
				}
				live = append(live, newTagged(b))
			}
			for _, x := range live {
				a.Free(x.b)
			}
		}(uint64(g))
	}
	wg.Wait()
	mustCheck(t, a)
	if s := a.Stats(); s.Mapped != 0 || l.Live() != 0 {
		t.Errorf("after all goroutines freed: Mapped %d, ledger Live %d; want 0, 0", s.Mapped, l.Live())
	}
}
