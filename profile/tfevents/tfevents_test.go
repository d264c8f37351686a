package tfevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crcIndependent is the masked crc32c computed here from hash/crc32 and
// the mask formula of tensorflow/core/lib/hash/crc32c.h, apart from the
// package's own maskedCRC.
func crcIndependent(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	return (c>>15 | c<<17) + 0xa282ead8
}

func TestMaskedCRCKnownValues(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		want uint32
	}{
		// The length field of an empty record: 8 zero bytes. 0x07980329 was
		// derived once with a bitwise CRC-32C in Python (reflected
		// polynomial 0x82f63b78, init and final xor 0xffffffff; it gives the
		// standard check value 0xe3069283 for "123456789"), then masked.
		{"empty record's length", make([]byte, 8), 0x07980329},
		// crc32c of nothing is 0, so its mask is the mask's constant.
		{"empty data", nil, 0xa282ead8},
		// The length (26) of the event of TestEventEncoding, same derivation.
		{"length 26", []byte{26, 0, 0, 0, 0, 0, 0, 0}, 0x2dd89b12},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := maskedCRC(c.data); got != c.want {
				t.Errorf("maskedCRC = %#08x, want %#08x", got, c.want)
			}
			if got := crcIndependent(c.data); got != c.want {
				t.Errorf("hash/crc32 + mask = %#08x, want %#08x", got, c.want)
			}
		})
	}
	if got := crc32.Checksum([]byte("123456789"), crc32.MakeTable(crc32.Castagnoli)); got != 0xe3069283 {
		t.Errorf("crc32c check value %#08x, want 0xe3069283", got)
	}
}

// TestEventEncoding checks one Event against bytes written out by hand from
// the protobuf encoding rules: field 1 wall_time fixed64 (tag 0x09), field 2
// step varint (0x10), field 5 summary bytes (0x2a) holding field 1 value
// bytes (0x0a) holding field 1 tag (0x0a) and field 2 simple_value fixed32
// (0x15); 1.5 is 0x3ff8000000000000, 0.25f is 0x3e800000.
func TestEventEncoding(t *testing.T) {
	want := []byte{
		0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, // wall_time 1.5
		0x10, 0x03, // step 3
		0x2a, 0x0d, // summary, 13 bytes
		0x0a, 0x0b, // value, 11 bytes
		0x0a, 0x04, 'l', 'o', 's', 's', // tag "loss"
		0x15, 0, 0, 0x80, 0x3e, // simple_value 0.25
	}
	e := Event{WallTime: 1.5, Step: 3, Summary: []Value{{Tag: "loss", SimpleValue: 0.25, HasSimpleValue: true}}}
	got := appendEvent(nil, &e)
	if !bytes.Equal(got, want) {
		t.Fatalf("event encodes as % x, want % x", got, want)
	}
	rec := appendRecord(nil, got)
	wantRec := binary.LittleEndian.AppendUint64(nil, 26)
	wantRec = binary.LittleEndian.AppendUint32(wantRec, 0x2dd89b12)
	wantRec = append(wantRec, want...)
	wantRec = binary.LittleEndian.AppendUint32(wantRec, 0x55b254d0) // derived as above
	if !bytes.Equal(rec, wantRec) {
		t.Errorf("record % x, want % x", rec, wantRec)
	}
	back, err := decodeEvent(got)
	if err != nil {
		t.Fatal(err)
	}
	if back.WallTime != 1.5 || back.Step != 3 || len(back.Summary) != 1 || back.Summary[0] != e.Summary[0] {
		t.Errorf("decoded %+v, want %+v", back, e)
	}
}

