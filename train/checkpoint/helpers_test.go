package checkpoint

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"unsafe"

	"github.com/headroom-ml/headroom/tensor"
)

// buildFile lays out a safetensors file by hand: the header's length as a
// little-endian uint64, the header, the data.
func buildFile(header string, data []byte) []byte {
	return withLength(uint64(len(header)), append([]byte(header), data...))
}

// withLength prefixes rest with n as the 8-byte header length.
func withLength(n uint64, rest []byte) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
}

// encodeBytes returns what Save would write for entries and meta.
func encodeBytes(t testing.TB, entries []Entry, meta map[string]string) []byte {
	t.Helper()
	h, err := prepare(entries, meta)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := h.writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	slices.Sort(names)
	return names
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// stepEntries is the checkpoint content of a training step in the directory
// tests: every byte derives from step, so a loaded file can be checked
// against its step exactly. w is [rows, 1024] float32 (rows*4 KiB).
func stepEntries(step int64, rows int) ([]Entry, map[string]string) {
	rng := rand.New(rand.NewPCG(uint64(step), 0x5eed))
	w := make([]float32, rows*1024)
	for i := range w {
		w[i] = rng.Float32()*2 - 1
	}
	m := make([]float32, len(w))
	for i := range m {
		m[i] = w[i] * float32(step%7+1)
	}
	mask := make([]bool, 37)
	for i := range mask {
		mask[i] = rng.IntN(2) == 1
	}
	entries := []Entry{
		{"dense/kernel", tensor.FromSlice(tensor.Shape{rows, 1024}, w)},
		{"optstate/dense/kernel/m", tensor.FromSlice(tensor.Shape{rows, 1024}, m)},
		{"step", tensor.FromSlice(tensor.Shape{}, []int64{step})},
		{"mask", tensor.FromSlice(tensor.Shape{37}, mask)},
	}
	meta := map[string]string{
		KeyEpoch:        strconv.FormatInt(step/10, 10),
		KeyDataPosition: strconv.FormatInt(step*128, 10),
	}
	return entries, meta
}

// checkStepFile loads path and reports whether its content is exactly
// stepEntries(step, rows).
func checkStepFile(t *testing.T, path string, step int64, rows int) {
	t.Helper()
	f, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	want, meta := stepEntries(step, rows)
	if got := len(f.Entries); got != len(want) {
		t.Fatalf("%s: got %d entries, want %d", path, got, len(want))
	}
	for _, e := range want {
		got, ok := f.Get(e.Name)
		if !ok || got.String() != e.Tensor.String() || !bytes.Equal(got.Bytes(), e.Tensor.Bytes()) {
			t.Fatalf("%s: tensor %q is not the content of step %d (got %v, found %v)", path, e.Name, step, got, ok)
		}
	}
	for k, v := range meta {
		if f.Meta[k] != v {
			t.Fatalf("%s: metadata %s: got %q, want %q", path, k, f.Meta[k], v)
		}
	}
	if got, want := f.Meta[KeyStep], strconv.FormatInt(step, 10); got != want {
		t.Fatalf("%s: metadata step: got %q, want %q", path, got, want)
	}
}
