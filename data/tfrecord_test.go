package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// Hand-built TFRecords. The masked CRCs were computed independently (a
// bitwise CRC-32C in Python, mask ((c >> 15) | (c << 17)) + 0xa282ead8);
// crc32c("123456789") = 0xe3069283 is the CRC-32C check value.
var handBuilt = []struct {
	payload string
	lenCRC  uint32 // masked crc32c of the 8 length bytes
	dataCRC uint32 // masked crc32c of the payload
}{
	{"123456789", 0x3971f937, 0xc78ab0e5},
	{"", 0x07980329, 0xa282ead8},
	{"hello tfrecord", 0x3f69e5c5, 0x22765b9f},
}

func handBuiltFile(t *testing.T) (string, []byte) {
	t.Helper()
	var b []byte
	for _, r := range handBuilt {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(r.payload)))
		b = binary.LittleEndian.AppendUint32(b, r.lenCRC)
		b = append(b, r.payload...)
		b = binary.LittleEndian.AppendUint32(b, r.dataCRC)
	}
	path := filepath.Join(t.TempDir(), "hand.tfrecord")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, b
}

func TestTFRecordHandBuilt(t *testing.T) {
	path, file := handBuiltFile(t)
	got, err := collect(t, TFRecords(path, TFRecordOptions{}), Config{}, func(r Record) [2]any {
		return [2]any{string(r.Data), r.Offset}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]any{{"123456789", int64(0)}, {"", int64(25)}, {"hello tfrecord", int64(41)}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// the writer produces the same bytes
	var w []byte
	for _, r := range handBuilt {
		w = AppendTFRecord(w, []byte(r.payload))
	}
	if !bytes.Equal(w, file) {
		t.Errorf("AppendTFRecord:\n got %s\nwant %s", hex.EncodeToString(w), hex.EncodeToString(file))
	}
	if got := MaskedCRC([]byte("123456789")); got != 0xc78ab0e5 {
		t.Errorf("MaskedCRC: got %#x, want 0xc78ab0e5", got)
	}
}

// TestTFRecordRejectsEveryFlippedBit flips each bit of the file in turn:
// every flip must be reported as a *FormatError with the file and the
// offset of the damaged record, never accepted.
func TestTFRecordRejectsEveryFlippedBit(t *testing.T) {
	_, file := handBuiltFile(t)
	path := filepath.Join(t.TempDir(), "flipped.tfrecord")
	starts := []int64{0, 25, 41}
	for bit := range 8 * len(file) {
		b := slices.Clone(file)
		b[bit/8] ^= 1 << (bit % 8)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := collect(t, TFRecords(path, TFRecordOptions{}), Config{}, func(r Record) string { return string(r.Data) })
		if err == nil {
			t.Fatalf("bit %d flipped: got no error", bit)
		}
		fe := wantFormatError(t, err, path)
		rec := 0
		for i, s := range starts {
			if int64(bit/8) >= s {
				rec = i
			}
		}
		if fe.Offset != starts[rec] {
			t.Fatalf("bit %d flipped: got offset %d, want %d (record %d)", bit, fe.Offset, starts[rec], rec)
		}
	}
}

func TestTFRecordTruncatedAndSkip(t *testing.T) {
	_, file := handBuiltFile(t)
	dir := t.TempDir()
	trunc := filepath.Join(dir, "trunc.tfrecord")
	os.WriteFile(trunc, file[:len(file)-3], 0o644)
	_, err := collect(t, TFRecords(trunc, TFRecordOptions{}), Config{}, ident[Record])
	if fe := wantFormatError(t, err, trunc); fe.Offset != 41 || !errors.Is(err, errUnexpectedEOF()) {
		t.Errorf("got %v, want a truncated record at offset 41", err)
	}
	// a bad data checksum is skipped and the next record still read
	bad := slices.Clone(file)
	bad[12] ^= 0xff // first payload byte
	skip := filepath.Join(dir, "skip.tfrecord")
	os.WriteFile(skip, bad, 0o644)
	got, err := collect(t, TFRecords(skip, TFRecordOptions{}), Config{OnError: Skip}, func(r Record) string { return string(r.Data) })
	if err != nil || !slices.Equal(got, []string{"", "hello tfrecord"}) {
		t.Errorf("skip: got %q, %v; want the two good records", got, err)
	}
	// gzip
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(file)
	zw.Close()
	gz := filepath.Join(dir, "file.tfrecord.gz")
	os.WriteFile(gz, z.Bytes(), 0o644)
	got, err = collect(t, TFRecords(gz, TFRecordOptions{Gzip: true}), Config{}, func(r Record) string { return string(r.Data) })
	if err != nil || len(got) != 3 || got[2] != "hello tfrecord" {
		t.Errorf("gzip: got %q, %v", got, err)
	}
}

func errUnexpectedEOF() error { return ioErrUnexpectedEOF }

// example builds a tf.train.Example with protowire.
func example(packed bool) []byte {
	feature := func(kind protowire.Number, list []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, kind, protowire.BytesType), list)
	}
	entry := func(key string, feat []byte) []byte {
		e := protowire.AppendTag(nil, 1, protowire.BytesType)
		e = protowire.AppendString(e, key)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		return protowire.AppendBytes(e, feat)
	}
	var bl []byte
	for _, s := range []string{"cat", "dog"} {
		bl = protowire.AppendTag(bl, 1, protowire.BytesType)
		bl = protowire.AppendString(bl, s)
	}
	var fl, il []byte
	if packed {
		var p []byte
		for _, f := range []uint32{0x3f800000, 0x40000000} { // 1, 2
			p = protowire.AppendFixed32(p, f)
		}
		fl = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), p)
		p = nil
		for _, v := range []int64{7, -3} {
			p = protowire.AppendVarint(p, uint64(v))
		}
		il = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), p)
	} else {
		for _, f := range []uint32{0x3f800000, 0x40000000} {
			fl = protowire.AppendFixed32(protowire.AppendTag(fl, 1, protowire.Fixed32Type), f)
		}
		for _, v := range []int64{7, -3} {
			il = protowire.AppendVarint(protowire.AppendTag(il, 1, protowire.VarintType), uint64(v))
		}
	}
	var features []byte
	for _, e := range [][]byte{entry("label", feature(1, bl)), entry("x", feature(2, fl)), entry("ids", feature(3, il))} {
		features = protowire.AppendBytes(protowire.AppendTag(features, 1, protowire.BytesType), e)
	}
	// an unknown field the parser must skip
	features = protowire.AppendVarint(protowire.AppendTag(features, 9, protowire.VarintType), 1)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), features)
}