func writeEvents(t *testing.T, dir string, scalars []Value, steps []int64) string {
	t.Helper()
	w, err := NewEventWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range scalars {
		if err := w.Scalar(v.Tag, steps[i], float64(v.SimpleValue)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	return w.Path()
}

var testScalars = []Value{
	{Tag: "loss", SimpleValue: 2.25, HasSimpleValue: true},
	{Tag: "accuracy", SimpleValue: 0.5, HasSimpleValue: true},
	{Tag: "memory/param_bytes", SimpleValue: 814144, HasSimpleValue: true},
	{Tag: "loss", SimpleValue: float32(math.Inf(1)), HasSimpleValue: true},
	{Tag: "", SimpleValue: -1e-30, HasSimpleValue: true},
}
var testSteps = []int64{1, 1, 1, 1 << 40, -7}

func TestEventsRoundTrip(t *testing.T) {
	before := time.Now()
	path := writeEvents(t, t.TempDir(), testScalars, testSteps)
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	re := regexp.MustCompile(`^events\.out\.tfevents\.(\d+)\.` + regexp.QuoteMeta(host) + `$`)
	m := re.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		t.Errorf("file name %q, want events.out.tfevents.<unix seconds>.%s", filepath.Base(path), host)
	} else if sec, _ := strconv.ParseInt(m[1], 10, 64); sec < before.Unix() || sec > time.Now().Unix() {
		t.Errorf("file name time %s, want the Unix seconds when it was created (%d)", m[1], before.Unix())
	}
	evs, err := ReadEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(testScalars)+1 {
		t.Fatalf("%d events, want %d", len(evs), len(testScalars)+1)
	}
	if evs[0].FileVersion != FileVersion || evs[0].Summary != nil {
		t.Errorf("first event %+v, want file_version %q and no summary", evs[0], FileVersion)
	}
	for i, e := range evs {
		if e.WallTime < float64(before.Unix())-1 || e.WallTime > float64(time.Now().Unix())+1 {
			t.Errorf("event %d: wall time %v, want about now", i, e.WallTime)
		}
		if i == 0 {
			continue
		}
		if e.Step != testSteps[i-1] || len(e.Summary) != 1 || e.Summary[0] != testScalars[i-1] || e.FileVersion != "" {
			t.Errorf("event %d: %+v, want step %d value %+v", i, e, testSteps[i-1], testScalars[i-1])
		}
	}
}

func TestEventFramingByHand(t *testing.T) {
	path := writeEvents(t, t.TempDir(), testScalars, testSteps)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	for off := 0; off < len(data); records++ {
		if len(data)-off < 16 {
			t.Fatalf("record %d at %d: %d bytes left, want >= 16", records, off, len(data)-off)
		}
		n := int(binary.LittleEndian.Uint64(data[off:]))
		if got, want := binary.LittleEndian.Uint32(data[off+8:]), crcIndependent(data[off:off+8]); got != want {
			t.Errorf("record %d: length crc %#08x, want %#08x", records, got, want)
		}
		payload := data[off+12 : off+12+n]
		if got, want := binary.LittleEndian.Uint32(data[off+12+n:]), crcIndependent(payload); got != want {
			t.Errorf("record %d: data crc %#08x, want %#08x", records, got, want)
		}
		if records == 0 && !bytes.Contains(payload, []byte("\x1a\x0dbrain.Event:2")) {
			t.Errorf("first record % x does not hold file_version (field 3) %q", payload, FileVersion)
		}
		off += 16 + n
	}
	if records != len(testScalars)+1 {
		t.Errorf("%d records, want %d", records, len(testScalars)+1)
	}
}

func TestEventsCorruptionNamesOffset(t *testing.T) {
	dir := t.TempDir()
	path := writeEvents(t, dir, testScalars[:2], testSteps[:2])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first := 16 + int(binary.LittleEndian.Uint64(data)) // offset of record 1
	cases := []struct {
		name   string
		bit    int // byte whose low bit flips; -1: truncate instead
		offset int64
		reason string
	}{
		{"length", 0, 0, "length checksum"},
		{"length crc", 9, 0, "length checksum"},
		{"data", 14, 0, "data checksum"},
		{"data crc", first - 1, 0, "data checksum"},
		{"second record's data", first + 20, int64(first), "data checksum"},
		{"truncated", -1, int64(first), "truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := bytes.Clone(data)
			if c.bit >= 0 {
				bad[c.bit] ^= 1
			} else {
				bad = bad[:first+10]
			}
			p := filepath.Join(dir, "bad")
			if err := os.WriteFile(p, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			evs, err := ReadEvents(p)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v, want *FormatError", err)
			}
			if fe.Offset != c.offset || fe.Path != p || !strings.Contains(fe.Reason, c.reason) {
				t.Errorf("error at %d (%s: %s), want offset %d and %q", fe.Offset, fe.Path, fe.Reason, c.offset, c.reason)
			}
			if msg := err.Error(); !strings.Contains(msg, p) || !strings.Contains(msg, fmt.Sprintf("byte %d", c.offset)) {
				t.Errorf("message %q does not name the file and byte %d", msg, c.offset)
			}
			if want := int(c.offset / int64(first)); len(evs) != want {
				t.Errorf("%d events before the bad record, want %d", len(evs), want)
			}
		})
	}
}

func TestEventWriterNamesDoNotCollide(t *testing.T) {
	dir := t.TempDir()
	a, err := NewEventWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewEventWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Path() == b.Path() {
		t.Errorf("two writers share %s", a.Path())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Scalar("x", 1, 1); err == nil {
		t.Error("Scalar after Close: nil error, want one")
	}
}

func TestEventWriterScalarDoesNotAllocate(t *testing.T) {
	w, err := NewEventWriter(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	step := int64(0)
	allocs := testing.AllocsPerRun(100, func() {
		step++
		if err := w.Scalar("batch_loss", step, 0.5); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Scalar allocates %v times per call, want 0", allocs)
	}
}

// FuzzReadEvents feeds arbitrary bytes to the event file parser: it never
// panics, and a failure is a *FormatError at a record boundary inside the
// input, after the events it could read.
func FuzzReadEvents(f *testing.F) {
	var file []byte
	file = appendRecord(file, appendEvent(nil, &Event{WallTime: 1, FileVersion: FileVersion}))
	file = appendRecord(file, appendEvent(nil, &Event{WallTime: 2, Step: 5, Summary: []Value{{Tag: "loss", SimpleValue: 1, HasSimpleValue: true}}}))
	f.Add(file)
	f.Add([]byte{})
	f.Add(file[:20])
	f.Add(appendRecord(nil, nil))
	f.Add(appendRecord(nil, []byte{0x2a, 0x02, 0x0a, 0x00}))       // a summary with an empty value
	f.Add(appendRecord(nil, []byte{0x2a, 0x03, 0x0a, 0x05, 0x0a})) // a value running past its summary
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := parseEvents("fuzz", data)
		if err == nil {
			return
		}
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("error %v is not a *FormatError", err)
		}
		if fe.Offset < 0 || fe.Offset >= int64(len(data)) {
			t.Fatalf("error offset %d outside the %d bytes", fe.Offset, len(data))
		}
		off := 0
		for range evs {
			off += 16 + int(binary.LittleEndian.Uint64(data[off:]))
		}
		if int64(off) != fe.Offset {
			t.Fatalf("%d events end at %d, error at %d", len(evs), off, fe.Offset)
		}
	})
}
