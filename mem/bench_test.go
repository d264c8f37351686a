package mem

import "testing"

// benchmarkAlloc allocates and frees buffers of the given sizes in a window
// of live buffers, as a step's temporaries would come and go.
func benchmarkAlloc(b *testing.B, sizes []int64) {
	a := NewAllocator(NewSimulated("sim", 1<<30), nil, AllocatorOptions{ChunkSize: 16 << 20})
	const window = 16
	var live [window]*Buffer
	for i := range live { // warm up: map the chunk and fill the owner table
		live[i], _ = a.Alloc(sizes[i%len(sizes)], Workspace, "bench")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j := i % window
		a.Free(live[j])
		buf, err := a.Alloc(sizes[i%len(sizes)], Workspace, "bench")
		if err != nil {
			b.Fatal(err)
		}
		live[j] = buf
	}
	b.StopTimer()
	for _, buf := range live {
		a.Free(buf)
	}
}

func BenchmarkAlloc(b *testing.B) {
	b.Run("mixed", func(b *testing.B) { benchmarkAlloc(b, []int64{100, 4096, 1000, 64 << 10, 300, 1 << 20, 48, 12345}) })
	b.Run("small", func(b *testing.B) { benchmarkAlloc(b, []int64{64, 128, 256, 512}) })
	b.Run("1MiB", func(b *testing.B) { benchmarkAlloc(b, []int64{1 << 20}) })
}