func TestParseExample(t *testing.T) {
	for _, packed := range []bool{true, false} {
		ex, err := ParseExample(example(packed))
		if err != nil {
			t.Fatalf("packed=%v: %v", packed, err)
		}
		if got := ex.Names(); !slices.Equal(got, []string{"ids", "label", "x"}) {
			t.Errorf("packed=%v: got names %v", packed, got)
		}
		l, x, ids := ex.Features["label"], ex.Features["x"], ex.Features["ids"]
		if l.Kind != BytesKind || len(l.Bytes) != 2 || string(l.Bytes[1]) != "dog" {
			t.Errorf("packed=%v: got label %+v, want [cat dog]", packed, l)
		}
		if x.Kind != FloatKind || !slices.Equal(x.Floats, []float32{1, 2}) {
			t.Errorf("packed=%v: got x %+v, want [1 2]", packed, x)
		}
		if ids.Kind != Int64Kind || !slices.Equal(ids.Int64s, []int64{7, -3}) {
			t.Errorf("packed=%v: got ids %+v, want [7 -3]", packed, ids)
		}
	}
	b := example(true)
	for cut := 1; cut < len(b); cut++ {
		if _, err := ParseExample(b[:cut]); err == nil {
			continue // some prefixes are valid messages
		} else {
			var ee *ExampleError
			if !errors.As(err, &ee) || ee.Offset < 0 || ee.Offset > cut {
				t.Fatalf("cut at %d: got %v, want an *ExampleError inside the message", cut, err)
			}
		}
	}
}

func TestParseExampleRecord(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ex.tfrecord")
	b := AppendTFRecord(nil, example(true))
	b = AppendTFRecord(b, []byte{0x0a, 0x05, 0x0a}) // a truncated Example
	os.WriteFile(path, b, 0o644)
	ds := Map(TFRecords(path, TFRecordOptions{}), "parse", func(ctx contextT, r Record) (int, error) {
		ex, err := ParseExampleRecord(r)
		return len(ex.Features), err
	})
	got, err := collect(t, ds, Config{}, ident[int])
	fe := wantFormatError(t, err, path)
	if !slices.Equal(got, []int{3}) || fe.Offset != int64(len(AppendTFRecord(nil, example(true)))) {
		t.Errorf("got %v and offset %d", got, fe.Offset)
	}
}
