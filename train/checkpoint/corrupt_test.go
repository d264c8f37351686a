package checkpoint

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// The base file of the corrupt cases: a F32[2] at [0, 8) and b U8[3] at
// [8, 11).
const baseHeader = `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}}`

var baseData = []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 1, 2, 3}

// corruptCase is one malformed file with the offset its error must name.
type corruptCase struct {
	name string
	file []byte
	off  int64  // want FormatError.Offset
	msg  string // want a substring of FormatError.Msg
}

func corruptCases() []corruptCase {
	// entry returns the offset of the n-th (0-based) occurrence of key's
	// quoted name in header h.
	entry := func(h, key string, n int) int64 {
		i, from := -1, 0
		for range n + 1 {
			i = strings.Index(h[from:], `"`+key+`"`) + from
			from = i + 1
		}
		return 8 + int64(i)
	}
	// with replaces old by new in the base header.
	with := func(old, new string) string {
		if !strings.Contains(baseHeader, old) {
			panic("corruptCases: " + old)
		}
		return strings.Replace(baseHeader, old, new, 1)
	}
	base := func(h string) []byte { return buildFile(h, baseData) }
	dataStart := int64(8 + len(baseHeader))
	var cases []corruptCase
	add := func(name string, file []byte, off int64, msg string) {
		cases = append(cases, corruptCase{name, file, off, msg})
	}

	// Header length.
	add("empty file", nil, 0, "too few")
	add("truncated header length", []byte{5, 0, 0, 0, 0}, 0, "too few")
	add("header length over limit", withLength(100_000_001, make([]byte, 64)), 0, "exceeds the limit")
	add("header length max uint64", withLength(^uint64(0), make([]byte, 64)), 0, "exceeds the limit")
	add("header length past end", withLength(1000, []byte(`{}`)), 0, "past the end")
	add("header length zero", withLength(0, nil), 8, "start with")

	// Header text.
	add("invalid UTF-8", buildFile(`{"a`+"\xff"+`":1}`, nil), 8+3, "UTF-8")
	add("leading space", buildFile(` {}`, nil), 8, "start with")
	add("array header", buildFile(`[1]`, nil), 8, "start with")
	h := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},}`
	add("trailing comma", buildFile(h, baseData[:8]), 8+int64(len(h))-1, "not valid JSON")
	h = `{"a":{"dtype":"F32" "shape":[2],"data_offsets":[0,8]}}`
	add("missing comma", buildFile(h, baseData[:8]), 8+int64(strings.Index(h, ` "shape`))+1, "not valid JSON")
	add("garbage after object", buildFile(`{}  x`, nil), 8+4, "after its JSON object")
	h = `{"a":{"dtype"`
	add("JSON ends early", buildFile(h, nil), 8+int64(len(h)), "ends early")

	// Tensor entries.
	h = with(`"F32"`, `"F8_E4M3"`)
	add("unknown dtype", base(h), entry(h, "a", 0), `dtype "F8_E4M3" is not supported`)
	h = with(`"U8"`, `"I8"`)
	add("unsupported dtype I8", base(h), entry(h, "b", 0), `dtype "I8" is not supported`)
	h = with(`"F32"`, `4`)
	add("dtype not a string", base(h), entry(h, "a", 0), "dtype is not a string")
	h = with(`[2]`, `[-2]`)
	add("negative dimension", base(h), entry(h, "a", 0), "non-negative integers")
	h = with(`[2]`, `[2.0]`)
	add("fractional dimension", base(h), entry(h, "a", 0), "non-negative integers")
	h = with(`[2]`, `[2e0]`)
	add("exponent dimension", base(h), entry(h, "a", 0), "non-negative integers")
	h = with(`[2]`, `[1,1,1,1,1,1,1,1,2]`)
	add("rank 9", base(h), entry(h, "a", 0), "more than 8 numbers")
	h = with(`[2]`, `[4294967296,4294967296,4]`)
	add("shape overflow", base(h), entry(h, "a", 0), "overflows")
	h = with(`[2]`, `[99999999999999999999]`)
	add("dimension over int64", base(h), entry(h, "a", 0), "non-negative integers")
	h = with(`"shape":[2]`, `"shape":2`)
	add("shape not an array", base(h), entry(h, "a", 0), "shape is not an array")
	h = with(`[0,8]`, `[0]`)
	add("one offset", base(h), entry(h, "a", 0), "want 2")
	h = with(`[0,8]`, `[0,8,8]`)
	add("three offsets", base(h), entry(h, "a", 0), "want 2")
	h = with(`[0,8]`, `["0",8]`)
	add("offset is a string", base(h), entry(h, "a", 0), "non-negative integers")
	h = with(`"dtype":"F32",`, ``)
	add("no dtype", base(h), entry(h, "a", 0), "no dtype")
	h = with(`"shape":[2],`, ``)
	add("no shape", base(h), entry(h, "a", 0), "no shape")
	h = with(`,"data_offsets":[0,8]`, ``)
	add("no data_offsets", base(h), entry(h, "a", 0), "no data_offsets")
	h = `{"a":5}`
	add("entry not an object", buildFile(h, nil), entry(h, "a", 0), "not an object")
	h = with(`"dtype":"F32"`, `"dtype":"F32","dtype":"F32"`)
	add("field twice", base(h), entry(h, "a", 0), "dtype appears twice")
	h = with(`"b":{"dtype":"U8"`, `"a":{"dtype":"U8"`)
	add("tensor twice", base(h), entry(h, "a", 1), `"a" appears twice`)

	// Metadata.
	h = `{"__metadata__":[1]}`
	add("metadata not an object", buildFile(h, nil), 8+1, "not an object of strings")
	h = `{"__metadata__":{"k":"v","n":1}}`
	add("metadata value not a string", buildFile(h, nil), entry(h, "n", 0), `value of "n" is not a string`)
	h = `{"__metadata__":{"k":"v","k":"w"}}`
	add("metadata key twice", buildFile(h, nil), entry(h, "k", 1), `key "k" appears twice`)
	h = `{"__metadata__":{"data_crc32c":"00000000"},` + baseHeader[1:]
	add("checksum mismatch", buildFile(h, baseData), 8+int64(len(h)), "checksum")
	h = `{"__metadata__":{"data_crc32c":"xyz"},` + baseHeader[1:]
	add("checksum malformed", buildFile(h, baseData), 8+1, "8 hex digits")

	// Data layout.
	h = with(`[0,8]`, `[8,0]`)
	add("end before begin", base(h), entry(h, "a", 0), "end before they begin")
	h = with(`"shape":[3],"data_offsets":[8,11]`, `"shape":[12],"data_offsets":[8,20]`)
	add("offsets past end of file", base(h), entry(h, "b", 0), "past the end of the file")
	add("truncated data", buildFile(baseHeader, baseData[:10]), entry(baseHeader, "b", 0), "past the end of the file")
	h = with(`"shape":[2]`, `"shape":[3]`)
	add("shape and offsets disagree", base(h), entry(h, "a", 0), "needs 12 bytes")
	h = with(`[8,11]`, `[9,12]`)
	add("hole", buildFile(h, append(baseData[:8:8], 0, 1, 2, 3)), dataStart+8, "belong to no tensor")
	h = with(`[8,11]`, `[4,7]`)
	add("overlap", buildFile(h, baseData[:8]), 8+int64(len(h))+4, `overlaps tensor "a"`)
	add("trailing bytes", buildFile(baseHeader, append(baseData[:11:11], 9)), dataStart+11, "belong to no tensor")
	return cases
}

