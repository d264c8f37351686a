package tfevents

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// FileVersion is the file_version of an event file's first record.
const FileVersion = "brain.Event:2"

// Event is one record of a TensorBoard event file (tensorflow's
// core/util/event.proto, the fields headroom writes and reads).
type Event struct {
	WallTime    float64 // seconds since the Unix epoch (field 1)
	Step        int64   // field 2
	FileVersion string  // field 3; set on the first record only
	Summary     []Value // field 5 (Summary.value); nil when the event has none
}

// Value is one Summary.Value: a scalar under a tag. Values of other kinds
// (images, histograms, tensors) are read with HasSimpleValue false.
type Value struct {
	Tag            string  // field 1
	SimpleValue    float32 // field 2
	HasSimpleValue bool
}

// FormatError reports a bad record or event in an event file.
type FormatError struct {
	Path   string
	Offset int64 // of the record that is bad
	Reason string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("tfevents: event file %s: record at byte %d: %s", e.Path, e.Offset, e.Reason)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's checksum (tensorflow/core/lib/hash/crc32c.h):
// crc32c (Castagnoli) rotated right by 15 bits plus 0xa282ead8, so that a
// CRC over data that embeds CRCs stays well distributed.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// appendRecord appends data framed as one TFRecord:
//
//	uint64 length, little endian
//	uint32 masked crc32c of the 8 length bytes
//	byte   data[length]
//	uint32 masked crc32c of data
func appendRecord(dst, data []byte) []byte {
	at := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(data)))
	dst = binary.LittleEndian.AppendUint32(dst, maskedCRC(dst[at:at+8]))
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(data))
}

// appendEvent appends e encoded as an Event proto.
func appendEvent(b []byte, e *Event) []byte {
	b = protowire.AppendTag(b, 1, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(e.WallTime))
	if e.Step != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(e.Step))
	}
	if e.FileVersion != "" {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, e.FileVersion)
	}
	if e.Summary != nil {
		size := 0
		for i := range e.Summary {
			n := valueSize(&e.Summary[i])
			size += protowire.SizeTag(1) + protowire.SizeBytes(n)
		}
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(size))
		for i := range e.Summary {
			v := &e.Summary[i]
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(valueSize(v)))
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendString(b, v.Tag)
			if v.HasSimpleValue {
				b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
				b = protowire.AppendFixed32(b, math.Float32bits(v.SimpleValue))
			}
		}
	}
	return b
}

func valueSize(v *Value) int {
	n := protowire.SizeTag(1) + protowire.SizeBytes(len(v.Tag))
	if v.HasSimpleValue {
		n += protowire.SizeTag(2) + protowire.SizeFixed32()
	}
	return n
}

// EventWriter writes a TensorBoard event file: TFRecords of Event protos,
// the first holding FileVersion. Write scalars with Scalar; they reach the
// file on Flush or Close. Scalar does not allocate once its buffers have
// grown. An EventWriter is not safe for concurrent use.
type EventWriter struct {
	f     *os.File
	w     *bufio.Writer
	path  string
	event []byte // scratch: one encoded event
	frame []byte // scratch: its record
	one   [1]Value
	err   error // sticky
}

// NewEventWriter creates dir (if needed) and a new event file in it named
// "events.out.tfevents.<unix seconds>.<hostname>" (with ".1", ".2", ...
// appended if that name is taken), and writes the file_version record.
func NewEventWriter(dir string) (*EventWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tfevents: event file directory: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	base := filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d.%s", time.Now().Unix(), host))
	var f *os.File
	path := base
	for i := 1; ; i++ {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) || i > 1000 {
			break
		}
		path = base + "." + strconv.Itoa(i)
	}
	if err != nil {
		return nil, fmt.Errorf("tfevents: creating event file: %w", err)
	}
	w := &EventWriter{f: f, w: bufio.NewWriter(f), path: path}
	w.write(&Event{WallTime: wallTime(time.Now()), FileVersion: FileVersion})
	if err := w.Flush(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return w, nil
}

// Path returns the event file's path.
func (w *EventWriter) Path() string { return w.path }

