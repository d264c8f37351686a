package data

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/headroom-ml/headroom/mem"
)

// collect reads a whole pass, converting each element with conv before the
// next call to Next releases it.
func collect[T, V any](t testing.TB, ds Dataset[T], cfg Config, conv func(T) V) ([]V, error) {
	t.Helper()
	it, err := ds.Iter(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []V
	for {
		x, err := it.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, conv(x))
	}
}

func ident[T any](x T) T { return x }

func ints(n int) []int {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = i
	}
	return xs
}

// writeRecords writes n records of size bytes; record i is filled with
// byte(i) and starts with i as a little-endian uint32.
func writeRecords(t testing.TB, n, size int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "records.bin")
	b := make([]byte, 0, n*size)
	for i := range n {
		rec := make([]byte, size)
		for j := range rec {
			rec[j] = byte(i)
		}
		binary.LittleEndian.PutUint32(rec, uint32(i))
		b = append(b, rec...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func recordIndex(r Record) int { return int(binary.LittleEndian.Uint32(r.Data)) }

// settleGoroutines waits until the goroutine count is back to base (the
// goroutines a pass waited for may still be unwinding, and context.AfterFunc
// runs its functions in goroutines of their own) and fails if it is not.
func settleGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<16)
		t.Fatalf("got %d goroutines, want %d:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

func wantFormatError(t *testing.T, err error, file string) *FormatError {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("got error %v, want a *FormatError", err)
	}
	if fe.File != file {
		t.Errorf("got FormatError.File %q, want %q", fe.File, file)
	}
	return fe
}

func smallConfig(budget int64) Config {
	return Config{Ledger: mem.NewLedger("test", 0), Budget: budget}
}

type contextT = context.Context

var ioErrUnexpectedEOF = io.ErrUnexpectedEOF
