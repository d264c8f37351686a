package checkpoint

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

var allDTypes = []tensor.DType{
	tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16,
	tensor.Int32, tensor.Int64, tensor.Uint8, tensor.Bool,
}

// filled returns a tensor whose element i holds a value derived from i and
// seed that is exact in every dtype (small integers, halves, sign changes).
func filled(dt tensor.DType, shape tensor.Shape, seed int) tensor.Tensor {
	t := tensor.New(dt, shape)
	for i := range t.Len() {
		v := float64((i*7+seed)%23) - 11
		switch {
		case dt == tensor.Bool:
			v = float64((i + seed) % 2)
		case dt == tensor.Uint8:
			v = float64((i*31 + seed) % 256)
		case dt.IsFloat():
			v /= 2
		}
		t.SetFloat64At(i, v)
	}
	return t
}

// roundTrip saves entries and meta in a temporary directory and loads them.
func roundTrip(t *testing.T, entries []Entry, meta map[string]string) *File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rt.safetensors")
	if err := Save(path, entries, meta); err != nil {
		t.Fatalf("Save: %v", err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return f
}

func TestRoundTripDTypesAndShapes(t *testing.T) {
	shapes := []tensor.Shape{
		{},                       // scalar
		{0},                      // empty
		{3, 0, 2},                // empty with other dims
		{5},                      // vector
		{2, 3},                   // matrix
		{1, 2, 1, 2, 1, 2, 1, 2}, // MaxRank
	}
	for _, dt := range allDTypes {
		for _, sh := range shapes {
			t.Run(fmt.Sprintf("%v%v", dt, sh), func(t *testing.T) {
				want := filled(dt, sh, 3)
				f := roundTrip(t, []Entry{{Name: "x", Tensor: want}}, nil)
				got, ok := f.Get("x")
				if !ok {
					t.Fatalf("Get(x): not found")
				}
				if got.DType() != dt || !got.Shape().Equal(sh) {
					t.Fatalf("got %v, want %v", got, want)
				}
				if !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Fatalf("got bytes %x, want %x", got.Bytes(), want.Bytes())
				}
				if got.Shape() == nil && len(sh) > 0 {
					t.Fatalf("got nil shape, want %v", sh)
				}
			})
		}
	}
}

