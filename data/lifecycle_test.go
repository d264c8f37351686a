package data

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// decodeRecord views a test record as a Sample: X = its bytes after the
// 4-byte index, Y = the index.
func decodeRecord(ctx context.Context, r Record) (Sample, error) {
	x, err := tensor.FromBytes(tensor.Uint8, tensor.Shape{len(r.Data) - 4}, r.Data[4:])
	if err != nil {
		return Sample{}, err
	}
	y, err := tensor.FromBytes(tensor.Int32, nil, r.Data[:4])
	if err != nil {
		return Sample{}, err
	}
	return NewSample(x, y, r.Block()), nil
}

// fullPipeline uses every goroutine-starting stage.
func fullPipeline(path string, size int) Dataset[Batch] {
	files := FromSlice([]string{path, path})
	recs := Interleave(files, func(p string) Dataset[Record] {
		return FixedLengthRecords(p, size, RecordOptions{BufferSize: 4096})
	}, 2, 3, Parallel(2))
	samples := Map(recs.Shuffle(64, 1), "decode", decodeRecord, Parallel(Autotune))
	samples = Map(samples.Prefetch(3), "pass", func(ctx context.Context, s Sample) (Sample, error) {
		s.Retain()
		return s, nil
	}, Parallel(2), Unordered())
	return Batches(samples, 8, false).Prefetch(Autotune)
}