func TestParseCorrupt(t *testing.T) {
	for _, tc := range corruptCases() {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(bytes.NewReader(tc.file), int64(len(tc.file)), tc.name+".safetensors")
			if err == nil {
				t.Fatalf("got a file with %d entries, want an error", len(f.Entries))
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %T %v, want *FormatError", err, err)
			}
			if fe.File != tc.name+".safetensors" {
				t.Errorf("got File %q, want %q", fe.File, tc.name+".safetensors")
			}
			if fe.Offset != tc.off {
				t.Errorf("got Offset %d, want %d (%v)", fe.Offset, tc.off, err)
			}
			if !strings.Contains(fe.Msg, tc.msg) {
				t.Errorf("got Msg %q, want it to contain %q", fe.Msg, tc.msg)
			}
			if !strings.Contains(err.Error(), fe.File) {
				t.Errorf("got Error() %q, want it to name %s", err, fe.File)
			}
		})
	}
}

func TestParseBase(t *testing.T) {
	// The base of the corrupt cases is itself valid, so each case fails for
	// its own defect.
	file := buildFile(baseHeader, baseData)
	f, err := Parse(bytes.NewReader(file), int64(len(file)), "base")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := f.Get("a")
	b, _ := f.Get("b")
	if got := a.Float32s(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("a: got %v, want [1 2]", got)
	}
	if got := b.Uint8s(); !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Errorf("b: got %v, want [1 2 3]", got)
	}
}