func TestRoundTripManyTensors(t *testing.T) {
	var entries []Entry
	for i, dt := range allDTypes {
		entries = append(entries,
			Entry{Name: fmt.Sprintf("layer%d/w", i), Tensor: filled(dt, tensor.Shape{3, i + 1}, i)},
			Entry{Name: fmt.Sprintf("layer%d/empty", i), Tensor: filled(dt, tensor.Shape{0, 4}, i)},
			Entry{Name: fmt.Sprintf("layer%d/scalar", i), Tensor: filled(dt, nil, i)},
		)
	}
	f := roundTrip(t, entries, map[string]string{"epoch": "2"})
	if got, want := len(f.Entries), len(entries); got != want {
		t.Fatalf("got %d entries, want %d", got, want)
	}
	for _, e := range entries {
		got, ok := f.Get(e.Name)
		if !ok {
			t.Fatalf("Get(%q): not found", e.Name)
		}
		if got.String() != e.Tensor.String() || !bytes.Equal(got.Bytes(), e.Tensor.Bytes()) {
			t.Errorf("%s: got %v %x, want %v %x", e.Name, got, got.Bytes(), e.Tensor, e.Tensor.Bytes())
		}
		// Every loaded tensor is viewable in place: its buffer is aligned.
		if b := got.Bytes(); len(b) > 0 {
			if addr := uintptrOf(b); addr%8 != 0 {
				t.Errorf("%s: buffer at %#x, want 8-byte aligned", e.Name, addr)
			}
		}
	}
	if _, ok := f.Get("missing"); ok {
		t.Errorf("Get(missing): got found, want not found")
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	meta := map[string]string{
		KeyStep:           "1234567890123",
		KeyEpoch:          "7",
		KeyRNGState:       "AAECAwQFBgcICQ==",
		KeyDataPosition:   `{"shard":3,"offset":998}`,
		"quote\"back\\":   "line\nbreak\ttab\r\x01\x1f",
		"unicode ключ 🔑":  "значение ✓",
		"empty":           "",
		"":                "empty key",
		"html <&>":        "</script>",
		"optim.lr":        "0.001",
		"data.shuf_seed":  "-9223372036854775808",
		"nul\x00inside":   "a\x00b",
		"long":            strings.Repeat("x", 10000),
		"surrogate-ish 𝄞": "𝄞",
	}
	f := roundTrip(t, []Entry{{Name: "w", Tensor: filled(tensor.Float32, tensor.Shape{2}, 0)}}, meta)
	got := maps.Clone(f.Meta)
	crc, ok := got[KeyDataCRC32C]
	if !ok || len(crc) != 8 {
		t.Errorf("got %s %q, want 8 hex digits", KeyDataCRC32C, crc)
	}
	delete(got, KeyDataCRC32C)
	if !maps.Equal(got, meta) {
		t.Errorf("got metadata %q, want %q", got, meta)
	}

	// No metadata at all still gives a non-nil map holding only the checksum.
	f = roundTrip(t, nil, nil)
	if len(f.Entries) != 0 || len(f.Meta) != 1 {
		t.Errorf("got %d entries and metadata %q, want 0 entries and only %s", len(f.Entries), f.Meta, KeyDataCRC32C)
	}
}

// TestHeaderBytes checks Save's output byte by byte against a file built by
// hand from the published format: 8-byte little-endian length, compact JSON
// header padded with spaces to a multiple of 8, then the data, tensors in
// descending dtype alignment then name order, as the reference writer does.
func TestHeaderBytes(t *testing.T) {
	weight := tensor.FromSlice(tensor.Shape{2, 2}, []float32{1, -2, 0.5, 3})
	bias, _ := tensor.FromBytes(tensor.Float16, tensor.Shape{3}, []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38})
	count := tensor.FromSlice(tensor.Shape{}, []int64{7})
	flags := tensor.FromSlice(tensor.Shape{2}, []bool{true, false})
	entries := []Entry{{"weight", weight}, {"bias", bias}, {"count", count}, {"flags", flags}}

	data := []byte{
		0x07, 0, 0, 0, 0, 0, 0, 0, // count I64 7
		0x00, 0x00, 0x80, 0x3f, // weight F32 1.0
		0x00, 0x00, 0x00, 0xc0, // -2.0
		0x00, 0x00, 0x00, 0x3f, // 0.5
		0x00, 0x00, 0x40, 0x40, // 3.0
		0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38, // bias F16 1.0, -2.0, 0.5
		0x01, 0x00, // flags BOOL true, false
	}
	crc := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	header := `{"__metadata__":{"data_crc32c":"` + fmt.Sprintf("%08x", crc) + `","epoch":"3","step":"12"},` +
		`"count":{"dtype":"I64","shape":[],"data_offsets":[0,8]},` +
		`"weight":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]},` +
		`"bias":{"dtype":"F16","shape":[3],"data_offsets":[24,30]},` +
		`"flags":{"dtype":"BOOL","shape":[2],"data_offsets":[30,32]}}`
	for len(header)%8 != 0 {
		header += " "
	}
	n := len(header)
	want := []byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24), 0, 0, 0, 0}
	want = append(want, header...)
	want = append(want, data...)

	path := filepath.Join(t.TempDir(), "h.safetensors")
	if err := Save(path, entries, map[string]string{"step": "12", "epoch": "3"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("byte %d: got %q..., want %q...", i, got[i:min(i+40, len(got))], want[i:min(i+40, len(want))])
			}
		}
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
}

