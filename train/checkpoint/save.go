package checkpoint

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/headroom-ml/headroom/internal/atomicfile"
)

// Save writes entries and meta to path as a safetensors file, atomically
// (package atomicfile): it writes a temporary file in the same directory,
// fsyncs it, renames it over path and fsyncs the directory. path therefore holds either its previous
// content or the complete new file, whatever happens; on error the temporary
// file is removed. (If only the final directory fsync fails, the rename has
// happened: path holds the new, complete file, and Save still reports the
// error because the rename may not survive a power loss.)
//
// Tensors are written in the reference writer's order (descending dtype
// alignment, then name), so each is naturally aligned in the file. Save adds
// the data_crc32c metadata key, replacing any value the caller gave.
func Save(path string, entries []Entry, meta map[string]string) error {
	h, err := prepare(entries, meta)
	if err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(fsys, path, 0o666, h.writeTo); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	return nil
}

// prepared is a checked, ordered checkpoint ready to write.
type prepared struct {
	header  []byte  // JSON, padded with spaces to a multiple of 8
	entries []Entry // in data order
}

// prepare checks entries and meta, orders the tensors and builds the header.
func prepare(entries []Entry, meta map[string]string) (*prepared, error) {
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if !utf8.ValidString(e.Name) {
			return nil, fmt.Errorf("tensor name %q is not valid UTF-8", e.Name)
		}
		if e.Name == "__metadata__" {
			return nil, errors.New(`"__metadata__" is reserved and cannot name a tensor`)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("tensor name %q appears twice", e.Name)
		}
		seen[e.Name] = true
		t := e.Tensor
		if _, _, ok := dtypeCode(t.DType()); !ok {
			return nil, fmt.Errorf("tensor %q: dtype %v cannot be stored", e.Name, t.DType())
		}
		if err := t.Shape().Validate(); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", e.Name, err)
		}
		if want := t.Shape().Size() * t.DType().Size(); len(t.Bytes()) != want {
			return nil, fmt.Errorf("tensor %q: %v has %d bytes, want %d", e.Name, t, len(t.Bytes()), want)
		}
	}
	for k, v := range meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("metadata %q: %q is not valid UTF-8", k, v)
		}
	}

	ordered := slices.Clone(entries)
	slices.SortFunc(ordered, func(a, b Entry) int {
		_, ra, _ := dtypeCode(a.Tensor.DType())
		_, rb, _ := dtypeCode(b.Tensor.DType())
		return cmp.Or(cmp.Compare(rb, ra), cmp.Compare(a.Name, b.Name))
	})
	crc := uint32(0)
	for _, e := range ordered {
		crc = crc32.Update(crc, castagnoli, e.Tensor.Bytes())
	}
	m := make(map[string]string, len(meta)+1)
	for k, v := range meta {
		m[k] = v
	}
	m[KeyDataCRC32C] = fmt.Sprintf("%08x", crc)

	// {"__metadata__":{sorted keys},"name":{"dtype":..,"shape":[..],"data_offsets":[b,e]},...}
	b := []byte(`{"__metadata__":{`)
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	b = append(b, '}')
	off := 0
	for _, e := range ordered {
		code, _, _ := dtypeCode(e.Tensor.DType())
		b = append(b, ',')
		b = appendJSONString(b, e.Name)
		b = append(b, `:{"dtype":"`...)
		b = append(b, code...)
		b = append(b, `","shape":[`...)
		for i, d := range e.Tensor.Shape() {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(d), 10)
		}
		b = append(b, `],"data_offsets":[`...)
		b = strconv.AppendInt(b, int64(off), 10)
		off += len(e.Tensor.Bytes())
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(off), 10)
		b = append(b, "]}"...)
	}
	b = append(b, '}')
	for len(b)%headerAlign != 0 {
		b = append(b, ' ')
	}
	return &prepared{header: b, entries: ordered}, nil
}

// writeTo writes the file: header length, header, data.
func (h *prepared) writeTo(w io.Writer) error {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(h.header)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(h.header); err != nil {
		return err
	}
	for _, e := range h.entries {
		if _, err := w.Write(e.Tensor.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// appendJSONString appends s as a JSON string (RFC 8259 section 7): quote,
// backslash and control characters escaped, everything else as UTF-8.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// fsys is the file system Save writes through; tests substitute one that
// injects faults (package faultfs).
var fsys atomicfile.FS = atomicfile.OS