func TestLoadCorruptFile(t *testing.T) {
	dir := t.TempDir()
	good := encodeBytes(t, []Entry{{"w", filled(tensor.Float32, tensor.Shape{64}, 1)}}, nil)
	flipped := bytes.Clone(good)
	flipped[len(flipped)-5] ^= 0x10
	tests := []struct {
		name string
		file []byte
		off  int64
	}{
		{"truncated by one byte", good[:len(good)-1], 8 + int64(bytes.Index(good[8:], []byte(`"w"`)))},
		{"data bit flipped", flipped, int64(len(good) - 64*4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			if err := os.WriteFile(path, tt.file, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != path {
				t.Fatalf("got %v, want a *FormatError naming %s", err, path)
			}
			if fe.Offset != tt.off {
				t.Errorf("got Offset %d, want %d (%v)", fe.Offset, tt.off, err)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing): got %v, want an error wrapping fs.ErrNotExist", err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("Load(dir): got %v, want an error saying it is a directory", err)
	}
}

// FuzzParse checks that no input makes Parse panic, that every error is a
// *FormatError naming the file and an offset inside it, and that whatever
// parses survives a save and a re-parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add(buildFile(baseHeader, baseData))
	for _, tc := range corruptCases() {
		f.Add(tc.file)
	}
	entries, meta := stepEntries(3, 1)
	f.Add(encodeBytes(f, entries[2:], meta))
	f.Add(encodeBytes(f, []Entry{{"s", filled(tensor.BFloat16, tensor.Shape{2, 0}, 0)}, {"t", filled(tensor.Float64, nil, 0)}}, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %T %v, want *FormatError", err, err)
			}
			if fe.File != "fuzz" || fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Fatalf("got File %q Offset %d, want \"fuzz\" and an offset in [0, %d]", fe.File, fe.Offset, len(data))
			}
			return
		}
		again := encodeBytes(t, file.Entries, file.Meta)
		file2, err := Parse(bytes.NewReader(again), int64(len(again)), "again")
		if err != nil {
			t.Fatalf("re-parse of a saved parsed file: %v", err)
		}
		if len(file2.Entries) != len(file.Entries) {
			t.Fatalf("re-parse: got %d entries, want %d", len(file2.Entries), len(file.Entries))
		}
		for _, e := range file.Entries {
			got, ok := file2.Get(e.Name)
			if !ok || got.String() != e.Tensor.String() || !bytes.Equal(got.Bytes(), e.Tensor.Bytes()) {
				t.Fatalf("re-parse: tensor %q: got %v, want %v", e.Name, got, e.Tensor)
			}
		}
		m1, m2 := maps.Clone(file.Meta), maps.Clone(file2.Meta)
		delete(m1, KeyDataCRC32C)
		delete(m2, KeyDataCRC32C)
		if !maps.Equal(m1, m2) {
			t.Fatalf("re-parse: got metadata %q, want %q", m2, m1)
		}
	})
}