// TestParseReferenceFiles parses files laid out as the reference
// implementation's own serialization tests expect, and files from other
// writers: no metadata, no padding, tensors listed out of data order, an
// unknown field in an entry, null metadata.
func TestParseReferenceFiles(t *testing.T) {
	f32 := func(vs ...float32) []byte { return tensor.AsBytes(vs) }
	tests := []struct {
		name   string
		header string
		data   []byte
		want   map[string]tensor.Tensor
		order  []string // entry names in data order, when more than one
		meta   map[string]string
	}{
		{
			name:   "aligned attn0", // 72-byte header with 7 spaces of padding
			header: `{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       `,
			data:   f32(0, 1, 2, 3, 4, 5),
			want:   map[string]tensor.Tensor{"attn0": tensor.FromSlice(tensor.Shape{1, 1, 2, 3}, []float32{0, 1, 2, 3, 4, 5})},
		},
		{
			name:   "unpadded attn.0",
			header: `{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`,
			data:   f32(0, 1, 2, 3, 4, 5),
			want:   map[string]tensor.Tensor{"attn.0": tensor.FromSlice(tensor.Shape{1, 2, 3}, []float32{0, 1, 2, 3, 4, 5})},
		},
		{name: "empty", header: `{}      `},
		{name: "metadata only", header: `{"__metadata__":{"framework":"pt"}}     `, meta: map[string]string{"framework": "pt"}},
		{name: "null metadata", header: `{"__metadata__":null}`},
		{
			name: "out of order, unknown field, whitespace",
			header: "{ \"b\" : {\"shape\":[2],\"extra\":{\"x\":[1,{}]},\"data_offsets\":[4,6],\"dtype\":\"U8\"},\n" +
				"\"a\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]}, \"z\":{\"dtype\":\"BF16\",\"shape\":[0,3],\"data_offsets\":[6,6]} }\n\t ",
			data: []byte{0xff, 0xff, 0xff, 0xff, 9, 8},
			want: map[string]tensor.Tensor{
				"a": tensor.FromSlice(tensor.Shape{}, []int32{-1}),
				"b": tensor.FromSlice(tensor.Shape{2}, []uint8{9, 8}),
				"z": tensor.New(tensor.BFloat16, tensor.Shape{0, 3}),
			},
			order: []string{"a", "b", "z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := buildFile(tt.header, tt.data)
			f, err := Parse(bytes.NewReader(file), int64(len(file)), tt.name)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(f.Entries) != len(tt.want) {
				t.Fatalf("got %d entries, want %d", len(f.Entries), len(tt.want))
			}
			for name, want := range tt.want {
				got, ok := f.Get(name)
				if !ok || got.String() != want.String() || !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Errorf("%s: got %v %x (found %v), want %v %x", name, got, got.Bytes(), ok, want, want.Bytes())
				}
			}
			if len(f.Meta) != len(tt.meta) || (tt.meta != nil && !maps.Equal(f.Meta, tt.meta)) {
				t.Errorf("got metadata %q, want %q", f.Meta, tt.meta)
			}
			for i, name := range tt.order {
				if got := f.Entries[i].Name; got != name {
					t.Errorf("entry %d: got %q, want %q (data order %q)", i, got, name, tt.order)
				}
			}
		})
	}
}

func TestSaveRejects(t *testing.T) {
	ok := filled(tensor.Float32, tensor.Shape{2}, 0)
	tests := []struct {
		name    string
		entries []Entry
		meta    map[string]string
		want    string
	}{
		{"duplicate name", []Entry{{"w", ok}, {"w", ok}}, nil, "appears twice"},
		{"reserved name", []Entry{{"__metadata__", ok}}, nil, "reserved"},
		{"invalid UTF-8 name", []Entry{{"w\xff", ok}}, nil, "UTF-8"},
		{"invalid UTF-8 metadata", []Entry{{"w", ok}}, map[string]string{"k": "\xc3"}, "UTF-8"},
		{"zero tensor", []Entry{{"w", tensor.Tensor{}}}, nil, "dtype"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "x.safetensors")
			err := Save(path, tt.entries, tt.meta)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("got error %v, want one naming %s and containing %q", err, path, tt.want)
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("got files %q left in %s, want none", names, dir)
			}
		})
	}
}

func TestFloatBitsSurvive(t *testing.T) {
	// NaN payloads, infinities and negative zero are stored bit for bit.
	vals := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), math.SmallestNonzeroFloat64, math.MaxFloat64}
	bitsNaN := math.Float64frombits(0x7ff8_dead_beef_0001)
	vals = append(vals, bitsNaN)
	want := tensor.FromSlice(tensor.Shape{len(vals)}, vals)
	f := roundTrip(t, []Entry{{"v", want}}, nil)
	got, _ := f.Get("v")
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("got %x, want %x", got.Bytes(), want.Bytes())
	}
}