func TestGoroutinesReturnToBaseline(t *testing.T) {
	path := writeRecords(t, 500, 64)
	ds := fullPipeline(path, 64)
	scenarios := []struct {
		name string
		run  func(t *testing.T, ledger *mem.Ledger)
	}{
		{"read to the end", func(t *testing.T, l *mem.Ledger) {
			it, err := ds.Iter(context.Background(), Config{Ledger: l, Budget: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				b, err := it.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n += b.Size
			}
			if n != 1000 {
				t.Errorf("got %d samples, want 1000", n)
			}
			it.Close()
		}},
		{"cancel mid-way", func(t *testing.T, l *mem.Ledger) {
			ctx, cancel := context.WithCancel(context.Background())
			it, err := ds.Iter(ctx, Config{Ledger: l, Budget: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				if _, err := it.Next(); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			var got error
			for got == nil {
				_, got = it.Next()
			}
			if !errors.Is(got, context.Canceled) {
				t.Errorf("got %v after cancel, want context.Canceled", got)
			}
			it.Close()
		}},
		{"abandon and Close", func(t *testing.T, l *mem.Ledger) {
			it, err := ds.Iter(context.Background(), Config{Ledger: l, Budget: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := it.Next(); err != nil {
					t.Fatal(err)
				}
			}
			it.Close()
			it.Close() // twice is fine
		}},
		{"range with break", func(t *testing.T, l *mem.Ledger) {
			for _, err := range ds.All(context.Background(), Config{Ledger: l, Budget: 1 << 20}) {
				if err != nil {
					t.Fatal(err)
				}
				break
			}
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			l := mem.NewLedger("host", 0)
			sc.run(t, l)
			settleGoroutines(t, base)
			if live := l.Live(); live != 0 {
				t.Errorf("got %d bytes live on the ledger after Close, want 0: %v", live, l.Top(5))
			}
		})
	}
}

func TestLedgerStaysUnderBudget(t *testing.T) {
	const size, n = 1024, 3000
	path := writeRecords(t, n, size)
	for _, budget := range []int64{256 << 10, 1 << 20, 8 << 20} {
		l := mem.NewLedger("host", 0)
		ds := Batches(Map(FixedLengthRecords(path, size, RecordOptions{BufferSize: 8192}).Shuffle(10000, 3),
			"decode", decodeRecord, Parallel(Autotune)), 16, false).Prefetch(Autotune)
		it, err := ds.Iter(context.Background(), Config{Ledger: l, Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for {
			b, err := it.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("budget %d: %v", budget, err)
			}
			got += b.Size
		}
		peak := it.Ledger().Peak()
		var buffered int
		for _, st := range it.Stats().Stages {
			if st.Name == "shuffle(10000)" {
				buffered = st.Buffered
			}
		}
		it.Close()
		if got != n {
			t.Errorf("budget %d: got %d samples, want %d", budget, got, n)
		}
		if peak > budget {
			t.Errorf("budget %d: ledger peak %d exceeds it", budget, peak)
		}
		if l.Peak() != peak || l.Live() != 0 {
			t.Errorf("budget %d: host ledger peak %d live %d, want %d and 0", budget, l.Peak(), l.Live(), peak)
		}
		_ = buffered
	}
}

func TestBackpressureWaitsInsteadOfGrowing(t *testing.T) {
	const size = 4096
	path := writeRecords(t, 200, size)
	budget := int64(64 << 10)
	ds := FixedLengthRecords(path, size, RecordOptions{BufferSize: 4096}).Prefetch(32)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	it, err := ds.Iter(ctx, Config{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	held := 0
	for {
		r, err := it.Next()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want the pass to wait for memory until the deadline", err)
			}
			break
		}
		r.Retain() // the consumer keeps every record: nothing comes back
		held++
	}
	if held >= 200 || held == 0 {
		t.Errorf("got %d records held, want some but not all 200 within %d bytes", held, budget)
	}
	if peak := it.Ledger().Peak(); peak > budget {
		t.Errorf("ledger peak %d exceeds the budget %d", peak, budget)
	}
}

func TestRequestLargerThanBudgetFails(t *testing.T) {
	path := writeRecords(t, 4, 1<<16)
	_, err := collect(t, FixedLengthRecords(path, 1<<16, RecordOptions{BufferSize: 4096}), Config{Budget: 32 << 10}, ident[Record])
	var oom *mem.OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("got %v, want an error wrapping *mem.OOMError", err)
	}
}

func TestMemoryCacheOutgrowingBudgetFails(t *testing.T) {
	path := writeRecords(t, 400, 1024)
	ds := FixedLengthRecords(path, 1024, RecordOptions{BufferSize: 4096}).Cache("").Repeat(2)
	_, err := collect(t, ds, Config{Budget: 64 << 10}, ident[Record])
	var oom *mem.OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("got %v, want an error wrapping *mem.OOMError", err)
	}
}

func TestCacheFile(t *testing.T) {
	path := writeRecords(t, 20, 16)
	cache := t.TempDir() + "/samples.cache"
	ds := Map(FixedLengthRecords(path, 16, RecordOptions{}), "decode", decodeRecord)
	opened := 0
	counted := Map(ds, "count", func(ctx context.Context, s Sample) (Sample, error) {
		opened++
		s.Retain()
		return s, nil
	}).Cache(cache)
	conv := func(s Sample) [2]int32 {
		return [2]int32{s.Y.Int32s()[0], int32(s.X.Uint8s()[0])}
	}
	first, err := collect(t, counted.Repeat(2), Config{}, conv)
	if err != nil {
		t.Fatal(err)
	}
	second, err := collect(t, counted, Config{}, conv)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 40 || opened != 20 {
		t.Fatalf("got %d samples and %d upstream reads, want 40 and 20", len(first), opened)
	}
	for i := range 20 {
		want := [2]int32{int32(i), int32(i)}
		if first[i] != want || first[20+i] != want || second[i] != want {
			t.Fatalf("sample %d: got %v, %v, %v, want %v", i, first[i], first[20+i], second[i], want)
		}
	}
	// a cache file of the wrong element type is refused
	if _, err := collect(t, FromSlice(ints(3)).Cache(t.TempDir()+"/ints"), Config{}, ident[int]); err == nil {
		t.Errorf("got no error caching ints to a file")
	}
	_ = binary.LittleEndian
}

// A pass abandoned part way keeps no cache and leaves no temporary file.
func TestCacheFileAbandoned(t *testing.T) {
	path := writeRecords(t, 20, 16)
	dir := t.TempDir()
	ds := Map(FixedLengthRecords(path, 16, RecordOptions{}), "decode", decodeRecord).Cache(dir + "/samples.cache").Take(5)
	got, err := collect(t, ds, Config{}, func(s Sample) int32 { return s.Y.Int32s()[0] })
	if err != nil || len(got) != 5 {
		t.Fatalf("got %d samples (%v), want 5", len(got), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("got %d files after an abandoned pass (%v), want none", len(ents), ents)
	}
}