// Scalar records value under tag at step (an Event with one
// Summary.Value.simple_value, a float32 as TensorBoard stores it).
func (w *EventWriter) Scalar(tag string, step int64, value float64) error {
	w.one[0] = Value{Tag: tag, SimpleValue: float32(value), HasSimpleValue: true}
	e := Event{WallTime: wallTime(time.Now()), Step: step, Summary: w.one[:]}
	return w.write(&e)
}

func (w *EventWriter) write(e *Event) error {
	if w.err != nil {
		return w.err
	}
	if w.f == nil {
		return fmt.Errorf("tfevents: event file %s is closed", w.path)
	}
	w.event = appendEvent(w.event[:0], e)
	w.frame = appendRecord(w.frame[:0], w.event)
	if _, err := w.w.Write(w.frame); err != nil {
		w.err = fmt.Errorf("tfevents: writing event file %s: %w", w.path, err)
	}
	return w.err
}

// Flush writes buffered events to the file.
func (w *EventWriter) Flush() error {
	if w.err != nil {
		return w.err
	}
	if w.f == nil {
		return nil
	}
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("tfevents: writing event file %s: %w", w.path, err)
	}
	return w.err
}

// Close flushes and closes the file. Closing twice is not an error.
func (w *EventWriter) Close() error {
	if w.f == nil {
		return w.err
	}
	err := w.Flush()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tfevents: closing event file %s: %w", w.path, cerr)
	}
	w.f = nil
	return err
}

func wallTime(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// ReadEvents reads an event file, checking both checksums of every record.
// At the first bad record it returns the events before it and a
// *FormatError naming the file and the record's byte offset.
func ReadEvents(path string) ([]Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tfevents: reading event file: %w", err)
	}
	return parseEvents(path, data)
}

// parseEvents decodes the TFRecords of an event file held in data.
func parseEvents(path string, data []byte) ([]Event, error) {
	var out []Event
	for off := 0; off < len(data); {
		bad := func(format string, args ...any) ([]Event, error) {
			return out, &FormatError{Path: path, Offset: int64(off), Reason: fmt.Sprintf(format, args...)}
		}
		rest := data[off:]
		if len(rest) < 12 {
			return bad("truncated header: %d of 12 bytes", len(rest))
		}
		if got, want := binary.LittleEndian.Uint32(rest[8:12]), maskedCRC(rest[:8]); got != want {
			return bad("length checksum %#08x, want %#08x", got, want)
		}
		n := binary.LittleEndian.Uint64(rest[:8])
		if len(rest) < 16 || n > uint64(len(rest)-16) {
			return bad("truncated: length %d, %d bytes left", n, len(rest)-12)
		}
		payload := rest[12 : 12+n]
		if got, want := binary.LittleEndian.Uint32(rest[12+n:]), maskedCRC(payload); got != want {
			return bad("data checksum %#08x, want %#08x", got, want)
		}
		e, err := decodeEvent(payload)
		if err != nil {
			return bad("event: %v", err)
		}
		out = append(out, e)
		off += 16 + int(n)
	}
	return out, nil
}

func decodeEvent(b []byte) (Event, error) {
	var e Event
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.Fixed64Type:
			e.WallTime = math.Float64frombits(x)
		case num == 2 && typ == protowire.VarintType:
			e.Step = int64(x)
		case num == 3 && typ == protowire.BytesType:
			e.FileVersion = string(v)
		case num == 5 && typ == protowire.BytesType:
			if e.Summary == nil {
				e.Summary = []Value{}
			}
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != 1 {
					return nil
				}
				if typ != protowire.BytesType {
					return fmt.Errorf("summary value has wire type %d", typ)
				}
				val, err := decodeValue(v)
				e.Summary = append(e.Summary, val)
				return err
			})
		case num <= 3 || num == 5:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	return e, err
}

func decodeValue(b []byte) (Value, error) {
	var val Value
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			val.Tag = string(v)
		case num == 2 && typ == protowire.Fixed32Type:
			val.SimpleValue, val.HasSimpleValue = math.Float32frombits(uint32(x)), true
		case num <= 2:
			return fmt.Errorf("value field %d has wire type %d", num, typ)
		}
		return nil
	})
	return val, err
}

// fields calls f for each field of a protobuf message: bytes fields get v,
// varint and fixed fields get x; groups are skipped.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
